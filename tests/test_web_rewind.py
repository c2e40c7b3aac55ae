"""Rewinding a coding run's checkout from the inspector (issue 32: `daybook rewind` "and the web
page"), on both stores, in a real git repository: an operator sees the run's edits on its page,
a dry run says what would happen and changes nothing, the rewind puts back exactly the files of
"after edit 3 of 7" as `daybook rewind` does and the run is pending on its journal branch; a
viewer sees no form and is refused; a bad step is a 400 naming what to give."""

from __future__ import annotations

import html
from pathlib import Path

from test_web_roles import forms, signed_in
from test_workspace_rewind import IGNORED, after_edit, ignored_files, repo, seven, tree  # noqa: F401

from daybook import Daybook, RunStatus
from daybook.gates import audit as audit_log
from daybook.web.app import build


def test_an_operator_rewinds_a_coding_run_to_after_edit_3_of_7_from_its_page(
    book: Daybook,
    repo: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    steps = seven(book, repo, tmp_path, "web-rw")
    token = book.add_approver("olga", roles=("operator",))
    client, csrf = signed_in(build(book), "olga", token)
    page = client.get("/runs/web-rw").text
    assert "/runs/web-rw/rewind" in forms(page)
    assert all(f"after edit {n} (step {s})" in page for n, s in enumerate(steps, 1))

    preview = client.post(
        "/runs/web-rw/rewind",
        data={"csrf": csrf, "to": str(steps[2]), "dry_run": "1"},
        headers={"accept": "application/json"},
    )
    assert preview.status_code == 200, preview.text
    assert "dry run" in preview.json()["said"] and "4 removed" in preview.json()["said"]
    assert tree(repo) == after_edit(7) and book.get_run("web-rw").status == RunStatus.SUSPENDED

    done = client.post(
        "/runs/web-rw/rewind",
        data={"csrf": csrf, "to": str(steps[2])},
        headers={"accept": "application/json"},
    )
    assert done.status_code == 200, done.text
    assert tree(repo) == after_edit(3)  # at the world: exactly the files after edit 3
    assert ignored_files(repo) == IGNORED  # live state, left alone and named
    assert ".env" in done.json()["said"] and "pending" in done.json()["said"]
    assert book.get_run("web-rw").status == RunStatus.PENDING
    rewinds = [e for e in audit_log.entries(book.store, None, 100) if e.action == "rewind"]
    assert [(e.who, e.outcome) for e in rewinds] == [("olga", "done"), ("olga", "done")]  # both audited


def test_a_viewer_sees_no_rewind_form_and_a_bad_step_is_refused_saying_what_to_give(
    book: Daybook,
    repo: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    steps = seven(book, repo, tmp_path, "web-rw2")
    viewer = book.add_approver("vera", roles=("viewer",))
    client, csrf = signed_in(build(book), "vera", viewer)
    assert "/runs/web-rw2/rewind" not in forms(client.get("/runs/web-rw2").text)
    refused = client.post("/runs/web-rw2/rewind", data={"csrf": csrf, "to": str(steps[2])})
    assert refused.status_code == 403 and tree(repo) == after_edit(7)

    operator = book.add_approver("olga", roles=("operator",))
    client, csrf = signed_in(build(book), "olga", operator)
    for bad in ("three", "", "99999"):
        answer = client.post("/runs/web-rw2/rewind", data={"csrf": csrf, "to": bad})
        assert answer.status_code == 400, (bad, answer.status_code)
        assert "step" in html.unescape(answer.text)
    assert tree(repo) == after_edit(7) and book.get_run("web-rw2").status == RunStatus.SUSPENDED


def test_a_run_without_checkout_edits_shows_no_rewind_form(book: Daybook) -> None:
    @__import__("daybook").workflow(name="web_rw_plain")
    def plain(ctx: object) -> str:
        return "ok"

    book.run(plain, run_id="plain")
    token = book.add_approver("olga", roles=("operator",))
    client, _ = signed_in(build(book), "olga", token)
    page = client.get("/runs/plain").text
    assert "/runs/plain/rewind" not in forms(page) and "rewind-section" not in page
