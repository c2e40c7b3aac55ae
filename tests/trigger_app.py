"""A reactive trigger's world and follower: the change log is an append-only JSON-lines file a
CRM writes (`{"id": "evt-N", "n": N, "bank": URL}` a line; offset = line number), the handler
pays the bank once per event.

    trigger_app.py DB follow NAME FILE [--kill-before|--kill-after KIND:N]
                   [--kill-after-finish N] [--kill-after-advance N]
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import agents

import daybook
from daybook import Context, Daybook


def change_log(path: str) -> Any:
    """`read(after, limit)` over the file: the lines past `after`, as (offset, id, data)."""

    def read(after: int, limit: int) -> list[tuple[int, str, Any]]:
        lines = Path(path).read_text().splitlines() if Path(path).exists() else []
        got = []
        for i, line in enumerate(lines[after : after + limit], after + 1):
            event = json.loads(line)
            got.append((i, event["id"], event))
        return got

    return read


@daybook.workflow
def on_change(ctx: Context, event: dict[str, Any]) -> str:
    """The handler: one payment per event, to the bank the event names."""
    data = event["data"]
    return str(ctx.effect(agents.pay, bank=data["bank"], n=data["n"])["id"])


def _die_after(book: Daybook, method: str, n: int, action: str | None = None) -> None:
    """SIGKILL this process right after the store's n-th `method` call (of `action`, for an
    entity record) returns: after a run's finish (its header and end row), or after the
    trigger's offset advanced."""
    real = getattr(book.store, method)
    seen = {"n": 0}

    def wrapper(*args: Any) -> Any:
        done = real(*args)
        if action is None or action in args:
            seen["n"] += 1
            if seen["n"] == n:
                os.kill(os.getpid(), signal.SIGKILL)
        return done

    setattr(book.store, method, wrapper)


def main() -> None:
    from crashpoint import kill_at_journal_write, report, take

    db, _action, name, path, *rest = sys.argv[1:]
    advance = take(rest, "--kill-after-advance")
    finish = take(rest, "--kill-after-finish")
    book = Daybook(db, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    if advance is not None:
        _die_after(book, "entity_record", int(advance), "advanced")
    if finish is not None:
        _die_after(book, "finish", int(finish))
    report(lambda: book.follow_changes(name, change_log(path), on_change))


if __name__ == "__main__":
    import trigger_app  # the workflow under its module's name, as the tests know it

    trigger_app.main()
