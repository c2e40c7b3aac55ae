"""The read-only handle (`open_store(url, read_only=True)`): the read parts of a store opened
read-only, and nothing else of it.

Each read method is the backend's own, bound here one by one, so mypy checks that the handle
implements `ReadStore` (a read added to a read part and not here is a type error). Every write
of the protocol (`parts.WRITES`, derived from the write parts, never listed by hand) is a refusal
that says how to write, raised before anything reaches the database; the database refuses too
(SQLite `mode=ro`, a PostgreSQL read-only session).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .parts import WRITES, ReadStore, Store


class ReadOnlyStore:
    """A store's read parts over a backend opened read-only."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.url, self.read_only, self.damage = inner.url, True, inner.damage
        self.dsn = str(getattr(inner, "dsn", inner.url))  # what connects (a heartbeat's own)
        # JournalReads
        self.get_run, self.list_runs, self.load = inner.get_run, inner.list_runs, inner.load
        self.open_effects, self.events_of_kind = inner.open_effects, inner.events_of_kind
        self.find_intent, self.load_named = inner.find_intent, inner.load_named
        self.runs_page, self.run_counts = inner.runs_page, inner.run_counts
        # InboxReads, CommitsReads, EntitiesReads, EpochsReads
        self.inbox, self.approvers = inner.inbox, inner.approvers
        self.staging, self.get_record, self.commits = inner.staging, inner.get_record, inner.commits
        self.entity_view, self.entity_list = inner.entity_view, inner.entity_list
        self.tx_rows, self.tx_signal = inner.tx_rows, inner.tx_signal
        # DispatchReads
        self.queue_rows, self.queue_names = inner.queue_rows, inner.queue_names
        self.search_runs, self.attributes = inner.search_runs, inner.attributes
        self.schedule_rows = inner.schedule_rows
        self.chunks = inner.chunks  # StreamsReads
        # Admin (`meta_value` only reads on a read-only backend; `gc` refuses all but a dry run)
        self.meta_value, self.meta_items, self.current_role = (
            inner.meta_value,
            inner.meta_items,
            inner.current_role,
        )
        self.raw_rows, self.journal_run_ids = inner.raw_rows, inner.journal_run_ids
        self.quick_check, self.gc, self.gc_log, self.close = (
            inner.quick_check,
            inner.gc,
            inner.gc_log,
            inner.close,
        )


def _refused(name: str) -> Callable[..., Any]:
    def refuse(self: ReadOnlyStore, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError(
            f"the store {self.url} is open read-only (Daybook(url, read_only=True), or a read "
            f"command), so it cannot write ({name}); open it without read_only to write"
        )

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


for _name in WRITES:
    setattr(ReadOnlyStore, _name, _refused(_name))


def _implements(handle: ReadOnlyStore) -> ReadStore:
    return handle  # mypy: the handle offers every read part
