"""The run tree view (`/runs/RUN?view=tree`): from any run of a tree, the same graph of the runs
that belong together (children, continue-as-new segments, forks, recovery runs) and the branches
inside them (speculations, journal branches, steering revisions), each with its status, on real
runs on both stores; and in a real headless Chromium, the drawn nodes, their labels and a click
that opens a node's run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import web_family as wf
from conftest import wait_until
from selenium.webdriver.common.by import By
from starlette.testclient import TestClient
from webtools import wait_drawn, web_server

from daybook import Daybook
from daybook.web.app import build
from daybook.web.tree import flat, tree

IMAGES = Path(__file__).parent.parent / "docs" / "images"


def _shape(book: Daybook, run_id: str) -> list[tuple[int, str, str, str]]:
    """The tree as (depth, label, relation, status), parents first."""
    root, left_out = tree(book, run_id)
    assert left_out == 0
    return [(d, n.label, n.relation, n.status) for n, d in flat(root)]


def _current(book: Daybook, run_id: str) -> list[str]:
    root, _ = tree(book, run_id)
    return [n.id for n, _ in flat(root) if n.current]


FAMILY = [
    (0, "fam", "root", "completed"),
    (1, "speculation at step 5", "speculation", "chosen"),
    (2, "branch cheap", "speculation branch", "won"),
    (2, "branch dear", "speculation branch", "lost"),
    (1, "fam~child1", "child", "completed"),
    (1, "fam~child3", "child", "completed"),
    (1, "fam~2", "segment", "completed"),
]


def test_every_run_of_a_family_shows_the_same_tree_from_its_root_with_itself_highlighted(
    book: Daybook,
) -> None:
    wf.make_family(book)
    for run_id in ("fam", "fam~child3", "fam~2"):
        assert _shape(book, run_id) == FAMILY
        assert _current(book, run_id) == [run_id]
    root, _ = tree(book, "fam~2")
    branches = {n.label: n.detail for n, _ in flat(root) if n.kind == "branch"}
    assert "transaction committed" in branches["branch cheap"]
    assert "transaction aborted" in branches["branch dear"]


def test_a_fork_and_the_run_that_undid_the_originals_later_acts_hang_under_the_original(
    book: Daybook,
) -> None:
    fork_id = wf.make_fork(book)
    expected = [
        (0, "orig", "root", "completed"),
        (1, "orig~undo@2", "recovery", "completed"),
        (1, fork_id, "fork", "completed"),
    ]
    for run_id in ("orig", fork_id, "orig~undo@2"):
        assert _shape(book, run_id) == expected
    root, _ = tree(book, fork_id)
    details = {n.id: n.detail for n, _ in flat(root)}
    assert details[fork_id] == "fork at step 2 (took over its later steps)"
    assert details["orig~undo@2"] == "undoes acts of orig for a fork at step 2"


def test_a_fork_given_an_id_of_its_own_is_found_from_its_origin(book: Daybook) -> None:
    wf.WORLD.clear()
    book.run(wf.steps, 3, run_id="plain")
    book.fork("plain", 1, new_run_id="what-if", undo=False)
    book.resume("what-if")
    assert _shape(book, "plain") == [(0, "plain", "root", "completed"), (1, "what-if", "fork", "completed")]


def test_a_steering_revision_is_a_node_of_its_run_linking_to_its_diff(book: Daybook) -> None:
    wf.make_steered(book)
    root, _ = tree(book, "steered")
    [revision] = root.children
    assert (revision.label, revision.status, revision.relation) == (
        "revision at step 3",
        "read",
        "steering revision",
    )
    assert "revise 'shorter, please' by bo" in revision.detail
    assert revision.href == "/runs/steered?view=recovery&branch=s3"


def test_the_tree_json_nests_the_nodes_and_the_page_lists_them_without_script(book: Daybook) -> None:
    wf.make_family(book)
    client = TestClient(build(book))
    got = client.get("/api/views/tree", params={"run": "fam~child1"}).json()
    assert got["root"]["label"] == "fam" and got["left_out"] == 0
    kids = [c["label"] for c in got["root"]["children"]]
    assert kids == ["speculation at step 5", "fam~child1", "fam~child3", "fam~2"]
    assert [c["current"] for c in got["root"]["children"]] == [False, True, False, False]
    page = client.get("/runs/fam~child1", params={"view": "tree"})
    assert page.status_code == 200
    assert 'src="/static/tree.js"' in page.text and "(this run)" in page.text
    assert 'href="/runs/fam~2"' in page.text  # each node links to its run's page
    assert client.get("/runs/nobody", params={"view": "tree"}).status_code == 404


def test_a_revision_text_with_markup_is_shown_escaped_in_the_tree(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(wf.daybook.Suspended):
        book.run(wf.steered, run_id="xss")
    book.steer("xss", "add", "<img src=x onerror=alert(1)>", author="<b>eve</b>", wait=0)
    book.signal("xss", "go")
    book.resume("xss")
    page = TestClient(build(book)).get("/runs/xss", params={"view": "tree"}).text
    assert "<img src=x" not in page and "<b>eve" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def _drawn(browser: Any) -> list[str]:
    """The labels the picture shows (ECharts draws SVG text)."""
    wait_drawn(browser)
    return [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#tree-chart svg text") if t.text]


def _no_csp_violation(browser: Any) -> None:
    said = [e["message"] for e in browser.get_log("browser")]
    assert not [m for m in said if "Content Security Policy" in m], said


def test_in_a_browser_the_tree_draws_each_node_with_its_status_and_a_click_opens_its_run(
    browser: Any, tmp_path: Path
) -> None:
    db_url = f"sqlite:///{tmp_path / 'tree.db'}"
    with Daybook(db_url) as book:
        wf.make_family(book)
        fork_id = wf.make_fork(book)
    with web_server(db_url) as base:
        browser.get(base + "/runs/fam~child1?view=tree")
        drawn = _drawn(browser)
        assert drawn == [
            "fam [completed]",
            "speculation at step 5 [chosen]",
            "branch cheap [won]",
            "branch dear [lost]",
            "fam~child1 [completed]",
            "fam~child3 [completed]",
            "fam~2 [completed]",
        ]
        rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, "#tree-nodes tbody tr")]
        assert rows[4].strip() == "fam~child1 (this run) child completed child of fam"
        _no_csp_violation(browser)
        if os.environ.get("DAYBOOK_SCREENSHOTS"):
            IMAGES.mkdir(exist_ok=True)
            browser.save_screenshot(str(IMAGES / "web-tree.png"))
        [segment] = [
            t
            for t in browser.find_elements(By.CSS_SELECTOR, "#tree-chart svg text")
            if t.text == "fam~2 [completed]"
        ]
        segment.click()
        wait_until(lambda: browser.current_url.endswith("/runs/fam~2"))
        assert "completed" in browser.find_element(By.ID, "run-status").text
        browser.get(base + f"/runs/{fork_id}?view=tree")
        assert _drawn(browser) == [
            "orig [completed]",
            "orig~undo@2 [completed]",
            f"{fork_id} [completed]",
        ]
        heavy = browser.find_elements(By.CSS_SELECTOR, "#tree-nodes strong")
        assert [h.text for h in heavy] == ["(this run)"]


def test_a_retry_after_a_fix_is_a_journal_branch_of_its_run_linking_to_its_diff(book: Daybook) -> None:
    wf.make_retried(book)
    root, _ = tree(book, "flaky")
    [branch] = root.children
    assert (branch.label, branch.status, branch.kind) == ("retry 1", "retried", "journal-branch")
    assert branch.detail.endswith("steps 2 run again")
    assert branch.href == "/runs/flaky?view=recovery&branch=r1"
