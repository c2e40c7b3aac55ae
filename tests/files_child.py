"""An agent process for the files adapter's crash tests: stages files, commits them (and, if
asked, compensates), optionally killing itself with SIGKILL at a chosen point.

    files_child.py DB start RUN_ID ROOT SPEC_JSON [--kill-before KIND:N | --kill-after KIND:N]
                                                  [--kill-at-rename N]
    files_child.py DB resume RUN_ID

SPEC_JSON is `{"files": [[path, content or null for a delete], ...], "undo": bool}`. KIND:N is
the N-th journal row of that kind written by this process; `--kill-at-rename N` kills right
after the N-th rename that publishes a file (the middle of a commit: inside one effect, where no
journal write happens).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import daybook
from daybook.adapters.files import SCRATCH, Workspace


@daybook.workflow(name="files_publish")
def publish(ctx: daybook.Context, root: str, spec: dict[str, Any]) -> dict[str, Any]:
    ws = Workspace(root)
    for path, content in spec["files"]:
        if content is None:
            ws.delete(ctx, path)
        else:
            ws.write(ctx, path, content)
    result = ws.commit(ctx)
    if spec.get("undo"):
        report = ctx.compensate()
        return {"commit": result, "compensated": report.compensated}
    return result


def _flag(rest: list[str], name: str) -> str | None:
    if name not in rest:
        return None
    i = rest.index(name)
    value = rest[i + 1]
    del rest[i : i + 2]
    return value


def _kill_at_journal_write(book: daybook.Daybook, flag: str, spec: str) -> None:
    kind, n = spec.split(":")
    real = book.store.append
    seen = {"n": 0}

    def append(event: daybook.Event) -> None:
        if kind in ("any", event.kind):
            seen["n"] += 1
        if seen["n"] == int(n) and flag == "--kill-before":
            os.kill(os.getpid(), signal.SIGKILL)
        real(event)
        if seen["n"] == int(n) and flag == "--kill-after":
            os.kill(os.getpid(), signal.SIGKILL)

    book.store.append = append  # type: ignore[method-assign]


def _kill_at_rename(n: int) -> None:
    real = os.replace
    seen = {"n": 0}

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        real(src, dst, **kw)
        # Only the renames that publish a file count, not those inside the scratch area.
        if f"/{SCRATCH}/" not in os.fspath(dst):
            seen["n"] += 1
            if seen["n"] == n:
                os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    book = daybook.Daybook(db, lease_ttl=2.0)
    for flag in ("--kill-before", "--kill-after"):
        spec = _flag(rest, flag)
        if spec is not None:
            _kill_at_journal_write(book, flag, spec)
    rename = _flag(rest, "--kill-at-rename")
    if rename is not None:
        _kill_at_rename(int(rename))
    try:
        if action == "start":
            result = book.run(publish, rest[0], json.loads(rest[1]), run_id=run_id)
        else:
            result = book.resume(run_id, wait=10)
    except daybook.DaybookError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        sys.exit(3)
    print(json.dumps({"result": result}))


if __name__ == "__main__":
    main()
