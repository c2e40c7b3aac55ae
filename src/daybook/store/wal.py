"""The SQLite write-ahead log watch: commits are refused once the log was deleted or replaced.

SQLite goes on acknowledging commits into a write-ahead log that was unlinked under it (audit
D15), and a crash then loses every row the log held that was not yet checkpointed into the
database file: an act could run with no durable intent. The watch compares the log's inode with
the one it first saw, and once they differ refuses this commit and every later one
(`StoreUnavailable`), so the process stops acting.

It looks at most every `INTERVAL` seconds (a `stat` of the log is a system call that cost more
than the rest of the commit's own bookkeeping when it ran before every commit), so the window
it leaves is this: a log deleted at time T is noticed at the first commit after T + INTERVAL at
the latest, and the commits made in between (a few milliseconds' worth of steps) are
acknowledged into the deleted log, and acts may run after them. Those rows are lost only if
the process dies before SQLite checkpoints them (a clean close checkpoints them from the
still-open log), exactly like every row the log held before T, which no watch can save: the
deletion itself loses everything since the last checkpoint, and the interval adds at most
INTERVAL to that span. Once noticed, the refusal is for good: no later commit passes, whatever
the clock says.
"""

from __future__ import annotations

import os
import time

from ..errors import StoreUnavailable

# Seconds between two looks at the log: the longest a deleted log goes unnoticed while commits
# are made (see the module docstring).
INTERVAL = 0.005


class WalWatch:
    """Refuses commits once the store's write-ahead log was deleted or replaced under this
    process (see the module docstring); called before each commit batch, it costs a clock read,
    and a `stat` at most every `interval` seconds."""

    def __init__(self, path: str, interval: float = INTERVAL) -> None:
        self.wal = path + "-wal"
        self.interval = interval
        self.inode: tuple[int, int] | None = None
        self._next = 0.0  # when to look again (monotonic clock)
        self._gone = False

    def __call__(self) -> None:
        if self._gone:
            raise self._refusal()
        now = time.monotonic()
        if now < self._next:
            return
        try:
            st = os.stat(self.wal)
        except FileNotFoundError:
            if self.inode is None:
                return  # not made yet: SQLite creates it with the first write (looked for again)
            st = None
        seen = None if st is None else (st.st_dev, st.st_ino)
        if self.inode is None:
            self.inode = seen
        elif seen != self.inode:
            self._gone = True
            raise self._refusal()
        self._next = now + self.interval

    def _refusal(self) -> StoreUnavailable:
        return StoreUnavailable(
            f"the write-ahead log {self.wal!r} was deleted or replaced while this process "
            "had the store open: rows committed since may already be lost, and no more are "
            "accepted. Stop every process using the store, then run `daybook check`; runs "
            "resume from what the store still holds"
        )
