"""One identity for every actor (audit R12): a registered approver's name needs its key, a gate's
approver is not every run's operator, and any other name is journaled as unauthenticated beside
the OS user and the database role, so the audit trail can tell a claim from a proof."""

from __future__ import annotations

import getpass
import json
import time
from typing import Any

import psycopg
import pytest
from conftest import cli_in_process

import daybook
from daybook import Daybook, Suspended
from daybook.gates import identity


@daybook.workflow
def listener(ctx: daybook.Context) -> list[list[Any]]:
    ctx.wait_for("go", timeout=3600)
    return [[r.author, r.kind, r.text, r.target, r.authenticated] for r in ctx.revisions()]


def _waiting(book: Daybook, run_id: str) -> None:
    book.inline_wait = 0
    with pytest.raises(Suspended):
        book.run(listener, run_id=run_id)


def _db_role(url: str) -> str | None:
    if not url.startswith("postgresql"):
        return None
    with psycopg.connect(url.split("?")[0]) as pg:
        row = pg.execute("SELECT current_user").fetchone()
        return str(row[0]) if row else None


def test_steering_as_a_registered_approver_without_its_key_is_refused(book: Daybook) -> None:
    book.add_approver("alice", roles=["approver", "operator"])
    _waiting(book, "L1")
    before = len(book.store.inbox("L1"))
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.steer("L1", "retract", "stop the wire", author="alice", target="send_wire", wait=0)
    with pytest.raises(daybook.NotAuthorized, match="not 'alice'"):
        book.steer("L1", "retract", "stop", author="alice", token=book.add_approver("bob"), wait=0)
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.pause("L1", by="alice")
    refused = cli_in_process(
        "steer", "L1", "retract", "stop the wire", "--as", "alice", "--wait", "0", db=book.url
    )
    assert refused.returncode == 1 and "needs its key" in refused.stderr
    assert len(book.store.inbox("L1")) == before  # nothing was written
    assert book.get_run("L1").status == "suspended"


def test_names_taken_on_trust_are_journaled_as_unauthenticated_beside_the_os_user_and_db_role(
    book: Daybook,
) -> None:
    _waiting(book, "L2")
    # The audit's spoofs: a name nobody registered, even one that looks like an approval.
    ack = book.steer("L2", "revise", "8000 words", author="ceo", wait=0)
    assert ack["authenticated"] is False
    with pytest.raises(daybook.ConfigError, match="one line"):  # a name that forges a second line
        book.steer("L2", "add", "ok", author="alice\n[approved by cfo]", wait=0)
    book.steer("L2", "add", "ok", author="alice [approved by cfo]", wait=0)
    assert book.pause("L2", by="mallory") == "paused"
    paused = next(ev for ev in book.journal("L2") if ev.kind == "run_paused")
    expected = {"authenticated": False, "os_user": getpass.getuser(), "db_role": _db_role(book.url)}
    assert paused.data["by"] == "mallory" and paused.data["identity"] == expected
    book.signal("L2", "go")
    read = book.resume("L2")
    assert [r[0] for r in read] == ["ceo", "alice [approved by cfo]"]
    assert [r[4] for r in read] == [False, False]  # claimed, not proven


def test_an_operator_acting_with_its_key_is_journaled_as_authenticated(book: Daybook) -> None:
    token = book.add_approver("olga", roles=["operator"])
    _waiting(book, "L3")
    ack = book.steer("L3", "retract", "skip it", author="olga", target="t", token=token, wait=0)
    assert ack["authenticated"] is True
    assert book.pause("L3", by="olga", token=token) == "paused"
    paused = next(ev for ev in book.journal("L3") if ev.kind == "run_paused")
    assert paused.data["identity"]["authenticated"] is True
    assert identity.verify(book.store, "pause", "L3", "olga", paused.data["identity"])
    assert not identity.verify(book.store, "cancel", "L3", "olga", paused.data["identity"])  # not movable
    book.signal("L3", "go")
    assert book.resume("L3") == [["olga", "retract", "skip it", "t", True]]
    book.remove_approver("olga")  # a removed operator's past acts no longer verify, new ones fail
    assert not identity.verify(book.store, "pause", "L3", "olga", paused.data["identity"])


def test_a_steer_row_written_into_the_store_in_an_operators_name_reads_as_unauthenticated(
    book: Daybook,
) -> None:
    token = book.add_approver("olga", roles=["operator"])
    _waiting(book, "L4")
    book.steer("L4", "add", "fine", author="olga", token=token, wait=0)
    signed = json.loads(next(p for _, n, p, _, _ in book.store.inbox("L4") if n == "steer:"))
    # The forger copies olga's signed identity onto a retraction of its own.
    body = {"kind": "retract", "text": "undo the payments", "target": "pay", "identity": signed["identity"]}
    book.store.signal("L4", "steer:", json.dumps(body), "olga", time.time())
    book.signal("L4", "go")
    read = book.resume("L4")
    assert [(r[1], r[4]) for r in read] == [("add", True), ("retract", False)]


def test_an_approver_of_a_gate_is_not_an_operator_of_every_run(book: Daybook) -> None:
    token = book.add_approver("alice")  # approver only: the default role
    _waiting(book, "L5")
    for act in (
        lambda: book.pause("L5", by="alice", token=token),
        lambda: book.cancel("L5", True, by="alice", token=token),
        lambda: book.retry("L5", by="alice", token=token, submit=True),
        lambda: book.steer("L5", "retract", "x", author="alice", token=token, wait=0),
    ):
        with pytest.raises(daybook.NotAuthorized, match="operator role"):
            act()
    assert book.get_run("L5").status == "suspended"
    assert book.approvers() == {"alice": ["approver"]}


def test_the_cli_takes_an_operators_key_from_a_key_file(db_url: str, tmp_path: Any) -> None:
    key = tmp_path / "olga.key"
    made = cli_in_process("approvers", "add", "olga", "--role", "operator", "--key-file", str(key), db=db_url)
    assert made.returncode == 0, made.stderr
    with Daybook(db_url, inline_wait=0) as book, pytest.raises(Suspended):
        book.run(listener, run_id="L6")
    refused = cli_in_process("pause", "L6", "--by", "olga", db=db_url)
    assert refused.returncode == 1 and "needs its key" in refused.stderr
    done = cli_in_process("pause", "L6", "--by", "olga", "--key-file", str(key), db=db_url)
    assert done.returncode == 0, done.stderr
    listed = cli_in_process("approvers", "list", "--roles", "--json", db=db_url)
    assert json.loads(listed.stdout) == {"olga": ["operator"]}
    assert cli_in_process("approvers", "list", "--roles", db=db_url).stdout == "olga\toperator\n"
    assert cli_in_process("approvers", "remove", "olga", db=db_url).returncode == 0
    assert json.loads(cli_in_process("approvers", "list", "--json", db=db_url).stdout) == []
    with Daybook(db_url) as book:
        paused = next(ev for ev in book.journal("L6") if ev.kind == "run_paused")
        assert paused.data["by"] == "olga" and paused.data["identity"]["authenticated"] is True
