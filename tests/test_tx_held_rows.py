"""The rows a transaction holds for the run's next row survive SIGKILL at every new commit
boundary, on both stores. A staged call's `tx:stage` row is held and committed with the run's
next row (one commit for a block's stages), and a confirmed outcome inside a transaction whose
tool settles its own unknown is held like any other; a kill while either is held loses it and
nothing after it. A child process (tests/tx_child.py: a transaction over two files and a bank,
with an irreversible notice) is killed just before the commit that would have carried the held
rows; another resumes the run; the counterparties (the files, the bank's books) show all of the
transaction or none of it, the irreversible notice once, each compensation once. And a secret
in a held row never reaches the store's bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import HERE, killed, last_json
from store_bytes import store_text
from test_tx_crash import _visible  # what the files and the bank show

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank
from daybook.tx.frontier import listing

CHILD = str(HERE / "tx_child.py")


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, CHILD, *args], capture_output=True, text=True, timeout=120)


# The transaction of tx_child.py, its commits: [begin] [stage a + leg intent] (leg sent, its
# outcome held) [leg outcome + stage b + stage notice] [commit decided] [a's intent] (a written,
# its outcome held) [a's outcome + b's intent] (b written) [b's outcome + notice's intent]
# (notice sent) [notice's outcome] [ended]. On a failed first attempt: ... [abort decided]
# [cancel's intent] (cancelled, its outcome held) [cancel's outcome] [ended], then a retry.
# (kill before KIND:N, fail the first attempt, the commit was decided, the attempt was abandoned,
# the journal's last row after the kill: the held rows after it were lost)
POINTS = [
    ("intent:1", False, False, True, "tx:begin"),  # stage a held: lost, nothing was called
    ("decision:2", False, False, True, "book_leg"),  # the leg booked; its outcome, the stages held
    ("intent:3", False, True, False, "put_file"),  # a written, its outcome held (a re-sent, deduped)
    ("intent:4", False, True, False, "put_file"),  # b written, its outcome held
    ("outcome:4", False, True, False, "notify_payment"),  # the notice sent (asked, never re-sent)
    ("outcome:2", True, False, False, "cancel_leg"),  # the leg cancelled, the cancel's outcome held
]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "fail_first", "decided", "abandoned", "last"), POINTS)
def test_a_sigkill_while_a_transaction_holds_rows_leaves_all_or_nothing_at_the_counterparties(
    db_url: str,
    tmp_path: Path,
    bank: Bank,
    where: str,
    fail_first: bool,
    decided: bool,
    abandoned: bool,
    last: str,
) -> None:
    root = tmp_path / "site"
    root.mkdir()
    flag = "1" if fail_first else "0"
    first = _child(db_url, "start", "r1", str(root), bank.url, flag, "--kill-before", where)
    assert killed(first), first.stdout + first.stderr
    with Daybook(db_url) as book:
        tail = book.journal("r1")[-1]
    assert (tail.name, tail.kind) == (last, "decision" if last.startswith("tx:") else "intent")
    seen = _visible(root, bank)
    if not decided:
        assert (seen["a"], seen["b"], seen["notices"]) == (None, None, 0)
    second = _child(db_url, "resume", "r1")
    assert second.returncode == 0, second.stdout + second.stderr
    result: Any = last_json(second.stdout.replace('{"done": true}', ""))
    attempts = (2 if fail_first else 1) + (1 if abandoned else 0)
    assert result["result"]["attempt"] == attempts
    after = _visible(root, bank)
    assert after["legs"] - after["cancels"] == 1, after  # type: ignore[operator]
    assert {k: after[k] for k in ("a", "b", "notices")} == {"a": "A", "b": "B", "notices": 1}
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())
    with Daybook(db_url) as book:
        rows = listing(book.store, "r1")
    assert [r["status"] for r in rows] == ["aborted"] * (attempts - 1) + ["committed"]


@daybook.tool(secrets=("password",), idempotent=True, bufferable=True)
def stage_login(password: str, idempotency_key: str) -> str:
    return f"ok:{len(password)}"


SECRET = "hunter2-held-Zq81"  # not a run argument: the run's input is not concealed


@daybook.workflow(name="tx_held_secret")
def held_secret(ctx: daybook.Context) -> Any:
    with ctx.transaction(scopes=["**"]) as tx:
        ctx.effect(stage_login, password=daybook.Secret(SECRET))
        ctx.effect(stage_login, password=daybook.Secret(SECRET + "-2"))
    return tx.results


def test_a_secret_in_a_held_stage_row_never_reaches_the_store_bytes(db_url: str) -> None:
    with Daybook(db_url) as book:
        results = book.run(held_secret, run_id="s1")
        assert sorted(results.values()) == [f"ok:{len(SECRET)}", f"ok:{len(SECRET) + 2}"]
        assert sum(e.name == "tx:stage" for e in book.journal("s1")) == 2
    assert SECRET not in store_text(db_url)
