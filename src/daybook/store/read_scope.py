"""A read scope: within it, each run's whole journal is read from the store once and handed out
again to every later reader in the same scope (the same thread or task).

A page of the web inspector is one such scope. Its sections each ask the store for the run's
journal (the timeline, the budget, the cost ledger, the gates' verdicts, the effects): on a run
of 10,000 steps that was five reads and decodes of the same rows per page, most of its time.
The journal is append-only, so a copy read at the start of the page is the page's consistent
snapshot; a row committed meanwhile shows at the next page, as it would had it committed a
moment later. Only whole-journal reads (`load(run_id)`) are shared: a read after a seq (the live
streams, a follower) always goes to the store. A scope keeps the `KEEP` journals it used last
(a journal it let go is read again if asked for again). Outside a scope nothing is kept.
Never open one around writes: a run executed in it would replay from the journal it began with.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..records import Event

# The journals a scope keeps, the most recently used: a page reads one run's journal again and
# again (and its parent's or children's), while a page over many runs (the approvals inbox)
# reads each once; keeping every one would hold them all in memory until the page ends.
KEEP = 4

# (store handle, run id) -> the journal read in this scope, least recently used first. A
# ContextVar: each request's thread (or task) has its own, so concurrent pages never see each
# other's reads.
_READ: ContextVar[OrderedDict[tuple[int, str], list[Event]] | None] = ContextVar(
    "daybook_read_scope", default=None
)


@contextmanager
def read_scope() -> Iterator[None]:
    """Read each run's whole journal at most once until the block ends (nested: the outer scope)."""
    if _READ.get() is not None:
        yield
        return
    token = _READ.set(OrderedDict())
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
        if len(kept) > KEEP:
            kept.popitem(last=False)
    else:
        kept.move_to_end(key)
    return list(found)
