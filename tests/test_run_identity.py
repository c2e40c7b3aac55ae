"""A run id is bound to its workflow's identity, not its bare name (issue 25 item 11, newcomer
friction 5): the code reference (`module:qualname`), or the stable name given with
`@daybook.workflow(name=...)`. Another workflow of the same bare name under that id is refused
(`RunConflict`) instead of returning the run's recorded result without running; `resume` runs
the run's own code even when another of that name is loaded. The counterparty (a file each
module's function writes) shows which code ran."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import daybook
from daybook import ConfigError, Daybook, RunConflict, Suspended
from daybook.runtime import workflow as registry
from daybook.runtime.workflow import load_app

SOURCE = """
import pathlib
import daybook

LOG = pathlib.Path(__file__).with_suffix(".log")


@daybook.workflow{named}
def {fn}(ctx, order):
    with LOG.open("a") as f:
        f.write("ran\\n")
    got = ctx.wait_for("go", timeout=3600) if order == "wait" else None
    return {{"module": "{module}", "order": order, "got": got is not None}}
"""


def _module(
    tmp_path: Path, module: str, fn: str, name: str | None = None
) -> daybook.Workflow[dict[str, object]]:
    path = tmp_path / f"{module}.py"
    named = "" if name is None else f"(name={name!r})"
    path.write_text(SOURCE.format(named=named, fn=fn, module=module))
    load_app(str(path))
    found = [wf for wf in registry.registered(name or fn) if wf.ref.startswith(str(path))]
    return found[-1]


def _ran(tmp_path: Path, module: str) -> int:
    log = tmp_path / f"{module}.log"
    return len(log.read_text().split()) if log.exists() else 0


def test_a_same_named_workflow_of_another_module_cannot_attach_to_a_run(db_url: str, tmp_path: Path) -> None:
    fn = f"refund_{uuid.uuid4().hex[:8]}"
    openai = _module(tmp_path, "openai_refund", fn)
    pydantic = _module(tmp_path, "pydantic_refund", fn)
    assert openai.name == pydantic.name and openai.ref != pydantic.ref
    with Daybook(db_url) as book:
        assert book.run(openai, "o-1", run_id="r1")["module"] == "openai_refund"
        with pytest.raises(RunConflict, match=r"belongs to workflow .* another workflow of the same name"):
            book.run(pydantic, "o-1", run_id="r1")
        with pytest.raises(RunConflict):
            book.submit(pydantic, "o-1", run_id="r1")
        # The same workflow still attaches and gets its recorded result, running nothing.
        assert book.run(openai, "o-1", run_id="r1")["module"] == "openai_refund"
    assert (_ran(tmp_path, "openai_refund"), _ran(tmp_path, "pydantic_refund")) == (1, 0)


def test_resume_runs_the_runs_own_code_when_another_of_that_name_is_loaded(
    db_url: str, tmp_path: Path
) -> None:
    fn = f"refund_{uuid.uuid4().hex[:8]}"
    first = _module(tmp_path, "first_refund", fn)
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(first, "wait", run_id="w")
        _module(tmp_path, "second_refund", fn)  # loaded later: the registry has both
        book.signal("w", "go", {})
        assert book.resume("w") == {"module": "first_refund", "order": "wait", "got": True}
    assert (_ran(tmp_path, "first_refund"), _ran(tmp_path, "second_refund")) == (2, 0)


def test_an_explicit_name_keeps_its_runs_when_the_code_moves(db_url: str, tmp_path: Path) -> None:
    name = f"stable_refund_{uuid.uuid4().hex[:8]}"
    old = _module(tmp_path, "old_home", "refund", name=name)
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(old, "wait", run_id="m")
        moved = _module(tmp_path, "new_home", "refund_agent", name=name)  # moved and renamed
        book.signal("m", "go", {})
        assert book.resume("m")["module"] == "new_home"
        assert book.run(moved, "wait", run_id="m")["module"] == "new_home"  # attaches: the same run


def test_a_run_of_moved_code_without_a_name_is_refused_with_how_to_resume_it(
    db_url: str, tmp_path: Path
) -> None:
    fn = f"legacy_{uuid.uuid4().hex[:8]}"
    old = _module(tmp_path, "legacy_old", fn)
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.run(old, "wait", run_id="l")
        # As an older journal in a process that has only the moved code: simulate by dropping it.
        registry._REGISTRY[fn].pop(old.ref)
        _module(tmp_path, "legacy_new", fn)
        with pytest.raises(ConfigError, match=rf"another workflow.*name={fn!r}"):
            book.resume("l")
        # The documented way on: declare the bare name the journal recorded where the code is now.
        _module(tmp_path, "legacy_named", fn, name=fn)
        book.signal("l", "go", {})
        assert book.resume("l")["module"] == "legacy_named"


@pytest.mark.parametrize("bad", ["", "   ", 5, "a\x00b", "x" * 201, "line\nbreak"])
def test_a_bad_explicit_workflow_name_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="workflow name="):
        daybook.workflow(name=bad)  # type: ignore[call-overload]


def test_naming_a_workflow_alone_when_two_share_the_name_says_to_name_them_apart(tmp_path: Path) -> None:
    fn = f"twin_{uuid.uuid4().hex[:8]}"
    _module(tmp_path, "twin_a", fn)
    assert registry.load(fn, "").ref.startswith(str(tmp_path / "twin_a.py"))  # unique: found
    _module(tmp_path, "twin_b", fn)
    with pytest.raises(ConfigError, match=rf"several workflows are named {fn!r}.*own name"):
        registry.load(fn, "")


SCRIPT = """
import json, pathlib, sys
import daybook

@daybook.workflow
def refund_agent(ctx, order):
    with pathlib.Path(__file__).with_suffix(".log").open("a") as f:
        f.write("ran\\n")
    return {{"by": "{who}", "order": order}}

if __name__ == "__main__":
    with daybook.Daybook(sys.argv[1]) as book:
        try:
            print(json.dumps(book.run(refund_agent, "A-1", run_id="refund-A-1")))
        except daybook.RunConflict as exc:
            print("CONFLICT", exc)
"""


def test_two_scripts_with_the_same_workflow_name_do_not_share_a_run(db_url: str, tmp_path: Path) -> None:
    # The newcomer's case: two example scripts, each with a `refund_agent`, the same run id.
    for who in ("openai_example", "pydantic_example"):
        (tmp_path / f"{who}.py").write_text(SCRIPT.format(who=who))

    def run(who: str) -> str:
        args = [sys.executable, str(tmp_path / f"{who}.py"), db_url]
        return subprocess.run(args, capture_output=True, text=True, timeout=300, check=True).stdout

    assert json.loads(run("openai_example")) == {"by": "openai_example", "order": "A-1"}
    said = run("pydantic_example")
    assert said.startswith("CONFLICT") and "pydantic_example.py:refund_agent" in said
    assert json.loads(run("openai_example"))["by"] == "openai_example"  # attaches: recorded result
    assert (tmp_path / "openai_example.log").read_text().split() == ["ran"]
    assert not (tmp_path / "pydantic_example.log").exists()  # never ran
