"""Plans, patches and repair-or-abandon (O10), with the coding-agent example on a real git
checkout (examples/coding_agent.py): the plan is a recorded step with an id, each patch one effect
keyed `<plan id>/patch/<n>` and one commit carrying that key; a crash after patch 3 of 7 resumes
with patch 4 under the same plan; failing tests lead to repair-or-abandon with the plan, the
patches applied and the failures, never a reset. Asserted at the repository and at what the
model was asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HERE, killed, last_json

from daybook import Daybook

sys.path.insert(0, str(HERE.parent / "examples"))
import coding_agent
from coding_agent import KEY_TRAILER, git, new_checkout

EXAMPLE = HERE.parent / "examples" / "coding_agent.py"


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CODING_AGENT_MODEL_LOG", str(tmp_path / "model.log"))
    return new_checkout(str(tmp_path / "repo"))


def _asked(checkout: str) -> list[dict[str, object]]:
    """Every prompt the model was given, in order (its own log, beside the checkout)."""
    log = Path(checkout).parent / "model.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _patch_keys(checkout: str) -> list[str]:
    """The keys of the patch commits, oldest first: the repository's record of what was applied."""
    messages = git(checkout, "log", "--reverse", "--format=%B%x00").split("\x00")
    return [ln.split(": ", 1)[1] for m in messages for ln in m.splitlines() if ln.startswith(KEY_TRAILER)]


def _child(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(HERE / "coding_child.py"), db_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ.copy())


def test_the_coding_agent_example_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "DAYBOOK_DB": f"sqlite:///{tmp_path / 'j.db'}"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "outcome: ok" in proc.stdout
        and "patches applied: 8" in proc.stdout
        and "tests: passing" in proc.stdout
    )


@pytest.mark.parametrize("kill", ["--kill-after=outcome:3", "--kill-after=intent:4"])
def test_a_crash_after_patch_3_of_7_resumes_with_patch_4_under_the_same_plan(
    db_url: str, checkout: str, kill: str
) -> None:
    flag, at = kill.split("=")
    dead = _child(db_url, "start", "code", checkout, flag, at)
    assert killed(dead), dead.stdout + dead.stderr
    assert len(_patch_keys(checkout)) == 3 + (
        1 if at == "intent:4" and len(_patch_keys(checkout)) == 4 else 0
    )
    resumed = _child(db_url, "resume", "code")  # a new process
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = last_json(resumed.stdout)["result"]  # type: ignore[index]
    assert result["outcome"] == "ok"
    keys = _patch_keys(checkout)
    plan = result["plan"]
    assert keys[:7] == [f"{plan}/patch/{n}" for n in range(1, 8)]  # each patch once, one plan
    assert (
        len(keys) == 8 and keys[7].endswith("/patch/1") and not keys[7].startswith(f"{plan}/")
    )  # the repair
    assert [a["ask"] for a in _asked(checkout)] == ["plan", "repair_or_abandon"]  # planned once
    with Daybook(db_url) as book:
        assert [e["ref"] for e in book.effects("code")] == git(
            checkout, "log", "--reverse", "--format=%H"
        ).split()[1:]


def test_failing_tests_lead_to_a_repair_given_the_plan_the_patches_applied_and_the_failures(
    book: Daybook, checkout: str
) -> None:
    result = book.run(coding_agent.coding_agent, checkout, run_id="repair")
    assert result["outcome"] == "ok"
    [_plan_ask, repair_ask] = _asked(checkout)
    assert repair_ask["plan"] == result["plan"] and repair_ask["failures"] == ["test_f5"]
    assert repair_ask["applied"] == [f"{result['plan']}/patch/{n}" for n in range(1, 8)]
    assert coding_agent.run_tests(checkout)["passed"]
    assert len(_patch_keys(checkout)) == 8  # the seven kept, one fix on top: no reset


def test_an_abandon_ends_the_run_with_its_context_and_leaves_the_checkout_as_it_is(
    book: Daybook, checkout: str
) -> None:
    result = book.run(coding_agent.coding_agent, checkout, "add f1..f7, or give up", run_id="abandon")
    assert result["outcome"] == "abandoned" and result["failures"] == ["test_f5"]
    assert result["applied"] == [f"{result['plan']}/patch/{n}" for n in range(1, 8)]
    assert len(_patch_keys(checkout)) == 7 and Path(checkout, "mathlib", "f7.py").exists()  # not reset
    assert git(checkout, "status", "--porcelain") == ""


# The control: the same agent without a journal (its tool called directly), crashed after patch
# 3 and started again, plans again and applies every patch again.
_PLAIN = """
import os, sys
sys.path.insert(0, sys.argv[2])
import coding_agent as ca
checkout, die = sys.argv[1], sys.argv[3] == "die"
plan = ca.ask({"ask": "plan", "goal": ca.GOAL})
for n, patch in enumerate(plan["patches"], 1):
    ca.apply_patch(checkout=checkout, idempotency_key=f"attempt-{os.getpid()}/{n}", **patch)
    if die and n == 3:
        os.kill(os.getpid(), 9)
"""


def test_without_daybook_a_crash_after_patch_3_replans_and_applies_them_all_again(checkout: str) -> None:
    examples = str(HERE.parent / "examples")
    plain = [sys.executable, "-c", _PLAIN, checkout, examples]
    dead = subprocess.run([*plain, "die"], capture_output=True, timeout=120)
    assert killed(dead)
    subprocess.run([*plain, "go"], check=True, timeout=120)
    assert len(_patch_keys(checkout)) == 10  # patches 1-3 twice
    assert [a["ask"] for a in _asked(checkout)] == ["plan", "plan"]
