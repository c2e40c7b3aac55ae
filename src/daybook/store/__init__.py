"""The store: its protocol in parts (`parts`: journal, leases, inbox, commits, entities, epochs,
dispatch, admin; `Store` is their union) and `open_store(url)`.

Each method is one durable step: when it returns, what it wrote survives a crash of this process
(and, with the default durability, a power cut). Journal rows are append-only; only the run
header (status, lease) changes in place. One `SqlStore` (`sql`, `sql_parts`) writes every
statement once over a `Dialect` (`dialect`): `sqlite` (with `group` commit and the `wal` guard,
which refuses a commit once the write-ahead log was deleted under the process) and `postgres`
(with `postgres_link`, a connection re-established when the server drops it), each with its
schema and migrations (`sqlite_schema`, `postgres_schema`); `rows` maps rows to records;
`integrity` audits the rows (`check`) and salvages a damaged run (`salvage`). `secrets` and
`keys` turn secret values into keyed digests, `codec` holds the payload codecs, `codec_check`
the codec a store records (a handle with another key is refused at open) and `guarded` the
guard that applies both to every payload (`Daybook` opens every store behind it); `retention`
erases the payloads of old finished runs (`gc`).
`open_store(url, read_only=True)` never creates, upgrades or writes a store (`read_only`).

May import: `daybook.errors`, `daybook.records`. The dialects never import each other.
"""

from __future__ import annotations

import os
from typing import Literal, cast, overload

from ..errors import ConfigError, CorruptJournal, redact_url
from ..records import Event
from .parts import WRITES as WRITES
from .parts import Admin as Admin
from .parts import Commits as Commits
from .parts import CommitsReads as CommitsReads
from .parts import Dispatch as Dispatch
from .parts import DispatchReads as DispatchReads
from .parts import Entities as Entities
from .parts import EntitiesReads as EntitiesReads
from .parts import Epochs as Epochs
from .parts import EpochsReads as EpochsReads
from .parts import Inbox as Inbox
from .parts import InboxReads as InboxReads
from .parts import Journal as Journal
from .parts import JournalReads as JournalReads
from .parts import Leases as Leases
from .parts import ReadStore as ReadStore
from .parts import Store as Store
from .read_only import ReadOnlyStore
from .rows import RAW_TABLES as RAW_TABLES
from .rows import flag as flag

DEFAULT_URL = "sqlite:///daybook.db"


def resolve_url(url: str | None) -> str:
    """The URL a bare `Daybook()` or CLI without --db uses: $DAYBOOK_DB, else ./daybook.db. An
    empty one (a variable a script forgot to set) is an error, never ./daybook.db."""
    if url is None:
        url = os.environ.get("DAYBOOK_DB")
        if url is None:
            return DEFAULT_URL
        if not url.strip():
            raise ConfigError(
                "$DAYBOOK_DB is set but empty; give it a store URL (sqlite:///path.db or "
                "postgresql://...), or unset it for ./daybook.db"
            )
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(
            f"the store URL is {url!r}; give a store URL (sqlite:///path.db or postgresql://...), "
            "or none for $DAYBOOK_DB, else ./daybook.db"
        )
    return url


@overload
def open_store(url: str | None = None, read_only: Literal[False] = False) -> Store: ...


@overload
def open_store(url: str | None, read_only: Literal[True]) -> ReadStore: ...  # type: ignore[overload-overlap]


@overload
def open_store(url: str | None = None, read_only: bool = False) -> Store: ...


def open_store(url: str | None = None, read_only: bool = False) -> Store | ReadStore:
    """Open the store at `url`. Read-write creates it if missing and upgrades an older schema;
    `read_only` never creates, upgrades or writes anything (an error if there is no store): the
    handle has the read parts only, and refuses every write (`read_only.ReadOnlyStore`)."""
    url = resolve_url(url)
    store: Store
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        store = PostgresStore(url, read_only)
    elif url.startswith("sqlite:") or "://" not in url:
        from .sqlite import SQLiteStore

        store = SQLiteStore(url, read_only)
    else:
        raise ConfigError(
            f"unsupported store URL {redact_url(url)!r}: use sqlite:///path/to/file.db (or a plain path) "
            "or postgresql://user@host:port/dbname"
        )
    if read_only:
        # Typed as a whole store where the caller's `read_only` is a run-time flag: its writes
        # are refusals that say so.
        return cast(Store, ReadOnlyStore(store))
    return store


def load_listed(store: ReadStore, run_id: str) -> list[Event] | None:
    """A run's journal for a listing across runs: None (and the run put in `store.damage`) when a
    row does not decode, so one damaged run does not stop the listing of all the others."""
    try:
        return store.load(run_id)
    except CorruptJournal as exc:
        flag(store.damage, run_id, str(exc))
        return None
