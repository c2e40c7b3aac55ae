"""A child process for the streams tests: writes a run's stream and dies mid-stream (SIGKILL
after its first group of `answer` chunks commits), or reads a stream and dies after some chunks,
keeping its cursor in a file as a real consumer would.

    stream_child.py DB write RUN_ID [--die-mid-stream | --kill-after KIND:N]
    stream_child.py DB read RUN_ID OUT_FILE [--die-after N]
"""

from __future__ import annotations

import os
import sys
from typing import Any

import stream_app
from crashpoint import die, kill_at_journal_write, take

from daybook import Daybook
from daybook.store.guarded import GuardedStore


def _die_after_first_answer_group() -> None:
    real = GuardedStore.write_chunks

    def write_chunks(self: GuardedStore, run_id: str, chunks: list[Any]) -> list[Any]:
        out = real(self, run_id, chunks)
        if any(c.stream == "answer" for c in chunks):
            die()  # committed: a reader may have it; the rest of the reply never was
        return out

    GuardedStore.write_chunks = write_chunks  # type: ignore[method-assign]


def _read(book: Daybook, run_id: str, out_file: str, die_after: int | None) -> None:
    """Follow the stream from the cursor the file's last line holds, appending one line per
    chunk (cursor, n, value) before going on: the line and the cursor are one write."""
    after = 0
    if os.path.exists(out_file):
        with open(out_file) as f:
            lines = f.read().splitlines()
        if lines:
            after = int(lines[-1].split(" ", 1)[0])
    seen = 0
    with open(out_file, "a") as out:
        for chunk in book.follow(run_id, stream="answer", after=after, timeout=120):
            out.write(f"{chunk.cursor} {chunk.n} {chunk.value}\n")
            out.flush()
            os.fsync(out.fileno())
            seen += 1
            if die_after is not None and seen >= die_after:
                die()


def _index(argv: list[str], flag: str) -> int | None:
    return argv.index(flag) if flag in argv else None


def main(argv: list[str]) -> None:
    die_after = take(argv, "--die-after")
    kill = [argv.pop(i) for _ in range(2)] if (i := _index(argv, "--kill-after")) is not None else []
    mid = "--die-mid-stream" in argv
    if mid:
        argv.remove("--die-mid-stream")
    db, mode, run_id = argv[1], argv[2], argv[3]
    with Daybook(db, lease_ttl=1.0) as book:
        kill_at_journal_write(book, kill)
        if mode == "write":
            if mid:
                _die_after_first_answer_group()
            print(book.run(stream_app.streamed, "durability", run_id=run_id)[:20], flush=True)
        else:
            _read(book, run_id, argv[4], None if die_after is None else int(die_after))


if __name__ == "__main__":
    main(sys.argv)
