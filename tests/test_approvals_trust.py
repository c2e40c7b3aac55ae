"""Approvals nobody can forge (audit D1): a gate opens only on a verdict that `approve` wrote
after the token check, bound to the gated act, consumed once; refused attempts leave a trace."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import agents
import psycopg
import pytest
from conftest import cli, cli_in_process
from test_append_only import _sql, readme_roles

import daybook
from daybook import Daybook, Suspended
from daybook.gates import seal, signing
from daybook.runtime import inbox


@daybook.workflow
def wire_gate(ctx: daybook.Context) -> dict[str, Any]:
    verdict = ctx.gate(
        "wire 1M", approvers=["alice"], timeout=3600, about={"tool": "wire", "amount": 1_000_000}
    )
    return {"outcome": verdict.outcome, "approver": verdict.approver}


@daybook.workflow
def two_acts_one_decision(ctx: daybook.Context) -> list[str]:
    plan = ctx.decide("plan", lambda: {"legs": 2})
    first = ctx.gate("wire 1M", decision=plan, timeout=3600)
    second = ctx.gate("wire 2M", decision=plan, timeout=3600)
    return [first.outcome, second.outcome]


def _suspend(book: Daybook, wf: Any, run_id: str) -> None:
    book.inline_wait = 0.05
    with pytest.raises(Suspended):
        book.run(wf, run_id=run_id)


def test_a_plain_signal_cannot_approve_a_gate(book: Daybook) -> None:
    book.add_approver("alice")
    _suspend(book, wire_gate, "g2")
    # The audit's exact attack: a signal named like a verdict, from a self-declared sender.
    with pytest.raises(daybook.ConfigError, match="reserved"):
        book.signal("g2", "verdict:g2/1", {"outcome": "approve"}, sender="mallory")
    forged = cli_in_process(
        "signal", "g2", "verdict:g2/1", "--payload", '{"outcome":"approve"}', "--by", "mallory", db=book.url
    )
    assert forged.returncode == 1 and "reserved" in forged.stderr
    for name in ("late-verdict:g2/1", "update:x", "budget:raise"):
        with pytest.raises(daybook.ConfigError, match="reserved"):
            book.signal("g2", name, {})
    assert [g["gate_id"] for g in book.approvals()] == ["g2/1"]
    with pytest.raises(Suspended):
        book.resume("g2")  # still waiting: nothing was delivered


def test_a_verdict_for_another_act_does_not_release_the_gate(book: Daybook) -> None:
    token = book.add_approver("alice")
    _suspend(book, wire_gate, "bound")
    # A verdict row that names this gate but carries the digest of another act (what a verdict
    # written for a different action under the same gate id would carry) releases nothing, even
    # signed by alice's own key: the gate reads it, sets it aside and waits on.
    payload = {"outcome": "approve", "reason": "", "digest": "0" * 32}
    sealed = seal.seal(token, "bound", "bound/1", payload, "alice")
    book.store.signal("bound", "verdict:bound/1", json.dumps(sealed), "alice", time.time())
    with pytest.raises(Suspended):
        book.resume("bound")
    refused = [v for v in book.verdicts("bound") if v["state"] == "refused"]
    assert [v["reason"] for v in refused] == ["the verdict was given for another act"]
    assert book.approve("bound", "bound/1", approver="alice", token=token) == "delivered"
    assert book.resume("bound") == {"outcome": "approved", "approver": "alice"}


def test_an_approval_is_consumed_once_and_never_releases_the_next_act(book: Daybook) -> None:
    token = book.add_approver("alice")
    _suspend(book, two_acts_one_decision, "legs")
    gate = "legs/1"  # both gates are addressed to the plan decision
    assert book.approve("legs", gate, approver="alice", token=token) == "delivered"
    with pytest.raises(Suspended):
        book.resume("legs")  # the first act is approved; the second waits for its own verdict
    waiting = book.approvals()
    assert [(g["gate_id"], g["action"]) for g in waiting] == [(gate, "wire 2M")]
    assert book.approve("legs", gate, approver="alice", token=token, approve=False) == "delivered"
    assert book.resume("legs") == ["approved", "declined"]


def test_refused_attempts_are_journaled_with_who_when_and_why(book: Daybook) -> None:
    token = book.add_approver("alice")
    bob = book.add_approver("bob")
    _suspend(book, wire_gate, "audit")
    with pytest.raises(daybook.NotAuthorized):
        book.approve("audit", "audit/1", approver="mallory", token="guess")
    with pytest.raises(daybook.NotAuthorized, match="may not decide"):
        book.approve("audit", "audit/1", approver="bob", token=bob)
    refused = [v for v in book.verdicts("audit") if v["state"] == "refused"]
    assert [(v["approver"], v["outcome"]) for v in refused] == [("mallory", "approve"), ("bob", "approve")]
    assert "token does not match" in str(refused[0]["reason"]) and "may not decide" in str(
        refused[1]["reason"]
    )
    assert all(isinstance(v["at"], float) for v in refused)
    # A refusal is never read as a verdict: the gate still waits, and alice's approval works.
    assert [g["gate_id"] for g in book.approvals()] == ["audit/1"]
    assert book.approve("audit", "audit/1", approver="alice", token=token) == "delivered"
    assert book.resume("audit") == {"outcome": "approved", "approver": "alice"}
    shown = cli_in_process("approvals", db=book.url)
    assert shown.returncode == 0 and "refused" in shown.stdout and "mallory" in shown.stdout
    history = cli_in_process("approvals", "--history", "--json", db=book.url)
    states = [v["state"] for v in json.loads(history.stdout)]
    assert states.count("refused") == 2 and states.count("delivered") == 1


def test_a_refused_verdict_does_not_wake_the_suspended_run(book: Daybook) -> None:
    book.add_approver("alice")
    _suspend(book, wire_gate, "asleep")
    before = book.get_run("asleep")
    assert before.status == "suspended"
    with pytest.raises(daybook.NotAuthorized):
        book.approve("asleep", "asleep/1", approver="mallory", token="guess")
    after = book.get_run("asleep")
    # A worker takes a suspended run when its wake time is due: a refusal must not set one.
    assert after.status == "suspended" and after.wake_at == before.wake_at
    assert book.store.claim_next("a-worker", 5.0, time.time()) is None


def test_late_and_timed_out_verdicts_are_shown_beside_refusals(book: Daybook) -> None:
    token = book.add_approver("alice")
    book.inline_wait = 5

    @daybook.workflow
    def brief_gate(ctx: daybook.Context) -> str:
        return ctx.gate("deploy", timeout=0.1).outcome

    assert book.run(brief_gate, run_id="brief") == "timed_out"
    assert book.approve("brief", "brief/1", approver="alice", token=token) == "late"
    states = sorted(str(v["state"]) for v in book.verdicts("brief"))
    assert states == ["late", "timed_out"]


def test_the_approver_token_is_read_from_DAYBOOK_TOKEN(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0.05) as book:
        token = book.add_approver("oncall")
        with pytest.raises(Suspended):
            book.run(agents.restart, "http://127.0.0.1:9", 3600.0, run_id="env")
    env = {k: v for k, v in os.environ.items() if k not in ("DAYBOOK_TOKEN", "DAYBOOK_APPROVER_TOKEN")}
    missing = cli("approve", "env", "env/1", "--as", "oncall", db=db_url, env=env)
    assert missing.returncode == 2 and "DAYBOOK_TOKEN" in missing.stderr  # a usage error
    done = cli("approve", "env", "env/1", "--as", "oncall", db=db_url, env={**env, "DAYBOOK_TOKEN": token})
    assert done.returncode == 0 and "delivered" in done.stdout, done.stderr


# -- forgeries at the store (audit R7): the agent holds the database, not the approvers' keys ----


def _forge_row(book: Daybook, run_id: str, gate_id: str, payload: dict[str, Any]) -> None:
    """The audit's forgery, a plain SQL INSERT into daybook_inbox: a verdict row in alice's
    name, written with the store's own credentials and no key."""
    text = json.dumps(payload).replace("'", "''")
    _sql(
        book.url,
        "INSERT INTO daybook_inbox (run_id, name, payload, sender, at) "
        f"VALUES ('{run_id}', 'verdict:{gate_id}', '{text}', 'alice', {time.time()})",
    )


def test_a_verdict_row_inserted_into_the_store_does_not_open_the_gate(book: Daybook) -> None:
    token = book.add_approver("alice")
    _suspend(book, wire_gate, "sql")
    digest = book.approvals()[0]["digest"]
    forged = [
        {"outcome": "approve"},  # the audit's row: no digest, no signature
        {"outcome": "approve", "reason": "", "digest": digest},  # the right digest, unsigned
        {"outcome": "approve", "reason": "", "digest": digest, "signature": "A" * 86},  # junk
    ]
    for payload in forged:
        _forge_row(book, "sql", "sql/1", payload)
    assert [g["gate_id"] for g in book.approvals()] == ["sql/1"]  # a forged row hides nothing
    with pytest.raises(Suspended):
        book.resume("sql")  # it read all three, refused each, and waits on
    history = book.verdicts("sql")
    assert [v["state"] for v in history] == ["refused"] * 3
    assert "no act digest" in str(history[0]["reason"]) and "not signed" in str(history[1]["reason"])
    # The real approval is not made late by the forged rows before it.
    assert book.approve("sql", "sql/1", approver="alice", token=token) == "delivered"
    assert book.resume("sql") == {"outcome": "approved", "approver": "alice"}


def test_an_in_process_internal_send_of_a_verdict_does_not_open_the_gate(book: Daybook) -> None:
    book.add_approver("alice")
    _suspend(book, wire_gate, "inproc")
    digest = book.approvals()[0]["digest"]
    # What any code in the agent's process can call, as the audit did.
    inbox.send(book._runner.claims, "inproc", "verdict:inproc/1", {"outcome": "approve", "digest": digest},
               "alice", internal=True)  # fmt: skip
    with pytest.raises(Suspended):
        book.resume("inproc")
    assert [v["state"] for v in book.verdicts("inproc")] == ["refused"]


def test_a_verdict_signed_with_another_approvers_key_is_refused(book: Daybook) -> None:
    book.add_approver("alice")
    bob = book.add_approver("bob")
    _suspend(book, wire_gate, "other")
    digest = book.approvals()[0]["digest"]
    # bob signs a verdict and files it under alice's name: bob's key does not make it alice's.
    payload = seal.seal(
        bob, "other", "other/1", {"outcome": "approve", "reason": "", "digest": digest}, "alice"
    )
    _forge_row(book, "other", "other/1", payload)
    with pytest.raises(Suspended):
        book.resume("other")
    refused = book.verdicts("other")
    assert refused[0]["state"] == "refused" and "signature is not 'alice'" in str(refused[0]["reason"])


def test_rotating_a_key_in_the_store_is_impossible_the_keys_live_in_the_approvers_file(
    db_url: str, tmp_path: Any
) -> None:
    keys = tmp_path / "approvers.json"
    with Daybook(db_url, inline_wait=0.05, approvers_file=str(keys)) as book:
        token = book.add_approver("alice")
        with pytest.raises(Suspended):
            book.run(wire_gate, run_id="rot")
        assert "alice" in json.loads(keys.read_text())["approvers"]
        assert book.store.approvers() == {}  # nothing about alice's key is in the database
        # The audit's second forgery: an agent-chosen token, as if it had been written in place.
        with pytest.raises(daybook.NotAuthorized):
            book.approve("rot", "rot/1", approver="alice", token="agent-chosen-token")
        with pytest.raises(daybook.NotAuthorized):  # a well-formed key, but not alice's
            book.approve("rot", "rot/1", approver="alice", token=signing.new_token())
    # Another handle on the same store without the file cannot tell alice's key at all.
    other = Daybook(db_url, approvers_file=str(tmp_path / "other.json"))
    with other, pytest.raises(daybook.NotAuthorized):
        other.approve("rot", "rot/1", approver="alice", token=token)
    with Daybook(db_url, inline_wait=0.05, approvers_file=str(keys)) as book:
        assert book.approve("rot", "rot/1", approver="alice", token=token) == "delivered"
        assert book.resume("rot") == {"outcome": "approved", "approver": "alice"}
        book.add_approver("alice")  # rotated afterwards: the verdict the gate read stays history
        assert [v["state"] for v in book.verdicts("rot")][-1] == "delivered"


def test_a_signed_approval_from_a_key_file_goes_through_the_cli(db_url: str, tmp_path: Any) -> None:
    key = tmp_path / "alice.key"
    made = cli_in_process("approvers", "add", "alice", "--key-file", str(key), db=db_url)
    assert made.returncode == 0 and made.stdout == "", made.stderr  # the key is not printed
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    with Daybook(db_url, inline_wait=0.05) as book, pytest.raises(Suspended):
        book.run(wire_gate, run_id="cli")
    env = {k: v for k, v in os.environ.items() if k not in ("DAYBOOK_TOKEN", "DAYBOOK_APPROVER_TOKEN")}
    done = cli_in_process(
        "approve", "cli", "cli/1", "--as", "alice", db=db_url, env={**env, "DAYBOOK_KEY_FILE": str(key)}
    )
    assert done.returncode == 0 and "delivered" in done.stdout, done.stderr
    with Daybook(db_url) as book:
        assert book.resume("cli") == {"outcome": "approved", "approver": "alice"}
        assert [v["state"] for v in book.verdicts("cli")] == ["delivered"]


def test_the_readme_agents_role_cannot_forge_a_verdict_or_pick_an_approvers_key(tmp_path: Any) -> None:
    """R7 on PostgreSQL, connected as the README's least-privilege role agents and workers use."""
    with readme_roles() as (owner_url, app_url):
        keys = str(tmp_path / "approvers.json")
        with Daybook(owner_url, approvers_file=keys) as owner:
            token = owner.add_approver("alice")
        with Daybook(app_url, inline_wait=0.05, approvers_file=keys) as agent:
            with pytest.raises(Suspended):
                agent.run(wire_gate, run_id="wire1")
            digest = agent.approvals()[0]["digest"]
        with psycopg.connect(app_url.split("?")[0], autocommit=True) as pg:
            pg.execute(f'SET search_path TO "{app_url.rsplit("=", 1)[1]}"')  # type: ignore[arg-type]
            for payload in ({"outcome": "approve"}, {"outcome": "approve", "reason": "", "digest": digest}):
                pg.execute(
                    "INSERT INTO daybook_inbox (run_id, name, payload, sender, at) "
                    "VALUES ('wire1', 'verdict:wire1/1', %s, 'alice', extract(epoch from now()))",
                    (json.dumps(payload),),
                )
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # approvers are owner-only
                pg.execute("UPDATE daybook_approvers SET token_hash = 'x' WHERE name = 'alice'")
        with Daybook(app_url, inline_wait=0.05, approvers_file=keys) as agent:
            with pytest.raises(Suspended):
                agent.resume("wire1")
            assert [v["state"] for v in agent.verdicts("wire1")] == ["refused", "refused"]
            assert agent.approve("wire1", "wire1/1", approver="alice", token=token) == "delivered"
            assert agent.resume("wire1") == {"outcome": "approved", "approver": "alice"}


def test_a_history_from_before_signed_verdicts_replays_as_it_happened_and_a_queued_old_verdict_is_refused(
    book: Daybook, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migration: a run that read its (unsigned) verdict under the old code keeps that
    history on replay; an old verdict still unread is refused and the gate waits for a new one."""
    token = book.add_approver("alice")
    _suspend(book, wire_gate, "old")
    _suspend(book, wire_gate, "queued")
    digests = {g["run_id"]: g["digest"] for g in book.approvals()}
    old_verdict = {"outcome": "approve", "reason": "", "digest": digests["old"]}
    _forge_row(book, "old", "old/1", old_verdict)  # what the old `approve` wrote: no signature
    with monkeypatch.context() as old_code:  # the code before signed verdicts: no check step
        old_code.setattr(daybook.gates.gate.Gates, "_check", lambda *args: None)
        assert book.resume("old") == {"outcome": "approved", "approver": "alice"}
    assert not any(ev.name.startswith("verdict-check:") for ev in book.journal("old"))
    assert book.replay("old") == {"outcome": "approved", "approver": "alice"}  # history stands
    assert [v["state"] for v in book.verdicts("old")] == ["delivered"]
    _forge_row(book, "queued", "queued/1", {**old_verdict, "digest": digests["queued"]})
    with pytest.raises(Suspended):
        book.resume("queued")  # read after the upgrade: refused, and the gate waits on
    assert book.approve("queued", "queued/1", approver="alice", token=token) == "delivered"
    assert book.resume("queued") == {"outcome": "approved", "approver": "alice"}
