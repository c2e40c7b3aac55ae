"""A child process for the streams tests: writes a run's stream and dies mid-stream (SIGKILL
after its first group of `answer` chunks commits), or reads a stream and dies after some chunks,
keeping its cursor in a file as a real consumer would.

    stream_child.py DB write RUN_ID [--die-mid-stream | --kill-after KIND:N]
    stream_child.py DB read RUN_ID OUT_FILE [--die-after N]
    stream_child.py DB readas RUN_ID OUT_FILE READER [--die-after N | --ack-then-die N] [--ack-every K]

`readas` follows as a named durable reader (`book.follow(..., reader=READER)`): the store keeps
its position, the file only what the consumer did with each chunk. `--die-after N` dies once the
N-th chunk is recorded, before the next is asked for (so before it is acknowledged);
`--ack-then-die N` acknowledges it first; `--ack-every K` stores the position once per K chunks.
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


def _read_as(
    book: Daybook, run_id: str, out_file: str, reader: str, die_at: int | None, ack_at: int | None, every: int
) -> None:
    """Follow the stream as reader `reader`, appending one line per chunk (cursor, n, value)."""
    seen = 0
    with (
        open(out_file, "a") as out,
        book.follow(run_id, stream="answer", reader=reader, timeout=120, ack_every=every) as chunks,
    ):
        for chunk in chunks:
            out.write(f"{chunk.cursor} {chunk.n} {chunk.value}\n")
            out.flush()
            os.fsync(out.fileno())
            seen += 1
            if seen == die_at:
                die()  # recorded, not acknowledged: the chunk in hand
            if seen == ack_at:
                chunks.ack()
                die()


def _index(argv: list[str], flag: str) -> int | None:
    return argv.index(flag) if flag in argv else None


def main(argv: list[str]) -> None:
    die_after = take(argv, "--die-after")
    ack_then_die = take(argv, "--ack-then-die")
    ack_every = int(take(argv, "--ack-every") or 1)
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
        elif mode == "readas":
            die_at = None if die_after is None else int(die_after)
            ack_at = None if ack_then_die is None else int(ack_then_die)
            _read_as(book, run_id, argv[4], argv[5], die_at, ack_at, ack_every)
        else:
            _read(book, run_id, argv[4], None if die_after is None else int(die_after))


if __name__ == "__main__":
    main(sys.argv)
