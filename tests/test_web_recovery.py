"""The recovery view (`/runs/RUN?view=recovery`): a journal branch as a diff of steps, before and
after, with the checkpoint restored and the `--explain` verdict of every checkpoint; on a real
DART recovery (the schedule witness of tests/test_dart.py, with a compensable hold undone), a
fork that took over the original's later steps, and a steering revision; on both stores, and
in a real headless Chromium."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dart_schedule as ds
import pytest
import web_family as wf
from conftest import wait_until
from selenium.webdriver.common.by import By
from starlette.testclient import TestClient
from webtools import wait_drawn, web_server

from daybook import Daybook, RunFailed
from daybook.web.app import build
from daybook.web.recovery import diff

IMAGES = Path(__file__).parent.parent / "docs" / "images"


def _failed(book: Daybook, cal: str, sink: ds.Sink) -> None:
    with pytest.raises(RunFailed):
        book.run(ds.schedule, cal, "127.0.0.1", sink.port, run_id="sched", hold=True)


def _marks(found: dict[str, Any]) -> dict[int, tuple[str | None, str | None]]:
    """step -> (the before mark, the after mark), for the steps the diff shows."""
    return {
        r["step"]: (r["before"] and r["before"]["mark"], r["after"] and r["after"]["mark"])
        for r in found["rows"]
        if "step" in r
    }


def test_a_failed_run_shows_what_a_recovery_would_restore_and_the_verdict_of_each_checkpoint(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    _failed(book, cal, sink)
    found = diff(book, "sched", None)
    assert found["branch"] is None and found["rows"] == []
    preview = found["preview"]
    assert (preview["action"], preview["checkpoint"], preview["dry_run"]) == ("restore", "commit@3", True)
    assert [(v["checkpoint"], v["reason"], v["chosen"]) for v in preview["verdicts"]] == [
        ("commit@3", "eligible", True),
        ("entry@1", "committed_consumers_present", False),
    ]
    assert book.get_run("sched").status == "failed"  # looking changed nothing


def test_a_dart_recovery_shows_the_checkpoint_restored_and_each_step_superseded_replayed_or_run_again(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    _failed(book, cal, sink)
    book.recover("sched")
    found = diff(book, "sched", None)
    assert (found["branch"], found["kind"], found["checkpoint"]) == ("r1", "recovery", "commit@3")
    assert "restored ResolveSlot::slot[0]::0 to checkpoint commit@3" in found["summary"]
    assert [(v["checkpoint"], v["chosen"]) for v in found["verdicts"]] == [
        ("commit@3", True),
        ("entry@1", False),
    ]
    assert found["verdicts"][1]["consumers"] == ["FinalizeSchedule::final::0", "ResolveSlot::slot[1]::0"]
    marks = _marks(found)
    assert marks[3] == ("kept", "replayed")  # the checkpoint itself
    rows = {r["step"]: r for r in found["rows"] if "step" in r}
    assert rows[3]["before"]["note"] == "the checkpoint restored (commit@3); ResolveSlot::slot[0]::0"
    assert rows[5]["before"]["note"] == "ResolveSlot::slot[1]::0"  # whose entry this is
    assert marks[22] == ("undone", "ran again")  # the hold: released first, then made again
    assert marks[23] == ("superseded", "ran again")  # the confirmation that failed
    assert all(after == "ran again" for before, after in marks.values() if before in ("superseded", "undone"))
    after = {r["step"]: r["after"] for r in found["rows"] if "step" in r}
    assert (after[22]["key"], after[23]["status"]) == ("sched/22~r1", "confirmed")
    [undone] = found["undone"]
    assert (undone["key"], undone["undo"], undone["run"], undone["status"]) == (
        "sched/22",
        "comp/sched/22",
        "sched~recover1",
        "confirmed",
    )
    # The unchanged stretch between the instances folds, as a diff's context does.
    assert {"gap": [7, 18], "count": 12} in found["rows"]


def test_a_fork_shows_the_shared_steps_replayed_and_the_originals_later_acts_undone_then_made_again(
    book: Daybook,
) -> None:
    fork_id = wf.make_fork(book)
    found = diff(book, fork_id, None)
    assert (found["branch"], found["origin"]) == ("fork", "orig")
    assert found["summary"].startswith("Fork of orig at step 2")
    assert _marks(found) == {
        1: ("shared", "replayed"),
        2: ("shared", "replayed"),
        3: ("undone", "ran again"),
        4: ("undone", "ran again"),
        5: ("undone", "ran again"),
    }
    assert [u["undo"] for u in found["undone"]] == ["comp/orig/3", "comp/orig/4", "comp/orig/5"]
    assert {u["run"] for u in found["undone"]} == {"orig~undo@2"}


def test_a_steering_revision_shows_what_the_run_did_before_and_after_it_read_it(book: Daybook) -> None:
    wf.make_steered(book)
    found = diff(book, "steered", None)
    assert found["branch"] == "s3" and "revise 'shorter, please' by bo" in found["summary"]
    assert _marks(found) == {
        1: ("kept", "kept"),
        2: ("kept", "kept"),
        3: (None, "revision"),
        4: (None, "new"),
    }


def test_the_page_picks_a_branch_and_an_unknown_one_is_refused_naming_the_known(
    book: Daybook, cal: str, sink: ds.Sink
) -> None:
    _failed(book, cal, sink)
    book.recover("sched")
    client = TestClient(build(book))
    page = client.get("/runs/sched", params={"view": "recovery", "branch": "r1"})
    assert page.status_code == 200
    assert 'id="verdicts"' in page.text and 'id="diff"' in page.text and 'id="undone"' in page.text
    got = client.get("/api/views/recovery", params={"run": "sched", "branch": "r1"}).json()
    assert (got["checkpoint"], got["undo_run"], got["undone"][0]["key"]) == (
        "commit@3",
        "sched~recover1",
        "sched/22",
    )
    bad = client.get("/api/views/recovery", params={"run": "sched", "branch": "r9"})
    assert bad.status_code == 400 and "its branches are: r1" in bad.json()["error"]
    never = TestClient(build(book)).get("/runs/sched~recover1", params={"view": "recovery"})
    assert "No journal branch" in never.text


def _diff_rows(browser: Any) -> dict[str, list[str]]:
    """step -> [before, before mark, after, after mark], as the page shows them."""
    out: dict[str, list[str]] = {}
    for tr in browser.find_elements(By.CSS_SELECTOR, "#diff tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        if cells[0]:
            out[cells[0]] = cells[1:]
    return out


def test_in_a_browser_a_recovered_run_shows_its_restored_checkpoint_and_marked_steps(
    browser: Any, tmp_path: Path, cal: str, sink: ds.Sink
) -> None:
    db_url = f"sqlite:///{tmp_path / 'rec.db'}"
    with Daybook(db_url) as book:
        _failed(book, cal, sink)
        book.recover("sched")
        fork_id = wf.make_fork(book)
    with web_server(db_url) as base:
        browser.get(base + "/runs/sched?view=recovery")
        wait_drawn(browser)
        assert "to checkpoint commit@3" in browser.find_element(By.ID, "diff-summary").text
        verdicts = [
            [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in browser.find_elements(By.CSS_SELECTOR, "#verdicts tbody tr")
        ]
        assert verdicts[0] == ["commit@3", "yes", "yes", "yes", "eligible", "", "restored"]
        assert verdicts[1][:5] == ["entry@1", "yes", "no", "yes", "committed_consumers_present"]
        rows = _diff_rows(browser)
        assert rows["22"][1:] == ["undone", "effect sched_hold_room sched/22~r1 confirmed", "ran again"]
        assert "undone by comp/sched/22 (sched~recover1 step 1)" in rows["22"][0]
        assert rows["23"][1] == "superseded" and rows["23"][3] == "ran again"
        assert rows["3"][1::2] == ["kept", "replayed"]
        assert "steps 7 to 18: 12 unchanged" in browser.find_element(By.ID, "diff").text
        if os.environ.get("DAYBOOK_SCREENSHOTS"):
            IMAGES.mkdir(exist_ok=True)
            browser.set_window_size(1400, 1350)  # the whole diff in one picture
            browser.save_screenshot(str(IMAGES / "web-recovery.png"))
        # The run tree of the recovered run: its journal branch and its recovery run.
        browser.get(base + "/runs/sched~recover1?view=tree")
        wait_drawn(browser)
        drawn = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#tree-chart svg text") if t.text]
        assert drawn == [
            "sched [completed]",
            "recovery 1: restore at commit@3 [restored]",
            "sched~recover1 [completed]",
        ]
        browser.find_element(By.LINK_TEXT, "recovery 1: restore at commit@3").click()
        wait_until(lambda: "branch=r1" in browser.current_url)
        # A fork, the same way: the shared steps replayed, the original's later ones undone.
        browser.get(base + f"/runs/{fork_id}?view=recovery")
        rows = _diff_rows(browser)
        assert [rows[s][1::2] for s in ("1", "2", "3", "4", "5")] == [
            ["shared", "replayed"],
            ["shared", "replayed"],
            ["undone", "ran again"],
            ["undone", "ran again"],
            ["undone", "ran again"],
        ]
        said = [e["message"] for e in browser.get_log("browser")]
        assert not [m for m in said if "Content Security Policy" in m], said


def test_a_retry_after_a_fix_shows_the_step_that_raised_run_again_and_the_rest_replayed(
    book: Daybook,
) -> None:
    wf.make_retried(book)
    found = diff(book, "flaky", None)
    assert (found["branch"], found["kind"]) == ("r1", "retry")
    assert "step(s) [2] run again" in found["summary"]
    assert _marks(found) == {1: ("kept", "replayed"), 2: ("superseded", "ran again"), 3: (None, "new")}
    rows = {r["step"]: r for r in found["rows"]}
    assert (rows[2]["before"]["status"], rows[2]["after"]["status"]) == ("failed", "recorded")


def test_a_retraction_read_at_a_step_shows_the_act_it_took_back_undone(book: Daybook) -> None:
    wf.make_retracted(book)
    found = diff(book, "retracted", None)
    assert found["summary"] == "Revision read at step 4: retract 'not that one' by bo."
    assert _marks(found) == {
        1: ("kept", "kept"),
        2: ("undone", "undone"),
        3: ("kept", "kept"),
        4: (None, "revision"),
        5: (None, "undo"),
        6: (None, "new"),
    }
    [undone] = found["undone"]
    assert (undone["key"], undone["undo"], undone["run"], undone["step"]) == (
        "retracted/2",
        "comp/retracted/2",
        "retracted",
        5,
    )
