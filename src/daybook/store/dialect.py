"""What differs between the SQL backends: the `Dialect` hooks that `SqlStore` (`sql`) runs its
statements through. A backend is one dialect module plus its DDL and migrations (`*_schema`).

Statements are written once (in `sql`, `sql_parts`, `dispatch_sql`, `tx_rows`, `retention`)
with `%s` or `%(name)s` marks and PostgreSQL's casts (`%s::json`); a dialect runs them the way
its driver wants (SQLite: `?`, `:name`, no casts). JSON columns come back as text on every
backend. The hooks: opening (connection, pragmas, migrations), `read` and `write` (SQLite
commits writes in groups behind the write-ahead-log guard; PostgreSQL heals a dropped
connection), the skip-locked claim fragment, what a unique violation means, the epoch
allocator, the wake-up of transaction waiters across processes (`TxSignal`), the engine's own
consistency check, and gc's housekeeping.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, TypeVar

from .retention import Exec
from .tx_signal import TxSignal

T = TypeVar("T")
# A connection as a write function sees it: `execute(sql, params)` returns a DB-API cursor.
Db = Any
Write = Callable[[Db], T]


class Dialect(ABC):
    """The few things one SQL backend does its own way."""

    name = "SQL"  # the engine, in messages
    url = ""  # for showing (a password masked)
    dsn = ""  # what connects
    read_only = False
    greatest = "GREATEST"  # the two-argument maximum
    position = "strpos"  # (haystack, needle): where needle starts in haystack (1-based), or 0
    # Whether a write whose connection dropped under it may have landed all the same, so the
    # journal append looks before writing again (PostgreSQL; SQLite fails a write whole).
    heals = False

    def skip_locked(self, of: str = "") -> str:
        """The clause that makes racing claimers each take a different row, none waiting
        (`of`: the table alias to lock); empty where one writer at a time holds the lock."""
        return ""

    @abstractmethod
    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """Every row of one query, seeing only committed rows."""

    @abstractmethod
    def write(self, fn: Write[T], atomic: bool = False, retry: bool = True) -> T:
        """Run `fn(db)` as one durable commit. `atomic`: fn issues several statements that must
        commit together; `retry`: fn may be run again if the connection dropped under it."""

    @abstractmethod
    def conflict(self, exc: BaseException) -> bool | None:
        """None unless `exc` is a uniqueness refusal of a journal insert; else whether it was on
        the idempotency key (DuplicateKey) rather than the seq (LeaseLost)."""

    @abstractmethod
    def next_epoch(self, db: Db) -> int:
        """Allocate the next transaction epoch inside the write `db`: totally ordered, and a
        smaller one never becomes visible after a larger one."""

    @abstractmethod
    def tx_signal(self) -> TxSignal:
        """What transaction frontier waiters sleep on (see `tx_signal`)."""

    @abstractmethod
    def columns(self, table: str) -> set[str]:
        """The columns `table` has (a read-only handle may read a store from before some)."""

    def quick_check(self) -> list[str]:
        """What the engine's own consistency check finds ([] when sound)."""
        return []

    def role(self) -> str | None:
        """The database role this handle connects as; None where the file is the only guard."""
        return None

    def claim_in_queue(self, db: Db, queue: str, sql: str, params: dict[str, Any]) -> Any:
        """Run the queued claim `sql` inside the write `db`; the row it returns, or None."""
        return db.execute(sql, params).fetchone()

    @abstractmethod
    def gc(self, work: Callable[[Exec], T], dry_run: bool) -> T:
        """Run retention's `work` in one transaction (only reading when `dry_run`)."""

    @abstractmethod
    def close(self) -> None: ...
