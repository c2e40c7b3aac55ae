"""An agent process for the workspace crash tests: five edits of a checkout, optionally killing
itself with SIGKILL at a chosen point.

    workspace_child.py DB start RUN_ID ROOT [--kill-before KIND:N | --kill-after KIND:N]
                                            [--kill-at-ref N] [--kill-at-rename N]
    workspace_child.py DB screen RUN_ID URL [--kill-after KIND:N]
    workspace_child.py DB resume RUN_ID

Edit i writes `f<i>.txt` and makes `log.txt` hold the lines "edit 1" .. "edit i". KIND:N is
the N-th journal row of that kind this process writes; `--kill-at-ref N` kills just before the
N-th move of the run's snapshot ref (the files of an edit written, its snapshot not recorded);
`--kill-at-rename N` just after the N-th file renamed into place (half an edit's files).
`screen` looks at the page at URL (a scripted UI served by the test) and clicks its button.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from typing import Any

from crashpoint import kill_at_call, kill_at_journal_write, report, take

import daybook
from daybook.workspace import snapshot

EDITS = 5


def log(i: int) -> str:
    return "".join(f"edit {j}\n" for j in range(1, i + 1))


@daybook.workflow(name="workspace_five_edits")
def five_edits(ctx: daybook.Context, root: str) -> dict[str, Any]:
    co = daybook.Checkout(root)
    for i in range(1, EDITS + 1):
        co.edit(ctx, {f"f{i}.txt": f"file {i}\n", "log.txt": log(i)})
    co.release(ctx)
    return {"edits": EDITS}


@daybook.tool(name="workspace_screen.click", irreversible=False)
def click(*, url: str, idempotency_key: str) -> str:
    with urllib.request.urlopen(urllib.request.Request(f"{url}/click", method="POST"), timeout=30) as r:
        return str(r.read().decode())


@daybook.workflow(name="workspace_screen")
def press(ctx: daybook.Context, url: str) -> Any:
    def view() -> bytes:
        with urllib.request.urlopen(url, timeout=30) as r:
            return bytes(r.read())

    screen = daybook.Screen(view, name="page")
    screen.look(ctx)
    return screen.act(ctx, click, url=url)


def main() -> None:
    db, action, run_id = sys.argv[1:4]
    rest = sys.argv[4:]
    book = daybook.Daybook(db, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    ref = take(rest, "--kill-at-ref")
    if ref is not None:
        snapshot.git = kill_at_call(
            snapshot.git, int(ref), before=True, counts=lambda root, *args, **kw: args[:1] == ("update-ref",)
        )
    rename = take(rest, "--kill-at-rename")
    if rename is not None:
        os.replace = kill_at_call(
            os.replace, int(rename), counts=lambda src, dst, **kw: "/.git/" not in os.fspath(dst)
        )
    if action == "start":
        report(lambda: book.run(five_edits, rest[0], run_id=run_id))
    elif action == "screen":
        report(lambda: book.run(press, rest[0], run_id=run_id))
    else:
        report(lambda: book.resume(run_id, wait=10))


if __name__ == "__main__":
    main()
