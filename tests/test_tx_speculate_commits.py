"""A speculation's branches share their commits: the K begins, and the K-1 losers' aborts, go
into the group commit's line together instead of one commit each. A SIGKILL at any point of
those shared commits leaves, after a resume, exactly the winner's effects at the counterparty,
every loser aborted once, and a whole journal (its seqs without a gap: rows become durable in
seq order)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import HERE, killed

import daybook
from daybook import Daybook

SPEC_CHILD = str(HERE / "spec_child.py")
K = 16


@daybook.workflow(name="spec_shared")
def spec_shared(ctx: daybook.Context, k: int) -> Any:
    branches = {f"b{j}": (lambda c, j=j: {"j": j}) for j in range(k)}
    return ctx.speculate(branches, choose=lambda r: min(r, key=lambda name: r[name]["j"]))


def _child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=120)


def _settled(book: Daybook, run_id: str) -> list[str]:
    return sorted(t["status"] for t in book.transactions() if t["run_id"] == run_id)


def test_sixteen_branches_take_fewer_commits_than_branches(db_url: str) -> None:
    with Daybook(db_url) as book:
        group = book.store.inner.dialect.group  # type: ignore[attr-defined]
        before = group.commits
        assert book.run(spec_shared, K, run_id="s16") == {"j": 0}
        commits = group.commits - before
        assert _settled(book, "s16") == ["aborted"] * (K - 1) + ["committed"]
        assert book.check() == []
    # One commit per begin and per abort was 2K + 4; shared, a handful.
    assert commits < K, commits


@pytest.mark.slow
@pytest.mark.parametrize(
    "where",
    [
        "after:tx_begin:1",  # one branch's epoch durable, the others' in line
        "after:tx_begin:9",  # in the middle of the begins' shared commits
        "after:tx_mark:1",  # the first loser's abort durable, the others' in line
        "before:tx_mark:8",  # in the middle of the losers' shared commits
        "after:tx_mark:15",  # the last loser to ask: its abort durable, the winner not yet asked
    ],
)
def test_sixteen_branches_killed_in_a_shared_commit_resume_to_the_same_winner(
    db_url: str, where: str
) -> None:
    first = _child(SPEC_CHILD, db_url, "start", "k16", str(K), "--kill-tx", where)
    assert killed(first), first.stdout + first.stderr
    second = _child(SPEC_CHILD, db_url, "resume", "k16")
    assert second.returncode == 0, second.stdout + second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {"result": {"j": 0}}
    with Daybook(db_url) as book:
        assert _settled(book, "k16") == ["aborted"] * (K - 1) + ["committed"]
        assert book.check() == []  # no gap: rows became durable in seq order
