"""One identity for every actor, on the paths that took a name on trust (audit R12, R11): a
retraction under a name nobody can prove undoes no confirmed effect and stops no running call;
signals, updates, budget raises, forks and gc under a registered approver's name need its key.
Both stores; the undo is asserted at the counterparty's own ledger (the bank)."""

from __future__ import annotations

import json
import threading
from typing import Any

import agents
from conftest import cli, wait_until

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
        sent = cli(
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
    done = _steered_offer(book, bank, "spoof", ["--as", "ceo"])
    assert done["outcome"] == "ok"
    assert len(bank.records["payments"]) == 2 and bank.records.get("cancels", []) == []  # the holds stand
    retraction = next(h for h in done["history"] if h.get("revision") == "retract")
    assert retraction["author"] == "ceo" and retraction["authenticated"] is False
    assert retraction["undone"] == [] and retraction["held"] == ["spoof/2/book_leg/0"]
    acts = [h["state"] for h in done["history"] if h.get("tool") == "book_leg"]
    assert acts == ["done", "done"]  # not passed off as retracted
    assert book.replay("spoof") == done


def test_an_authenticated_operators_retraction_runs_the_inverse_once(
    book: Daybook, bank: Bank, tmp_path: Any
) -> None:
    key = tmp_path / "olga.key"
    made = cli("approvers", "add", "olga", "--role", "operator", "--key-file", str(key), db=book.url)
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
        done: list[str] = []
        runner = threading.Thread(target=lambda: done.append(book.run(uploader, run_id="up")))
        runner.start()
        wait_until(lambda: STARTS)
        book.steer("up", "retract", "do not upload", author="mallory", target="upload", wait=0)
        runner.join(60)
        assert done == ["sent"] and not STOP.is_set()  # the call ran to its end, never asked to stop
        assert [ev.status for ev in book.journal("up") if ev.kind == "outcome"] == ["confirmed"]
