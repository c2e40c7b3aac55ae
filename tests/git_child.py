"""An agent process for the git adapter's crash tests, and the workflows those tests run.

    git_child.py DB start RUN_ID WORKFLOW REPO [--kill-after KIND:N] [--kill-git before|after:N]
    git_child.py DB resume RUN_ID

`--kill-after KIND:N` SIGKILLs this process right after its N-th journal row of KIND;
`--kill-git before:N` / `after:N` right before / after its N-th `git update-ref` (the single step
that publishes a commit on the branch). Imported by the tests, it only registers the workflows.
"""

from __future__ import annotations

import sys
from typing import Any

from crashpoint import kill_at_call, kill_at_journal_write, report, take

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


def main() -> None:
    db, action, run_id, *rest = sys.argv[1:]
    book = daybook.Daybook(db, lease_ttl=2.0)
    kill_at_journal_write(book, rest)
    git_kill = take(rest, "--kill-git")
    if git_kill is not None:
        when, n = git_kill.split(":")
        gitmod._git = kill_at_call(
            gitmod._git,
            int(n),
            before=when == "before",
            counts=lambda repo, *args, **kwargs: bool(args) and args[0] == "update-ref",
        )
    if action == "start":
        report(lambda: book.run(WORKFLOWS[rest[0]], rest[1], run_id=run_id))
    else:
        report(lambda: book.resume(run_id, wait=10))


if __name__ == "__main__":
    main()
