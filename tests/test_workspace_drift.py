"""Drift before the act (treatise H5, O7), on both stores: a checkout file changed outside the
run is found before the next edit, which writes nothing and parks the run or decides again,
as the workflow chose; a scripted UI whose view changed while the run waited raises
`ReplayDiverged`, and a click that leaves the view as it was raises `ActionHadNoEffect`.
Real files in a real git repository; the control shows a plain resume overwriting the change."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import daybook
from daybook import Daybook, Kind, RunStatus
from daybook.errors import ActionHadNoEffect, ConfigError, ReplayDiverged, RunParked, Suspended


def git_repo(path: Path, files: dict[str, str]) -> Path:
    """A real git repository at `path` with `files` committed."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    who = ["-c", "user.name=t", "-c", "user.email=t@localhost"]
    subprocess.run(["git", "-C", str(path), *who, "commit", "-qm", "init", "--allow-empty"], check=True)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"config.py": "DEBUG = False\n", "README.md": "hello\n"})


# -- a checkout -------------------------------------------------------------------------------


@daybook.workflow(name="ws_drift_patch")
def patch_after_review(ctx: daybook.Context, root: str, policy: str) -> dict[str, Any]:
    """Read the config, wait for a reviewer's go, then write the decided edit."""
    co = daybook.Checkout(root, on_drift=policy)
    text = co.read(ctx, "config.py") or ""
    ctx.wait_for("go")
    try:
        return co.write(ctx, "config.py", text.replace("False", "True"))
    except ReplayDiverged as exc:
        if policy != "redecide":
            raise
        # The workflow decides again on the text that is there now.
        again = co.read(ctx, "config.py") or ""
        return {"redecided": sorted(exc.live), **co.write(ctx, "config.py", again + "DEBUG = True\n")}


def suspended_at_review(book: Daybook, root: Path, run_id: str, policy: str = "park") -> None:
    with pytest.raises(Suspended):
        book.run(patch_after_review, str(root), policy, run_id=run_id)


def test_a_file_changed_outside_the_run_is_found_before_the_edit_and_parks_the_run(
    book: Daybook, repo: Path
) -> None:
    suspended_at_review(book, repo, "drift-park")
    (repo / "config.py").write_text("DEBUG = False\nSECRET_KEY = 'set by a person'\n")
    book.signal("drift-park", "go")

    with pytest.raises(RunParked) as err:
        book.resume("drift-park")

    assert "ReplayDiverged" in str(err.value) and "config.py" in str(err.value)
    assert (repo / "config.py").read_text() == "DEBUG = False\nSECRET_KEY = 'set by a person'\n"
    assert book.get_run("drift-park").status == RunStatus.NEEDS_ATTENTION
    outcome = [e for e in book.journal("drift-park") if e.kind == Kind.OUTCOME][-1]
    drift = outcome.data["result"]["drift"]["config.py"]
    assert outcome.data["result"]["applied"] is False
    assert drift["live"] != drift["assumed"] and len(drift["live"]) == 40  # blob ids, not text


def test_a_parked_run_goes_on_once_the_outside_change_is_put_back(book: Daybook, repo: Path) -> None:
    suspended_at_review(book, repo, "drift-back")
    (repo / "config.py").write_text("tampered\n")
    book.signal("drift-back", "go")
    with pytest.raises(RunParked):
        book.resume("drift-back")

    (repo / "config.py").write_text("DEBUG = False\n")
    result = book.retry("drift-back")

    assert result["applied"] is True
    assert (repo / "config.py").read_text() == "DEBUG = True\n"


def test_the_redecide_policy_decides_again_on_the_new_text(book: Daybook, repo: Path) -> None:
    suspended_at_review(book, repo, "drift-redecide", "redecide")
    (repo / "config.py").write_text("DEBUG = False\nPORT = 8080\n")
    book.signal("drift-redecide", "go")

    result = book.resume("drift-redecide")

    assert result["redecided"] == ["config.py"]
    assert (repo / "config.py").read_text() == "DEBUG = False\nPORT = 8080\nDEBUG = True\n"
    # Replaying the finished run decides the same way again, from its journal.
    assert book.resume("drift-redecide") == result


@daybook.workflow(name="ws_drift_act")
def act_while_someone_types(ctx: daybook.Context, root: str) -> dict[str, Any]:
    co = daybook.Checkout(root, on_drift="redecide")
    calls: list[str] = []

    def add_flag(current: dict[str, str | None]) -> dict[str, str | bytes | None]:
        text = current["config.py"] or ""
        calls.append(text)
        if len(calls) == 1:  # a person saves the file while the model is thinking
            (Path(root) / "config.py").write_text(text + "TIMEOUT = 5\n")
        return {"config.py": text + "FLAG = 1\n"}

    return co.act(ctx, "add flag", ["config.py"], add_flag)


def test_act_decides_again_when_the_file_changes_between_decision_and_edit(book: Daybook, repo: Path) -> None:
    book.run(act_while_someone_types, str(repo), run_id="drift-act")

    assert (repo / "config.py").read_text() == "DEBUG = False\nTIMEOUT = 5\nFLAG = 1\n"
    decisions = [e for e in book.journal("drift-act") if e.kind == Kind.DECISION and e.name == "add flag"]
    assert len(decisions) == 2
    outcomes = [e.data["result"]["applied"] for e in book.journal("drift-act") if e.kind == Kind.OUTCOME]
    assert outcomes == [False, True]
    # The decisions hold blob ids; the texts they chose are in git, not in the journal.
    assert "FLAG = 1" not in json.dumps([e.data for e in book.journal("drift-act")])
    assert len(decisions[1].data["value"]["files"]["config.py"]) == 40


@daybook.tool(name="ws_drift.plain_write", irreversible=False)
def plain_write(*, path: str, text: str, idempotency_key: str) -> None:
    Path(path).write_text(text)


@daybook.workflow(name="ws_drift_control")
def plain_patch(ctx: daybook.Context, root: str) -> str:
    """The same agent without a checkout: it reads, waits, and writes what it decided."""
    text = ctx.decide("read", lambda: (Path(root) / "config.py").read_text()).value
    ctx.wait_for("go")
    ctx.effect(plain_write, path=str(Path(root) / "config.py"), text=text.replace("False", "True"))
    return "done"


def test_control_without_a_checkout_a_resume_overwrites_the_outside_change_unnoticed(
    book: Daybook, repo: Path
) -> None:
    with pytest.raises(Suspended):
        book.run(plain_patch, str(repo), run_id="drift-control")
    (repo / "config.py").write_text("DEBUG = False\nSECRET_KEY = 'set by a person'\n")
    book.signal("drift-control", "go")

    assert book.resume("drift-control") == "done"
    assert (repo / "config.py").read_text() == "DEBUG = True\n"  # the person's line is gone


def test_the_journal_holds_blob_ids_and_the_content_goes_into_git(book: Daybook, repo: Path) -> None:
    @daybook.workflow(name="ws_drift_secret")
    def write_secret(ctx: daybook.Context, root: str) -> str:
        return str(
            daybook.Checkout(root).write(ctx, ".envrc", "export TOKEN=sk-live-0123456789abcdef\n")["snapshot"]
        )

    commit = book.run(write_secret, str(repo), run_id="drift-secret")

    rows = json.dumps([e.data for e in book.journal("drift-secret")])
    assert "sk-live-0123456789abcdef" not in rows
    shown = subprocess.run(
        ["git", "-C", str(repo), "show", f"{commit}:.envrc"], capture_output=True, text=True
    )
    assert shown.stdout == "export TOKEN=sk-live-0123456789abcdef\n"


def test_a_checkout_needs_a_git_work_tree_and_a_known_policy(tmp_path: Path, repo: Path) -> None:
    with pytest.raises(ConfigError, match="git init"):
        daybook.Checkout(tmp_path)
    with pytest.raises(ConfigError, match="park, redecide"):
        daybook.Checkout(repo, on_drift="ignore")
    with pytest.raises(ConfigError, match="keep"):
        daybook.Checkout(repo, keep=0)


# -- a screen ---------------------------------------------------------------------------------


class FakeUI:
    """A scripted UI: a counter page whose button works unless disabled."""

    def __init__(self) -> None:
        self.count = 0
        self.disabled = False
        self.banner = ""

    def view(self) -> str:
        return f"<h1>{self.count}</h1><button{' disabled' if self.disabled else ''}>+1</button>{self.banner}"


UI = FakeUI()


@daybook.tool(name="ws_ui.click", irreversible=False)
def click(*, button: str, idempotency_key: str) -> dict[str, Any]:
    if not UI.disabled:
        UI.count += 1
    return {"clicked": button}


@daybook.workflow(name="ws_ui_counter")
def counter(ctx: daybook.Context, policy: str, wait: bool) -> Any:
    screen = daybook.Screen(UI.view, name="page", on_drift=policy)
    screen.look(ctx)
    if wait:
        ctx.wait_for("go")
    return screen.act(ctx, click, button="+1")


@pytest.fixture
def ui() -> FakeUI:
    UI.__init__()  # type: ignore[misc]
    return UI


def test_a_click_that_leaves_the_view_unchanged_raises_action_had_no_effect(
    book: Daybook, ui: FakeUI
) -> None:
    ui.disabled = True

    with pytest.raises(RunParked, match="ActionHadNoEffect"):
        book.run(counter, "park", False, run_id="ui-dead")

    after = [e for e in book.journal("ui-dead") if e.name == "page.after"]
    before = [e for e in book.journal("ui-dead") if e.name == "page.before"]
    assert after[0].data["value"] == before[0].data["value"]


def test_a_click_that_lands_changes_the_view(book: Daybook, ui: FakeUI) -> None:
    assert book.run(counter, "park", False, run_id="ui-ok") == {"clicked": "+1"}
    assert ui.count == 1


def test_a_screen_changed_while_the_run_waited_raises_replay_diverged_on_resume(
    book: Daybook, ui: FakeUI
) -> None:
    with pytest.raises(Suspended):
        book.run(counter, "park", True, run_id="ui-drift")
    ui.banner = "<div class=modal>Session expired</div>"
    book.signal("ui-drift", "go")

    with pytest.raises(RunParked, match="ReplayDiverged"):
        book.resume("ui-drift")
    assert ui.count == 0  # the click never happened on the changed screen


def test_a_screen_with_the_redecide_policy_looks_again_instead_of_clicking(book: Daybook, ui: FakeUI) -> None:
    with pytest.raises(Suspended):
        book.run(counter, "redecide", True, run_id="ui-redecide")
    ui.banner = "<div>cookie banner</div>"
    book.signal("ui-redecide", "go")

    assert book.resume("ui-redecide") is None
    assert ui.count == 0


def test_action_had_no_effect_is_a_daybook_error_saying_what_to_do() -> None:
    assert issubclass(ActionHadNoEffect, daybook.DaybookError)
    assert issubclass(ReplayDiverged, daybook.DaybookError)


def test_a_path_that_leaves_the_checkout_is_refused_before_anything_is_written(
    book: Daybook, repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "link").symlink_to(outside, target_is_directory=True)

    @daybook.workflow(name="ws_drift_escape")
    def escape(ctx: daybook.Context, root: str, path: str) -> None:
        daybook.Checkout(root).write(ctx, path, "x\n")

    for path in ("link/evil.txt", "../evil.txt", ".git/config"):
        with pytest.raises(RunParked, match=r"outside the checkout|not a file below the checkout"):
            book.run(escape, str(repo), path, run_id=f"escape-{path}")
    assert list(outside.iterdir()) == [] and not (tmp_path / "evil.txt").exists()
