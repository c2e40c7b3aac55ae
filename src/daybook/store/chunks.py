"""Stream chunks (`ctx.stream`, schema v13): the rows of `daybook_chunks` and their SQL.

A chunk is one piece of a run's durable stream, keyed by (run, stream, act, n): the act that
wrote it (a decision's id, an effect's key, or a position of the workflow body) and its number
within that act's segment. `pos` is the run's chunk position, the reader's cursor: a writer
takes `MAX(pos) + 1` inside its own transaction and `(run_id, pos)` is unique, so a chunk at
`pos` commits only after every chunk before it did (a reader polling `pos > cursor` never sees a
gap that fills later). The table is append-only like the journal. A re-run's chunk that differs
from the one committed under its key is kept beside it as `divergent` (one at most per key),
never handed to a reader of the stream (`journal.stream`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..records import JSON, dumps, loads


@dataclass(frozen=True, slots=True)
class Chunk:
    """One committed chunk of a run's stream. `cursor` is where a reader resumes from (give it
    as `after=`); `value` the JSON value written (a secret in it as its digest mark)."""

    run_id: str
    cursor: int
    stream: str
    act: str
    n: int
    data: dict[str, JSON] = field(default_factory=dict)
    at: float = 0.0
    divergent: bool = False

    @property
    def value(self) -> JSON:
        return self.data.get("value")

    def as_dict(self) -> dict[str, JSON]:
        return {
            "cursor": self.cursor,
            "stream": self.stream,
            "act": self.act,
            "n": self.n,
            "value": self.value,
            "at": self.at,
            "divergent": self.divergent,
        }


COLUMNS = "run_id, pos, stream, act, n, divergent, data, at"
VALUES = "(%s, %s, %s, %s, %s, %s, %s::json, %s)"  # one row's, repeated for several
INSERT = f"INSERT INTO daybook_chunks ({COLUMNS}) VALUES {VALUES}"
LAST = "SELECT COALESCE(MAX(pos), 0) FROM daybook_chunks WHERE run_id = %s"


def select(stream: str | None, act: str | None, divergent: bool) -> str:
    """The chunks of a run after a cursor, in cursor order: one stream's or all, one act's or
    all, the divergent re-sends left out unless asked for."""
    sql = f"SELECT {COLUMNS} FROM daybook_chunks WHERE run_id = %s AND pos > %s"
    if stream is not None:
        sql += " AND stream = %s"
    if act is not None:
        sql += " AND act = %s"
    if not divergent:
        sql += " AND divergent = 0"
    return sql + " ORDER BY pos LIMIT %s"


def params(chunk: Chunk, pos: int) -> tuple[Any, ...]:
    what = f"run {chunk.run_id!r} stream {chunk.stream!r} chunk {chunk.n}"
    data = dumps(chunk.data, what)
    return (chunk.run_id, pos, chunk.stream, chunk.act, chunk.n, int(chunk.divergent), data, chunk.at)


def from_rows(rows: Sequence[Sequence[Any]]) -> list[Chunk]:
    out = []
    for r in rows:
        data = r[6] if isinstance(r[6], dict) else loads(r[6], str(r[0]), int(r[1]))
        out.append(
            Chunk(str(r[0]), int(r[1]), str(r[2]), str(r[3]), int(r[4]), data, float(r[7]), bool(r[5]))
        )
    return out
