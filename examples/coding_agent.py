"""A coding agent on a real git checkout: a recorded plan, one keyed patch per step, and, when the
tests fail, repair-or-abandon with its context instead of a reset (O10).

The agent asks its model (scripted here: a function of the prompt, like a real model) for a plan
of patches to a small library. The plan is a recorded step with an id; each patch is one effect
with the key `<plan id>/patch/<n>`, applied as one git commit whose message carries the key (so
the tool can tell whether a patch it may have applied before a crash is in the repository). A
crash after patch 3 of 7 resumes with patch 4 under the same plan: the journal is the agent's
memory, nothing is planned or applied twice. Then the tests run (a recorded observation). When
they fail, the model is asked to repair or abandon, given the plan, the patches applied and the
failures; a repair is a new recorded decision whose patches are keyed under it; an abandon ends
the run with that context, the checkout left as it is for a person (no reset).

    python examples/coding_agent.py [CHECKOUT]       # DAYBOOK_DB picks the store
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import daybook

GOAL = "add f1..f7 to mathlib, f<n>(x) = x * <n>, one module per function"
KEY_TRAILER = "Daybook-Key"


# -- the world: a git checkout ----------------------------------------------------------------


def git(checkout: str, *args: str) -> str:
    out = subprocess.run(["git", "-C", checkout, *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def new_checkout(where: str) -> str:
    """A repository with a test suite that expects f1..f7 and no implementation yet."""
    root = Path(where)
    (root / "mathlib").mkdir(parents=True, exist_ok=True)
    (root / "mathlib" / "__init__.py").write_text("")
    tests = ["import unittest", "", "", "class TestMathlib(unittest.TestCase):"]
    for n in range(1, 8):
        tests += [
            f"    def test_f{n}(self) -> None:",
            f"        from mathlib.f{n} import f{n}",
            f"        self.assertEqual(f{n}(3), {3 * n})",
            "",
        ]
    (root / "test_mathlib.py").write_text("\n".join(tests))
    git(where, "init", "-q", "-b", "main")
    git(where, "config", "user.email", "agent@example.com")
    git(where, "config", "user.name", "coding agent")
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "tests for f1..f7")
    return where


def committed(checkout: str, key: str) -> str | None:
    """The commit carrying `key` in its message, if any (the repository's own record)."""
    found = git(checkout, "log", "--format=%H", f"--grep={KEY_TRAILER}: {key}$")
    return found.splitlines()[0] if found else None


def patch_status(key: str, args: dict[str, Any]) -> Any:
    """Did a patch under `key` land? Asked of the repository after a crash mid-patch."""
    sha = committed(args["checkout"], key)
    if sha is None:
        return daybook.Absent()
    return daybook.Confirmed({"commit": sha, "path": args["path"]}, ref=sha)


@daybook.tool(status=patch_status, reference=lambda r: r["commit"])
def apply_patch(checkout: str, path: str, content: str, why: str, idempotency_key: str) -> dict[str, str]:
    """Write one file and commit it, the key in the commit message."""
    target = Path(checkout, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    git(checkout, "add", path)
    # --allow-empty: a patch that changes nothing is still one commit carrying its key.
    git(checkout, "commit", "-q", "--allow-empty", "-m", f"{why}\n\n{KEY_TRAILER}: {idempotency_key}")
    return {"commit": git(checkout, "rev-parse", "HEAD"), "path": path}


def run_tests(checkout: str) -> dict[str, Any]:
    """The test suite's verdict: passed, and the failing tests' names (-B: no bytecode cache, which
    could hide a file rewritten within the same second)."""
    proc = subprocess.run(
        [sys.executable, "-B", "-m", "unittest", "-q", "test_mathlib"],
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    failures = sorted(
        {line.split()[1] for line in proc.stderr.splitlines() if line.startswith(("FAIL:", "ERROR:"))}
    )
    return {"passed": proc.returncode == 0, "failures": failures}


# -- the model (scripted: a function of the prompt) ---------------------------------------------


def model(prompt: str) -> str:
    """Plans seven one-file patches (the fifth with a bug); asked to repair, fixes what failed,
    unless the goal says to give up. Logs each prompt next to the checkout (what it was asked)."""
    request = json.loads(prompt)
    log = os.environ.get("CODING_AGENT_MODEL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(prompt + "\n")
    if request["ask"] == "plan":
        patches = []
        for n in range(1, 8):
            factor = n + 1 if n == 5 else n  # the bug the tests will find
            body = f"def f{n}(x: int) -> int:\n    return x * {factor}\n"
            patches.append({"path": f"mathlib/f{n}.py", "content": body, "why": f"add f{n}"})
        return json.dumps({"patches": patches})
    if "give up" in request["goal"]:
        return json.dumps({"action": "abandon", "why": "the failures need a person"})
    fixes = []
    for failure in request["failures"]:
        n = int(failure.removeprefix("test_f"))
        body = f"def f{n}(x: int) -> int:\n    return x * {n}\n"
        fixes.append({"path": f"mathlib/f{n}.py", "content": body, "why": f"fix f{n}"})
    return json.dumps({"action": "repair", "patches": fixes})


# -- the agent ---------------------------------------------------------------------------------


def ask(request: dict[str, Any]) -> Any:
    """One model call: the request as the prompt, the reply read as JSON."""
    return json.loads(model(json.dumps(request)))


@daybook.workflow(name="coding_agent")
def coding_agent(ctx: daybook.Context, checkout: str, goal: str = GOAL, repairs: int = 2) -> dict[str, Any]:
    plan = ctx.decide("plan", ask, {"ask": "plan", "goal": goal})
    applied = _apply(ctx, checkout, plan)
    for _ in range(repairs + 1):
        tests = ctx.decide("tests", run_tests, checkout).value
        if tests["passed"]:
            return {"outcome": "ok", "plan": plan.id, "applied": applied}
        context = {"ask": "repair_or_abandon", "goal": goal, "plan": plan.id, "applied": applied, **tests}
        verdict = ctx.decide("repair_or_abandon", ask, context)  # the context: its recorded input
        if verdict.value["action"] != "repair":
            return {"outcome": "abandoned", "why": verdict.value.get("why"), **context}
        applied += _apply(ctx, checkout, verdict)
    return {"outcome": "abandoned", "why": f"still failing after {repairs} repairs", **context}


def _apply(ctx: daybook.Context, checkout: str, decision: daybook.Decision[Any]) -> list[str]:
    """Each patch of `decision` (a plan or a repair), in order, keyed `<decision id>/patch/<n>`."""
    keys = []
    for n, patch in enumerate(decision.value["patches"], 1):
        key = ctx.key(decision, "patch", n)
        ctx.effect(apply_patch, key=key, checkout=checkout, **patch)
        keys.append(key)
    return keys


def main() -> None:
    checkout = sys.argv[1] if len(sys.argv) > 1 else new_checkout(tempfile.mkdtemp(prefix="daybook-coding-"))
    if not Path(checkout, ".git").exists():
        new_checkout(checkout)
    db = os.environ.get("DAYBOOK_DB") or f"sqlite:///{tempfile.mkdtemp()}/coding.db"
    with daybook.Daybook(db) as book:
        result = book.run(coding_agent, checkout, run_id="code-1")
    print("outcome:", result["outcome"], "under plan", result["plan"])
    print("patches applied:", len(result["applied"]))
    print("commits:", git(checkout, "rev-list", "--count", "HEAD"))
    print("tests:", "passing" if run_tests(checkout)["passed"] else "failing")


if __name__ == "__main__":
    main()
