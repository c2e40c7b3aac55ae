"""A checkout's edits under SIGKILL, on both stores: a real agent process killed between an
edit's files and its snapshot, between its snapshot and its journal row, and in the middle of
its files; the resume finds the snapshots consistent with the files, with no edit lost or made
twice. A kill followed by a change made outside the run: the resume finds the drift before its
next edit instead of writing over it. A UI agent killed between its view check and its click,
against a scripted page served on 127.0.0.1: the resume checks the page again, and clicks only
if it is as the agent saw it."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import HERE, killed
from test_workspace_drift import git_repo

from daybook import Daybook, Kind
from daybook.workspace import snapshot

EDITS = 5


def child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "workspace_child.py"), *args], capture_output=True, text=True, timeout=300
    )


def expected(n: int) -> dict[str, str]:
    files = {f"f{i}.txt": f"file {i}\n" for i in range(1, n + 1)}
    files["log.txt"] = "".join(f"edit {j}\n" for j in range(1, n + 1))
    files["README.md"] = "hello\n"
    return dict(sorted(files.items()))


def tree(root: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(root.iterdir()) if p.is_file()}


CRASH_POINTS = {
    "files_written_before_snapshot": ["--kill-at-ref", "3"],
    "snapshot_before_outcome_row": ["--kill-before", "outcome:3"],
    "half_the_files_written": ["--kill-at-rename", "5"],
}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_kill_inside_an_edit_then_resume_leaves_every_edit_once_and_the_snapshots_consistent(
    db_url: str, tmp_path: Path, point: str
) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "hello\n"})
    run_id = f"ws-crash-{point}"

    first = child(db_url, "start", run_id, str(repo), *CRASH_POINTS[point])
    assert killed(first), first.stdout + first.stderr
    resumed = child(db_url, "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr

    assert json.loads(resumed.stdout.strip().splitlines()[-1])["result"] == {"edits": EDITS}
    assert tree(repo) == expected(EDITS)
    root = str(repo)
    chain = [snapshot.read(root, c) for c in snapshot.chain(root, run_id)]
    with Daybook(db_url) as book:
        journal = book.journal(run_id)
    edits = [
        e
        for e in journal
        if e.kind == Kind.OUTCOME and e.name == "workspace.edit" and e.status == "confirmed"
    ]
    assert len(edits) == EDITS and len({e.key for e in edits}) == EDITS
    # One snapshot per edit (and the base), each holding exactly the files after its edit.
    assert [s.step for s in chain] == [0, *[e.step for e in edits]]
    for n, snap in enumerate(chain[1:], start=1):
        want = {k: v for k, v in expected(n).items() if k != "README.md"}
        got = {p: snapshot.read_blob(root, b).decode() for p, b in snap.files.items()}
        assert got == want
        assert edits[n - 1].data["result"]["snapshot"] == snap.commit


def test_a_kill_then_a_change_outside_the_run_is_found_by_the_resume_before_its_next_edit(
    db_url: str, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "hello\n"})
    first = child(db_url, "start", "ws-crash-drift", str(repo), "--kill-after", "outcome:3")
    assert killed(first), first.stderr
    (repo / "log.txt").write_text("edit 1\nedit 2\nedit 3\na person's note\n")

    resumed = child(db_url, "resume", "ws-crash-drift")

    assert resumed.returncode == 3, resumed.stdout + resumed.stderr
    assert "ReplayDiverged" in resumed.stdout and "log.txt" in resumed.stdout
    assert (repo / "log.txt").read_text() == "edit 1\nedit 2\nedit 3\na person's note\n"
    assert not (repo / "f4.txt").exists()


class Page:
    """A scripted UI on 127.0.0.1: a counter and a button; the test can put up a modal."""

    def __init__(self) -> None:
        self.count = 0
        self.modal = ""
        page = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._send(f"<h1>{page.count}</h1><button>+1</button>{page.modal}")

            def do_POST(self) -> None:
                page.count += 1
                self._send(str(page.count))

            def _send(self, text: str) -> None:
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def page() -> Iterator[Page]:
    served = Page()
    yield served
    served.server.shutdown()


@pytest.mark.parametrize("changed", [True, False], ids=["screen_changed", "screen_as_it_was"])
def test_a_kill_between_the_view_check_and_the_click_is_checked_again_on_resume(
    db_url: str, page: Page, changed: bool
) -> None:
    run_id = f"ws-screen-{changed}"
    # Decisions: the look (1), the check right before the click (2); killed after the check.
    first = child(db_url, "screen", run_id, page.url, "--kill-after", "decision:2")
    assert killed(first), first.stdout + first.stderr
    if changed:
        page.modal = "<div class=modal>Your session expired</div>"

    resumed = child(db_url, "resume", run_id)

    if changed:
        assert resumed.returncode == 3 and "ReplayDiverged" in resumed.stdout, resumed.stdout + resumed.stderr
        assert page.count == 0  # never clicked on the changed screen
    else:
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert page.count == 1
