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
import sys
from typing import Any

from crashpoint import kill_at_call, kill_at_journal_write, report, take

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


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    book = daybook.Daybook(db, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    rename = take(rest, "--kill-at-rename")
    if rename is not None:
        # Only the renames that publish a file count, not those inside the scratch area.
        os.replace = kill_at_call(
            os.replace, int(rename), counts=lambda src, dst, **kw: f"/{SCRATCH}/" not in os.fspath(dst)
        )
    if action == "start":
        report(lambda: book.run(publish, rest[0], json.loads(rest[1]), run_id=run_id))
    else:
        report(lambda: book.resume(run_id, wait=10))


if __name__ == "__main__":
    main()
