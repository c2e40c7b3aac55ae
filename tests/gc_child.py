"""A gc pass in a process of its own, for the outbox erasure crash test: `gc_child.py DB_URL
--kill-at-request N` erases every finished run (`book.gc(0)`) and is SIGKILLed as gc turns to
the N-th approval request, after the ones before it were erased inside gc's transaction."""

from __future__ import annotations

import json
import sys
from typing import Any

from crashpoint import die, take

from daybook import Daybook
from daybook.store import erasure


def main(argv: list[str]) -> None:
    at = int(take(argv, "--kill-at-request") or 0)
    real = erasure._mark
    seen = [0]

    def mark(*args: Any) -> dict[str, Any]:
        seen[0] += 1
        if seen[0] == at:
            die()
        return real(*args)

    erasure._mark = mark  # type: ignore[assignment]
    with Daybook(argv[1]) as book:
        print(json.dumps(book.gc(0), default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv)
