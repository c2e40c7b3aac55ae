"""A read scope: within it, each run's whole journal is read from the store once and handed out
again to every later reader in the same scope (the same thread or task).

A page of the web inspector is one such scope. Its sections each ask the store for the run's
journal (the timeline, the budget, the cost ledger, the gates' verdicts, the effects): on a run
of 10,000 steps that was five reads and decodes of the same rows per page, most of its time.
The journal is append-only, so a copy read at the start of the page is the page's consistent
snapshot; a row committed meanwhile shows at the next page, as it would had it committed a
moment later. Only whole-journal reads (`load(run_id)`) are shared: a read after a seq (the live
streams, a follower) always goes to the store. Outside a scope nothing is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..records import Event

# (store handle, run id) -> the journal read in this scope. A ContextVar: each request's thread
# (or task) has its own, so concurrent pages never see each other's reads.
_READ: ContextVar[dict[tuple[int, str], list[Event]] | None] = ContextVar("daybook_read_scope", default=None)


@contextmanager
def read_scope() -> Iterator[None]:
    """Read each run's whole journal at most once until the block ends (nested: the outer scope)."""
    if _READ.get() is not None:
        yield
        return
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def journal(handle: object, run_id: str, read: Callable[[], list[Event]]) -> list[Event]:
    """The run's whole journal: `read()` outside a scope, or the scope's copy (read on first use).
    A new list each time (a caller may sort or extend its own), of the same rows."""
    kept = _READ.get()
    if kept is None:
        return read()
    key = (id(handle), run_id)
    found = kept.get(key)
    if found is None:
        found = kept[key] = read()
    return list(found)
