"""The three ledgers a run keeps (why each effect happened, what it did with whom, what it owes),
through the public API and the `daybook` command line, on both store backends."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import HERE, cli, cli_in_process, killed, run_child

import daybook
from daybook import Daybook, Kind, ScriptedLLM, Why
from daybook.demo.bank import Bank


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@daybook.tool(idempotent=True)
def books_refund(*, amount: int, idempotency_key: str) -> dict[str, Any]:
    return {"refund": f"rf-{idempotency_key}", "amount": amount}


@daybook.tool(idempotent=True)
def books_note(*, text: str, idempotency_key: str) -> dict[str, str]:
    return {"noted": text}


SUPPORT_REPLY = "We will refund $50 by Friday."
SUPPORT_PROMPT = "customer C-7 asks for a refund of order 19"


@daybook.workflow
def books_support(ctx: daybook.Context) -> str:
    """A model's answer promises a refund: the refund and the promise both follow from it."""
    llm = ScriptedLLM(lambda prompt: SUPPORT_REPLY, model="support-model-2")
    reply = ctx.llm(llm, SUPPORT_PROMPT, why=Why(policy="refunds", version="v2"))
    promise = ctx.obligation("refund", owner="support-bot", due_in=86400, about={"amount": 50})
    ctx.effect(books_refund, amount=50)
    ctx.fulfil(promise, "refund sent")
    quote = ctx.obligation("quote_expiry", owner="sales", due_in=86400, about="Q-17", decision=reply)
    ctx.cancel(quote, "customer declined")
    return promise


@daybook.workflow
def books_first_thing(ctx: daybook.Context) -> Any:
    """An effect before any decision; clock and id reads are inputs, not reasons."""
    ctx.now()
    ctx.uuid()
    first = ctx.effect(books_note, text="started")
    ctx.decide("plan", lambda: "go", why=Why(policy="ops", version="v1"))
    ctx.effect(books_note, text="planned")
    return first


@daybook.workflow
def books_two_plans(ctx: daybook.Context) -> None:
    """Two decisions, the effect naming the earlier one explicitly."""
    a = ctx.decide("pick_a", lambda: "a", why=Why(policy="p", version="v1"))
    ctx.decide("pick_b", lambda: "b")
    ctx.effect(books_note, decision=a, text="from a")
    ctx.effect(books_note, text="from b")


def parked_unknown(book: Daybook, bank: Bank, run_id: str = "parked") -> None:
    """A payment whose reply the bank drops; its tool cannot be asked, so the run parks."""
    bank.faults.collections = set()
    bank.faults.drop_after_execute = 1
    with pytest.raises(daybook.NeedsAttention):
        book.run(agents.blind, bank.url, run_id=run_id)


# -- the decision ledger: why an effect happened ------------------------------------------------


def test_why_an_effect_happened_names_its_decision_policy_version_observation_and_alternatives(
    db_url: str, bank: Bank
) -> None:
    with Daybook(db_url) as book:
        result = book.run(agents.http_payout, bank.url, 250, {}, run_id="payout")
        found = book.why("payout/2")  # the wire, named by its idempotency key
        plan = next(e for e in book.journal("payout") if e.kind == Kind.DECISION and e.name == "plan")
    assert found["effect"] == {
        "run_id": "payout",
        "step": 2,
        "seq": found["effect"]["seq"],
        "tool": "bankapi.wire",
        "key": "payout/2",
        "args": {"to": "ACME", "amount": 250},
        "status": "confirmed",
        "result": found["effect"]["result"],
        "ref": result["wire"],
    }
    decision = found["decision"]
    assert decision["id"] == "payout/1" and decision["name"] == "plan"
    assert decision["value"] == {"to": "ACME", "amount": 250}
    assert decision["policy"] == "payouts" and decision["version"] == "v3"
    assert decision["observation"] == {"snapshot": "balances-2026-11-22"}
    assert decision["alternatives"] == ["hold", "split in two"]
    assert decision["digest"] == plan.fp and decision["seq"] == plan.seq
    assert found["mandate"]["workflow"] == "http_payout"

    # The command line gives the same answer, by key or by RUN STEP.
    assert as_json(cli_in_process("why", "payout/2", "--json", db=db_url)) == found
    text = cli_in_process("why", "payout", "3", db=db_url)
    assert text.returncode == 0, text.stderr
    assert "decision payout/1 'plan'" in text.stdout and f"ref {result['gl']}" in text.stdout
    for line in ("policy       payouts", "version      v3", "balances-2026-11-22", "split in two"):
        assert line in text.stdout
    assert f"context digest {plan.fp}" in text.stdout


def test_every_effects_decision_is_journaled_before_its_intent_even_across_a_crash(
    db_url: str, bank: Bank
) -> None:
    # J7. The crashed run dies after its plan is recorded and before the wire's intent; the
    # process that resumes it replays the plan and links the wire to that same row.
    proc = run_child(
        db_url,
        "start",
        "j7-crash",
        "http_payout",
        json.dumps([bank.url, 40, {}]),
        "--kill-before",
        "intent:1",
    )
    assert killed(proc)
    assert run_child(db_url, "resume", "j7-crash").returncode == 0
    with Daybook(db_url) as book:
        book.run(agents.http_payout, bank.url, 60, {}, run_id="j7-live")
        book.run(books_support, run_id="j7-llm")
        book.run(books_two_plans, run_id="j7-explicit")
        linked = 0
        for run_id in ("j7-crash", "j7-live", "j7-llm", "j7-explicit"):
            journal = book.journal(run_id)
            decisions = {f"{run_id}/{e.step}": e for e in journal if e.kind == Kind.DECISION}
            for intent in (e for e in journal if e.kind == Kind.INTENT):
                source = intent.data["decision"]
                assert source in decisions, f"{run_id} step {intent.step} links to {source!r}"
                assert decisions[source].seq < intent.seq
                linked += 1
        assert linked == 2 + 2 + 1 + 2
        explicit = {e["request"]["text"]: e["decision"] for e in book.effects("j7-explicit")}
    assert explicit == {"from a": "j7-explicit/1", "from b": "j7-explicit/2"}
    assert bank.stats()["executions_by_key"]["j7-crash/2"] == 1


def test_a_models_decision_records_the_model_id_and_tokens_it_used(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(books_support, run_id="ticket")
        found = book.why("ticket", 3)
        exported = book.export("ticket")
    decision = found["decision"]
    assert decision["id"] == "ticket/1" and decision["name"] == "llm"
    assert decision["model"] == "support-model-2"
    assert decision["tokens"] == len(SUPPORT_PROMPT.split()) + len(SUPPORT_REPLY.split())
    assert decision["policy"] == "refunds" and decision["version"] == "v2"  # the caller's why, kept
    assert decision["value"]["text"] == SUPPORT_REPLY
    [reserved, row] = [e for e in exported["events"] if e["kind"] == "decision"]
    assert reserved["status"] == "reserved" and "why" not in reserved["data"]
    assert row["data"]["why"] == {
        "policy": "refunds",
        "version": "v2",
        "model": "support-model-2",
        "tokens": decision["tokens"],
    }


def test_an_effect_with_no_decision_before_it_follows_from_the_runs_mandate(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(books_first_thing, run_id="first")
        first = book.why("first", 3)
        later = book.why("first", 5)
    assert first["decision"] is None
    assert first["mandate"]["workflow"] == "books_first_thing"
    assert first["mandate"]["input"] == {"args": [], "kwargs": {}}
    assert later["decision"]["name"] == "plan"  # once there is one, effects follow from it
    text = cli_in_process("why", "first/3", db=db_url)
    assert text.returncode == 0, text.stderr
    assert "no decision before it" in text.stdout and "books_first_thing(" in text.stdout


# -- the effect ledger: what was done, with whom, and what became of it ---------------------------


def test_every_confirmed_effect_links_to_one_decision_and_keeps_the_counterpartys_reference(
    db_url: str, bank: Bank
) -> None:
    # L2, including effects whose reply was lost (confirmed by asking the bank by key) and ones
    # the bank refused for a while (confirmed on a later attempt under the same key).
    with Daybook(db_url) as book:
        book.run(agents.http_payout, bank.url, 10, {}, run_id="l2-plain")
        bank.faults.collections = {"wires"}
        bank.faults.drop_after_execute = 1
        book.run(agents.http_payout, bank.url, 20, {}, run_id="l2-dropped")
        bank.faults.refuse = 2
        book.run(agents.http_payout, bank.url, 30, {}, run_id="l2-refused")
        confirmed = book.effects(status="confirmed")
        journals = {r: book.journal(r) for r in ("l2-plain", "l2-dropped", "l2-refused")}
        assert book.effects(status="unknown") == []
    assert len(confirmed) == 6
    for eff in confirmed:
        source = eff["decision"]
        assert isinstance(source, str)
        run_id, step = source.rsplit("/", 1)
        assert run_id == eff["run_id"]
        rows = [e for e in journals[run_id] if e.kind == Kind.DECISION and e.step == int(step)]
        assert len(rows) == 1 and rows[0].name == "plan"
        assert eff["ref"] is not None and eff["ref"] == eff["response"]["id"]
        assert (
            bank.records["wires" if eff["tool"] == "bankapi.wire" else "gl"][eff["key"]]["id"] == eff["ref"]
        )
    dropped = [h["status"] for h in next(e for e in confirmed if e["key"] == "l2-dropped/2")["history"]]
    assert dropped == ["intent", "unknown", "confirmed"]
    wires = [e for e in confirmed if e["tool"] == "bankapi.wire"]
    assert all(e["compensation"] == {"tool": "bankapi.wire.undo", "key": f"comp/{e['key']}"} for e in wires)


@pytest.mark.slow
def test_the_effect_ledger_lists_a_parked_unknown_with_its_history(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        bank.faults.collections = {"wires"}
        bank.faults.drop_after_execute = 1
        book.run(agents.http_payout, bank.url, 5, {}, run_id="settled")  # unknown once, then confirmed
        parked_unknown(book, bank)

    listed = as_json(cli_in_process("effects", "--json", db=db_url))
    assert {(e["key"], e["status"]) for e in listed} == {
        ("settled/2", "confirmed"),
        ("settled/3", "confirmed"),
        ("parked/1", "unknown"),
    }
    [unknown] = as_json(cli_in_process("effects", "--status", "unknown", "--json", db=db_url))
    assert unknown["run_id"] == "parked" and unknown["tool"] == "pay_blind" and unknown["key"] == "parked/1"
    assert unknown["decision"] is None and unknown["ref"] is None
    assert unknown["request"] == {"bank": bank.url, "n": 1}
    assert [h["status"] for h in unknown["history"]] == ["intent", "unknown"]
    assert "no answer came" in unknown["history"][-1]["reason"]

    table = cli_in_process("effects", "parked", "--tool", "pay_blind", "--history", db=db_url)
    assert table.returncode == 0, table.stderr
    assert "parked/1" in table.stdout and "unknown" in table.stdout
    assert "parked/1: intent -> unknown" in table.stdout
    assert "settled" not in table.stdout


@pytest.mark.slow
def test_resolving_an_unknown_by_hand_records_the_reference_who_and_evidence(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        parked_unknown(book, bank)

    done = cli_in_process(
        "resolve", "parked/1", "--confirmed", "wire-XYZ", "--by", "alice", "--evidence", "stmt", db=db_url
    )
    assert done.returncode == 0, done.stderr
    assert "resolved as confirmed" in done.stdout and "daybook resume parked" in done.stdout

    [row] = as_json(cli_in_process("effects", "parked", "--json", db=db_url))
    assert row["status"] == "confirmed" and row["ref"] == "wire-XYZ" and row["response"] == "wire-XYZ"
    last = row["history"][-1]
    assert last["status"] == "confirmed"
    assert (last["resolved_by"], last["by"], last["evidence"], last["ref"]) == (
        "manual",
        "alice",
        "stmt",
        "wire-XYZ",
    )
    table = cli_in_process("effects", db=db_url)
    [line] = [ln for ln in table.stdout.splitlines() if "parked/1" in ln]
    assert "confirmed" in line and "wire-XYZ" in line

    # The resolution is a journal row: it is in the export, and the run goes on from it.
    exported = as_json(cli_in_process("export", "parked", db=db_url))
    outcome = exported["events"][-1]
    assert outcome["kind"] == "outcome" and outcome["key"] == "parked/1"
    assert outcome["data"]["by"] == "alice" and outcome["data"]["evidence"] == "stmt"
    with Daybook(db_url) as book:
        assert book.resume("parked") == "wire-XYZ"
        assert book.why("parked/1")["effect"]["ref"] == "wire-XYZ"
    assert bank.stats()["executions_by_key"] == {"parked/1": 1}  # never sent again


def test_resolving_with_a_json_result_keeps_the_reference_given_separately(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        parked_unknown(book, bank)
        ev = book.resolve(
            "parked/1", confirmed={"id": "pay-77", "n": 1}, ref="pay-77", by="bob", evidence="ticket 12"
        )
        assert ev.status == "confirmed" and ev.data["ref"] == "pay-77"
        [row] = book.effects("parked")
        assert row["response"] == {"id": "pay-77", "n": 1} and row["ref"] == "pay-77"
        assert book.resume("parked") == {"id": "pay-77", "n": 1}


def test_the_ledgers_are_rows_of_the_export(db_url: str, bank: Bank) -> None:
    with Daybook(db_url) as book:
        result = book.run(agents.http_payout, bank.url, 75, {}, run_id="exp")
    exported = as_json(cli_in_process("export", "exp", db=db_url))
    assert exported["format"] == "daybook.export" and exported["run"]["status"] == "completed"
    events = exported["events"]
    [plan] = [e for e in events if e["kind"] == "decision"]
    assert plan["data"]["why"]["policy"] == "payouts" and plan["data"]["why"]["version"] == "v3"
    assert plan["fp"]  # the context digest `daybook why` shows
    intents = [e for e in events if e["kind"] == "intent"]
    assert [i["data"]["decision"] for i in intents] == ["exp/1", "exp/1"]
    refs = {e["key"]: e["data"]["ref"] for e in events if e["kind"] == "outcome"}
    assert refs == {"exp/2": result["wire"], "exp/3": result["gl"]}
    [wire] = [e for e in events if e["kind"] == "outcome" and e["key"] == "exp/2"]
    assert wire["data"]["compensation"] == {"tool": "bankapi.wire.undo", "key": "comp/exp/2"}


# -- the obligation ledger: what a run owes -----------------------------------------------------


def test_obligations_link_to_the_decision_that_made_them_and_show_how_they_were_settled(
    db_url: str,
) -> None:
    with Daybook(db_url) as book:
        assert book.run(books_support, run_id="owed") == "owed/2"
        found = {o["kind"]: o for o in book.obligations()}
        assert [o["id"] for o in book.obligations("cancelled")] == ["owed/5"]
    assert found["refund"]["decision"] == "owed/1"  # the model's reply that promised it
    assert found["quote_expiry"]["decision"] == "owed/1"
    assert found["refund"]["state"] == "fulfilled" and found["refund"]["owner"] == "support-bot"
    assert found["refund"]["about"] == {"amount": 50}
    listed = as_json(cli_in_process("obligations", "--status", "fulfilled", "--json", db=db_url))
    assert [o["id"] for o in listed] == ["owed/2"]


# -- tool profiles --------------------------------------------------------------------------------


def test_tools_lists_each_tools_counterparty_profile(tmp_path: Path) -> None:
    # The HTTP adapter registers its tools when the API is built; tests/agents.py builds it inside
    # the workflow, so a module that builds it at import time is what shows them here.
    app = tmp_path / "bank_app.py"
    app.write_text(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\nimport agents\n"
        "API = agents.bank_api('http://127.0.0.1:1')\n"
    )
    profiles = as_json(cli_in_process("tools", "--app", str(HERE / "agents.py"), "--app", str(app), "--json"))
    by_name = {p["name"]: p for p in profiles}
    blind = by_name["pay_blind"]  # declared with a retry policy and nothing else
    assert blind["effect_class"] == "irreversible" and blind["irreversible"] is True
    assert blind["accepts_keys"] is False and blind["gated_by_agent_loop"] is True
    assert blind["gated_by_default"] is False  # a plain ctx.effect runs it at once (D-3)
    assert blind["status_query"] is False and blind["inverse"] is None
    wire = by_name["bankapi.wire"]
    assert wire["effect_class"] == "compensable" and wire["status_query"] is True
    assert wire["lookup_by_reference"] is True and wire["reference"] is True
    assert wire["inverse"] == "bankapi.wire.undo" and wire["gated_by_agent_loop"] is False
    assert wire["accepts_keys"] is True and wire["idempotent"] is True
    assert by_name["bankapi.gl"]["effect_class"] == "idempotent" and by_name["bankapi.gl"]["inverse"] is None
    assert by_name["pay"]["effect_class"] == "idempotent" and by_name["pay"]["status_query"] is True
    assert by_name["book_leg"]["inverse"] == "cancel_leg"

    table = cli_in_process("tools", "--app", str(HERE / "agents.py"))
    assert table.returncode == 0, table.stderr
    [line] = [ln for ln in table.stdout.splitlines() if ln.startswith("pay_blind ")]
    assert "irreversible" in line and "gated" in line


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_unknown_effect_given_to_why_or_resolve_exits_non_zero_saying_what_to_do(
    db_url: str, bank: Bank
) -> None:
    with Daybook(db_url) as book:
        book.run(agents.http_payout, bank.url, 1, {}, run_id="bad")
        before = [e.as_dict() for e in book.journal("bad")]
        with pytest.raises(daybook.ConfigError, match="daybook effects"):
            book.why("no-such-key")
        with pytest.raises(daybook.ConfigError, match="daybook effects"):
            book.resolve("no-such-key", confirmed="wire-1", by="alice")

    for args in (
        ["why", "no-such-key"],
        ["resolve", "no-such-key", "--confirmed", "wire-1", "--by", "alice", "--evidence", "x"],
    ):
        proc = cli(*args, db=db_url)  # a real process: argv, stderr and the exit code for real
        assert proc.returncode == 1, args
        assert "no effect has key 'no-such-key'" in proc.stderr and "daybook effects" in proc.stderr
        assert "Traceback" not in proc.stderr

    decision_step = cli_in_process("why", "bad", "1", db=db_url)  # step 1 is the plan, not an effect
    assert decision_step.returncode == 1 and "daybook show bad" in decision_step.stderr
    settled = cli_in_process("resolve", "bad/2", "--confirmed", "wire-1", db=db_url)
    assert settled.returncode == 1 and "already confirmed; nothing to resolve" in settled.stderr
    no_choice = cli_in_process("resolve", "bad/2", db=db_url)
    assert no_choice.returncode == 2 and "--confirmed" in no_choice.stderr  # a usage error
    no_run = cli_in_process("why", "nope", "2", db=db_url)
    assert no_run.returncode == 1 and "daybook runs" in no_run.stderr

    with Daybook(db_url) as book:
        assert [e.as_dict() for e in book.journal("bad")] == before  # nothing was written


# -- bookkeeping steps are not reasons --------------------------------------------------------


def test_charging_a_models_cost_does_not_replace_it_as_the_reason_for_the_next_effect(
    db_url: str,
) -> None:
    @daybook.workflow(name="books_charged")
    def charged(ctx: daybook.Context) -> None:
        reply = ctx.llm(ScriptedLLM(["refund 5"]), "what now?")
        ctx.budget.charge(usd=0.01, tokens=float(reply.value["output_tokens"]))
        ctx.effect(books_refund, amount=5)

    with Daybook(db_url) as book:
        book.run(charged, run_id="charged")
        assert book.why("charged", 3)["decision"]["name"] == "llm"
