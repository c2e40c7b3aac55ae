"""The SQLite write-ahead log watch: a commit is refused once the log was deleted or replaced."""

from __future__ import annotations

import os

from ..errors import StoreUnavailable


class WalWatch:
    """Refuses a commit once the store's write-ahead log was deleted or replaced under this
    process (audit D15): SQLite would go on acknowledging commits into the unlinked file, and a
    crash would then lose every row since, so an act could run with no durable intent. Costs one
    `stat` per commit batch."""

    def __init__(self, path: str) -> None:
        self.wal = path + "-wal"
        self.inode: tuple[int, int] | None = None

    def __call__(self) -> None:
        try:
            st = os.stat(self.wal)
        except FileNotFoundError:
            if self.inode is None:
                return  # not made yet: SQLite creates it with the first write
            st = None
        seen = None if st is None else (st.st_dev, st.st_ino)
        if self.inode is None:
            self.inode = seen
        elif seen != self.inode:
            raise StoreUnavailable(
                f"the write-ahead log {self.wal!r} was deleted or replaced while this process "
                "had the store open: rows committed since may already be lost, and no more are "
                "accepted. Stop every process using the store, then run `daybook check`; runs "
                "resume from what the store still holds"
            )
