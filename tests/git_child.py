"""An agent process for the git adapter's crash tests, and the workflows those tests run.

    git_child.py DB start RUN_ID WORKFLOW REPO [--kill-after KIND:N] [--kill-git before|after:N]
    git_child.py DB resume RUN_ID

`--kill-after KIND:N` SIGKILLs this process right after its N-th journal row of KIND;
`--kill-git before:N` / `after:N` right before / after its N-th `git update-ref` (the single step
that publishes a commit on the branch). Imported by the tests, it only registers the workflows.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import daybook
import daybook.adapters.git as gitmod
from daybook.adapters.git import Repo


def _commit_two(ctx: daybook.Context, repo_path: str) -> list[str]:
    repo = Repo(repo_path)
    first = repo.commit(ctx, {"notes/a.txt": "alpha\n"}, "Add a")
    second = repo.commit(ctx, {"README.md": "rewritten\n", "notes/b.txt": "beta\n"}, "Rewrite README, add b")
    return [first["sha"], second["sha"]]


@daybook.workflow(name="git_two_commits")
def two_commits(ctx: daybook.Context, repo_path: str) -> list[str]:
    return _commit_two(ctx, repo_path)


@daybook.workflow(name="git_commit_then_undo")
def commit_then_undo(ctx: daybook.Context, repo_path: str) -> dict[str, Any]:
    shas = _commit_two(ctx, repo_path)
    report = ctx.compensate()
    return {"commits": shas, "compensated": report.compensated}


WORKFLOWS = {"two_commits": two_commits, "commit_then_undo": commit_then_undo}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_at_journal(book: daybook.Daybook, kind: str, n: int) -> None:
    real = book.store.append
    seen = [0]

    def append(event: daybook.Event) -> None:
        real(event)
        if event.kind == kind:
            seen[0] += 1
            if seen[0] == n:
                _die()

    book.store.append = append  # type: ignore[method-assign]


def _kill_at_update_ref(when: str, n: int) -> None:
    real = gitmod._git
    seen = [0]

    def run(repo: str, *args: str, **kwargs: Any) -> Any:
        if not args or args[0] != "update-ref":
            return real(repo, *args, **kwargs)
        seen[0] += 1
        if seen[0] == n and when == "before":
            _die()
        proc = real(repo, *args, **kwargs)
        if seen[0] == n and when == "after":
            _die()
        return proc

    gitmod._git = run


def _take(rest: list[str], flag: str) -> tuple[str, int] | None:
    if flag not in rest:
        return None
    i = rest.index(flag)
    what, n = rest[i + 1].split(":")
    del rest[i : i + 2]
    return what, int(n)


def main() -> None:
    db, action, run_id, *rest = sys.argv[1:]
    journal_kill = _take(rest, "--kill-after")
    git_kill = _take(rest, "--kill-git")
    book = daybook.Daybook(db, lease_ttl=2.0)
    if journal_kill is not None:
        _kill_at_journal(book, *journal_kill)
    if git_kill is not None:
        _kill_at_update_ref(*git_kill)
    try:
        if action == "start":
            result = book.run(WORKFLOWS[rest[0]], rest[1], run_id=run_id)
        else:
            result = book.resume(run_id, wait=10)
    except daybook.DaybookError as exc:
        print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
        sys.exit(3)
    print(json.dumps({"result": result}))


if __name__ == "__main__":
    main()
