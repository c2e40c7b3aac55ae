"""One identity for every actor, on the paths that took a name on trust (audit R12, R11): a
retraction under a name nobody can prove undoes no confirmed effect and stops no running call;
signals, updates, budget raises, forks and gc under a registered approver's name need its key.
Both stores; the undo is asserted at the counterparty's own ledger (the bank)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import agents
import pytest
from conftest import cli_in_process, wait_until

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank


def _offer_loop(bank: Bank, prompts: list[str], gate: threading.Event) -> daybook.AgentLoop:
    """Books a hold at the bank, waits (the model "thinks") while steering arrives, books a
    second, and reads the steering at the top of its third pass."""
    script = [
        json.dumps({"tool": "book_leg", "args": {"bank": bank.url, "n": 1, "fail_inverse_of": -1}}),
        json.dumps({"tool": "book_leg", "args": {"bank": bank.url, "n": 2, "fail_inverse_of": -1}}),
        json.dumps({"tool": "stop"}),
    ]

    def reply(prompt: str) -> str:
        prompts.append(prompt)
        if len(prompts) == 2:
            gate.wait(30)
        return script[len(prompts) - 1]

    return daybook.AgentLoop(
        llm=daybook.ScriptedLLM(reply),
        tools={"book_leg": agents.book_leg},
        observe=lambda: {},
        prompt=lambda goal, obs, history: f"{goal} | {history}",
        judge=lambda goal, history: daybook.Judgement(True),
    )


def _steered_offer(book: Daybook, bank: Bank, run_id: str, *steer: list[str]) -> dict[str, Any]:
    """Run the loop; once the hold is booked, send each `daybook steer` command line (another
    process, as an operator would), then let the loop go on and return its result."""
    prompts: list[str] = []
    gate = threading.Event()
    loop = _offer_loop(bank, prompts, gate)

    @daybook.workflow(name=f"offer-{run_id}")
    def offer(ctx: daybook.Context) -> dict[str, Any]:
        return loop.run(ctx, "hold a seat").as_dict()

    done: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: done.update(book.run(offer, run_id=run_id)))
    runner.start()
    wait_until(lambda: len(prompts) >= 2)
    assert len(bank.records["payments"]) == 1  # the hold is confirmed at the bank
    for args in steer:
        sent = cli_in_process(
            "steer",
            run_id,
            "retract",
            "release the hold",
            "--target",
            f"{run_id}/2",
            "--wait",
            "0",
            *args,
            db=book.url,
        )
        assert sent.returncode == 0, sent.stderr
    gate.set()
    runner.join(60)
    return done


def test_an_unauthenticated_retraction_does_not_run_the_counterpartys_inverse(
    book: Daybook, bank: Bank
) -> None:
    book.add_approver("olga", roles=["operator"])  # identities are in use: retractions need a key
    done = _steered_offer(book, bank, "spoof", ["--as", "ceo"])
    assert done["outcome"] == "ok"
    assert len(bank.records["payments"]) == 2 and bank.records.get("cancels", []) == []  # the holds stand
    retraction = next(h for h in done["history"] if h.get("revision") == "retract")
    assert retraction["author"] == "ceo" and retraction["authenticated"] is False
    assert retraction["undone"] == [] and retraction["held"] == ["spoof/2/book_leg/0"]
    acts = [h["state"] for h in done["history"] if h.get("tool") == "book_leg"]
    assert acts == ["done", "done"]  # not passed off as retracted
    assert book.replay("spoof") == done


def test_without_registered_operators_a_retraction_taken_on_trust_still_undoes_once(
    book: Daybook, bank: Bank
) -> None:
    # No identities set up: the retraction keeps its force, journaled as unauthenticated.
    done = _steered_offer(book, bank, "plain", ["--as", "ceo"])
    assert len(bank.records.get("cancels", [])) == 1
    retraction = next(h for h in done["history"] if h.get("revision") == "retract")
    assert retraction["authenticated"] is False and retraction["undone"] == ["plain/2/book_leg/0"]


def test_an_authenticated_operators_retraction_runs_the_inverse_once(
    book: Daybook, bank: Bank, tmp_path: Any
) -> None:
    key = tmp_path / "olga.key"
    made = cli_in_process(
        "approvers", "add", "olga", "--role", "operator", "--key-file", str(key), db=book.url
    )
    assert made.returncode == 0, made.stderr
    done = _steered_offer(book, bank, "real", ["--as", "olga", "--key-file", str(key)])
    assert len(bank.records.get("cancels", [])) == 1  # the bank released the first hold, once
    retraction = next(h for h in done["history"] if h.get("revision") == "retract")
    assert retraction["authenticated"] is True and retraction["undone"] == ["real/2/book_leg/0"]
    assert all(n == 1 for n in bank.stats()["executions_by_key"].values())


STOP = threading.Event()
STARTS: list[str] = []


def _stop(**_: Any) -> None:
    STOP.set()


@daybook.tool(cancel=_stop)
def upload(*, seconds: float, idempotency_key: str) -> str:
    STARTS.append(idempotency_key)
    STOP.wait(seconds)
    return "stopped" if STOP.is_set() else "sent"


@daybook.workflow
def uploader(ctx: daybook.Context) -> str:
    return str(ctx.effect(upload, seconds=3.0))


def test_an_unauthenticated_retraction_does_not_stop_a_running_call(db_url: str) -> None:
    STOP.clear()
    STARTS.clear()
    with Daybook(db_url, lease_ttl=0.9) as book:  # the heartbeat looks every 0.3 s
        book.add_approver("olga", roles=["operator"])  # identities in use: a retraction needs a key
        done: list[str] = []
        runner = threading.Thread(target=lambda: done.append(book.run(uploader, run_id="up")))
        runner.start()
        wait_until(lambda: STARTS)
        book.steer("up", "retract", "do not upload", author="mallory", target="upload", wait=0)
        runner.join(60)
        assert done == ["sent"] and not STOP.is_set()  # the call ran to its end, never asked to stop
        assert [ev.status for ev in book.journal("up") if ev.kind == "outcome"] == ["confirmed"]


@daybook.workflow
def inbox_reader(ctx: daybook.Context) -> list[list[Any]]:
    got = ctx.wait_for("go", timeout=3600)
    assert got is not None
    return [got.sender, got.payload, got.authenticated]


def _suspended(book: Daybook, workflow: Any, run_id: str) -> None:
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(workflow, run_id=run_id)


def _row(book: Daybook, run_id: str, name: str) -> dict[str, Any]:
    return next(ev.data for ev in book.journal(run_id) if ev.name == name and ev.status == "received")


def test_a_signal_under_a_registered_approvers_name_without_its_key_is_refused(book: Daybook) -> None:
    book.add_approver("alice")  # an approver of gates: any role may sign a signal
    _suspended(book, inbox_reader, "S1")
    before = len(book.store.inbox("S1"))
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.signal("S1", "go", {"approved": True}, sender="alice")
    with pytest.raises(daybook.NotAuthorized, match="not 'alice'"):
        book.signal("S1", "go", {"approved": True}, sender="alice", token=book.add_approver("bob"))
    refused = cli_in_process(
        "signal", "S1", "go", "--payload", '{"approved": true}', "--by", "alice", db=book.url
    )
    assert refused.returncode == 1 and "needs its key" in refused.stderr
    assert len(book.store.inbox("S1")) == before  # nothing was written
    assert book.get_run("S1").status == "suspended"


def test_a_signal_from_an_unregistered_name_is_journaled_as_unauthenticated(book: Daybook) -> None:
    _suspended(book, inbox_reader, "S2")
    book.signal("S2", "go", {"ok": 1}, sender="cfo")  # the old signature: no key, a name on trust
    assert book.resume("S2") == ["cfo", {"ok": 1}, False]
    row = _row(book, "S2", "signal:go")
    assert row["sender"] == "cfo" and row["authenticated"] is False
    assert row["identity"]["authenticated"] is False and set(row["identity"]) == {
        "authenticated",
        "os_user",
        "db_role",
    }
    assert book.replay("S2") == ["cfo", {"ok": 1}, False]


def test_a_signal_signed_with_its_senders_key_reads_as_authenticated(book: Daybook, tmp_path: Any) -> None:
    key = tmp_path / "alice.key"
    assert cli_in_process("approvers", "add", "alice", "--key-file", str(key), db=book.url).returncode == 0
    _suspended(book, inbox_reader, "S3")
    sent = cli_in_process(
        "signal", "S3", "go", "--payload", "[1, 2]", "--by", "alice", "--key-file", str(key), db=book.url
    )
    assert sent.returncode == 0, sent.stderr
    assert book.resume("S3") == ["alice", [1, 2], True]


def test_a_signed_signal_copied_onto_another_payload_reads_as_unauthenticated(book: Daybook) -> None:
    token = book.add_approver("alice")
    _suspended(book, inbox_reader, "S4")
    _suspended(book, inbox_reader, "S5")
    book.signal("S4", "go", "small", sender="alice", token=token)
    signed = json.loads(book.store.inbox("S4")[-1][2])
    # The forger reuses alice's signed identity on a payload of its own, and on another run.
    forged = {**signed, "payload": "large"}
    book.store.signal("S5", "go", json.dumps(forged), "alice", time.time())
    assert book.resume("S5") == ["alice", "large", False]
    assert _row(book, "S5", "signal:go")["identity"]["authenticated"] is False
    assert book.resume("S4") == ["alice", "small", True]


def test_a_budget_raise_under_an_operators_name_needs_its_key_and_role(book: Daybook) -> None:
    olga = book.add_approver("olga", roles=["operator"])
    alice = book.add_approver("alice")  # approver only
    book.submit(agents.spender, 5, run_id="B1")
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.raise_budget("B1", by="olga", usd=0.04)
    with pytest.raises(daybook.NotAuthorized, match="operator role"):
        book.raise_budget("B1", by="alice", token=alice, usd=0.04)
    refused = cli_in_process("budget", "B1", "--raise", "usd=0.04", "--by", "olga", db=book.url)
    assert refused.returncode == 1 and "needs its key" in refused.stderr
    assert book.store.inbox("B1") == []
    book.raise_budget("B1", by="olga", token=olga, usd=0.04)
    book.raise_budget("B1", by="intern", usd=0.04)  # on trust: taken, journaled as such
    assert book.resume("B1") == {"spent": pytest.approx(0.16), "rounds": 4}
    raises = [e.data for e in book.journal("B1") if e.status == "received"]
    assert [(r["sender"], r["authenticated"]) for r in raises] == [("olga", True), ("intern", False)]
    assert book.budget("B1")["caps"] == {"usd": pytest.approx(0.18)}


def test_an_update_under_an_operators_name_needs_its_key(book: Daybook) -> None:
    book.add_approver("olga", roles=["operator"])
    _suspended(book, inbox_reader, "U1")
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.update("U1", "grow", {"n": 1}, sender="olga", timeout=0)
    assert book.store.inbox("U1") == []
    with pytest.raises(daybook.UpdateTimeout):
        book.update("U1", "grow", {"n": 1}, sender="ops", timeout=0)
    body = json.loads(book.store.inbox("U1")[0][2])
    assert body["identity"]["authenticated"] is False and body["payload"]["args"] == {"n": 1}


@daybook.tool
def note(*, text: str, idempotency_key: str) -> str:
    return text


@daybook.workflow
def noted(ctx: daybook.Context) -> str:
    return ctx.effect(note, text="a") + ctx.effect(note, text="b")


def test_a_fork_under_an_operators_name_needs_its_key(book: Daybook) -> None:
    token = book.add_approver("olga", roles=["operator"])
    book.run(noted, run_id="F1")
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.fork("F1", 1, by="olga", new_run_id="F1-x")
    assert book.store.get_run("F1-x") is None
    refused = cli_in_process("fork", "F1", "--at", "1", "--by", "olga", db=book.url)
    assert refused.returncode == 1 and "needs its key" in refused.stderr
    fork_id, _ = book.fork("F1", 1, confirm=True, new_run_id="F1-a")  # the old signature still works
    first = book.journal(fork_id)[0].data
    assert first["identity"]["authenticated"] is False and first["identity"]["os_user"] == first["by"]
    book.fork("F1", 1, by="olga", token=token, confirm=True, new_run_id="F1-b")
    assert book.journal("F1-b")[0].data["identity"]["authenticated"] is True


def test_gc_under_an_operators_name_needs_its_key(book: Daybook) -> None:
    token = book.add_approver("olga", roles=["operator"])
    with pytest.raises(daybook.NotAuthorized, match="needs its key"):
        book.gc(0.0, by="olga")
    refused = cli_in_process("gc", "--older-than", "1d", "--by", "olga", db=book.url)
    assert refused.returncode == 1 and "needs its key" in refused.stderr
    assert book.gc_log() == []
    done = book.gc(86_400.0, by="olga", token=token)
    assert done["who"] == "olga" and done["identity"]["authenticated"] is True  # type: ignore[index]
    assert book.gc(86_400.0, by="janitor")["identity"]["authenticated"] is False  # type: ignore[index]


@pytest.mark.parametrize("who", ["", "   ", 7, ["alice"]])
def test_a_name_that_is_empty_or_not_text_is_refused(book: Daybook, who: Any) -> None:
    _suspended(book, inbox_reader, "N1")
    for act in (
        lambda: book.signal("N1", "go", 1, sender=who),
        lambda: book.raise_budget("N1", by=who, usd=1),
        lambda: book.pause("N1", by=who),
        lambda: book.gc(86_400.0, by=who),
        lambda: book.fork("N1", 0, by=who),
    ):
        with pytest.raises(daybook.ConfigError, match=r"non-empty name|must be a string"):
            act()
    assert book.store.inbox("N1") == []


def test_a_key_that_is_not_text_or_not_a_key_is_refused(book: Daybook) -> None:
    book.add_approver("olga", roles=["operator"])
    _suspended(book, inbox_reader, "K1")
    with pytest.raises(daybook.ConfigError, match="bytes"):
        book.signal("K1", "go", 1, sender="olga", token=b"key")  # type: ignore[arg-type]
    for bad in ("", "not-a-key", book.add_approver("eve")):
        with pytest.raises(daybook.NotAuthorized):
            book.signal("K1", "go", 1, sender="olga", token=bad)
    assert book.store.inbox("K1") == []
