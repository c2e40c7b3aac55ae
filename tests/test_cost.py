"""The cost ledger and budgets the runtime enforces (issue 31): every model call is admitted and
charged (D-10), a cap pauses the run until a person raises it (from another process) or stops
it, `on_cap="fail"` raises, replay's saved calls and a crash's re-spent call are shown honestly,
a SIGKILL between a call's reservation and its settlement leaves the books right, a tree's cost
sums its runs, and bad prices or caps are refused with a clear error. Both stores."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import cli, cli_in_process, killed, run_child
from store_bytes import store_text

import daybook
from daybook import Daybook, RunStatus, Suspended
from daybook.errors import ConfigError, DaybookError, PriceTableError

CALL_USD = (2 * 2.5 + 1000 * 10.0) / 1_000_000  # "question N" in (2 tokens), 1,000 out, gpt-4o


def completions(book: Daybook, run_id: str) -> int:
    """Model calls recorded (not their reservations)."""
    return sum(1 for e in book.journal(run_id) if e.name == "llm" and e.status == "recorded")


def test_model_calls_under_a_cap_are_charged_tokens_and_usd_d10(book: Daybook) -> None:
    @daybook.workflow
    def five_calls(ctx: daybook.Context) -> dict[str, float]:
        ctx.budget.cap(usd=0.05)
        for i in range(5):
            ctx.llm(daybook.ScriptedLLM(["x"]), f"q{i}")
        return ctx.budget.spent

    spent = book.run(five_calls, run_id="d10")
    # ScriptedLLM's model is in no price table: its tokens count (1 in, 1 out a call), USD 0.
    assert spent == {"tokens": 10.0, "usd": 0.0}
    assert book.budget("d10")["spent"] == spent
    ledger = book.cost("d10")
    assert (ledger.calls, ledger.tokens, ledger.usd, ledger.unpriced) == (5, 10, 0.0, ("scripted-1",))


def test_a_priced_model_call_costs_what_the_price_table_says(book: Daybook) -> None:
    result = book.run(agents.model_calls, 3, run_id="priced")
    assert result["spent"]["usd"] == pytest.approx(3 * CALL_USD)
    ledger = book.cost("priced")
    assert ledger.usd == pytest.approx(3 * CALL_USD) and ledger.unpriced == ()
    [model] = ledger.models
    assert (model.model, model.calls, model.input_tokens, model.output_tokens) == ("gpt-4o", 3, 6, 3000)
    assert [(x.kind, x.attempts, x.state) for x in ledger.lines] == [("model", 1, "settled")] * 3


def test_a_users_price_table_prices_its_own_model(db_url: str) -> None:
    with Daybook(db_url, prices={"scripted-1": {"input": 1_000_000, "output": 0}}) as book:

        @daybook.workflow
        def one_call(ctx: daybook.Context) -> dict[str, float]:
            ctx.llm(daybook.ScriptedLLM(["x"]), "one two three")
            return ctx.budget.spent

        assert book.run(one_call, run_id="own") == {"usd": 3.0, "tokens": 4.0}
        assert book.cost("own").unpriced == ()


def test_a_cap_pauses_the_run_and_a_raise_from_another_process_lets_it_go_on(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(Suspended, match="budget raise"):
        book.run(agents.capped_calls, 3, 0.015, run_id="capped")
    assert book.get_run("capped").status == RunStatus.SUSPENDED
    assert completions(book, "capped") == 2  # the third call was never made
    shown = cli_in_process("budget", "capped", db=book.url)
    assert shown.returncode == 0, shown.stderr
    assert "paused" in shown.stdout and "daybook budget capped --raise usd=AMOUNT" in shown.stdout
    assert "--stop" in shown.stdout
    raised = cli("budget", "capped", "--raise", "usd=0.01", db=book.url)  # another process
    assert raised.returncode == 0, raised.stderr
    done = book.resume("capped")
    assert done["spent"]["usd"] == pytest.approx(3 * CALL_USD)
    assert done["caps"]["usd"] == pytest.approx(0.025)
    assert completions(book, "capped") == 3
    assert book.budget("capped")["spent"]["usd"] == pytest.approx(3 * CALL_USD)


def test_daybook_runs_says_a_run_paused_at_its_cap_waits_for_a_budget_raise(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(Suspended):
        book.run(agents.capped_calls, 3, 0.015, run_id="waits-cap")
    book.run(agents.model_calls, 1, run_id="done-calls")
    listed = cli_in_process("runs", db=book.url)
    assert listed.returncode == 0, listed.stderr
    (line,) = [ln for ln in listed.stdout.splitlines() if ln.startswith("waits-cap")]
    assert "suspended (budget cap)" in line
    assert "(budget cap)" not in next(ln for ln in listed.stdout.splitlines() if ln.startswith("done-calls"))
    docs = {d["run_id"]: d for d in json.loads(cli_in_process("runs", "--json", db=book.url).stdout)}
    # A field added for the run at its cap; `status` stays what it was, and other runs' documents
    # are unchanged.
    assert docs["waits-cap"]["status"] == "suspended"
    assert "daybook budget waits-cap --raise usd=AMOUNT" in docs["waits-cap"]["budget_paused"]
    assert "budget_paused" not in docs["done-calls"]
    filtered = cli_in_process("runs", "--status", "suspended", db=book.url)
    assert "waits-cap" in filtered.stdout and "done-calls" not in filtered.stdout


def test_stopping_a_run_paused_at_its_cap_cancels_it(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(Suspended):
        book.run(agents.capped_calls, 3, 0.015, run_id="stopped")
    stopped = cli_in_process("budget", "stopped", "--stop", db=book.url)
    assert stopped.returncode == 0, stopped.stderr
    assert book.get_run("stopped").status == RunStatus.CANCELLED
    assert completions(book, "stopped") == 2


def test_on_cap_fail_raises_budget_exceeded_and_makes_no_call_past_it(book: Daybook) -> None:
    with pytest.raises(daybook.RunFailed, match="BudgetExceeded"):
        book.run(agents.capped_calls, 3, 0.015, "fail", run_id="failing")
    assert book.get_run("failing").status == RunStatus.FAILED
    assert completions(book, "failing") == 2


def test_an_effect_with_a_declared_cost_is_admitted_and_charged_once(book: Daybook) -> None:
    agents.PAID_LOOKUPS.clear()
    with pytest.raises(daybook.RunFailed, match="BudgetExceeded"):
        book.run(agents.paid_lookups, 3, 0.025, run_id="lookups")
    # The counterparty saw two calls: the third was refused before it was made.
    assert agents.PAID_LOOKUPS == ["lookups/2", "lookups/3"]
    assert book.budget("lookups")["spent"] == {"usd": pytest.approx(0.02)}
    ledger = book.cost("lookups")
    assert [(x.kind, x.name, x.usd) for x in ledger.lines] == [("effect", "paid_lookup", 0.01)] * 2


def test_replay_charges_nothing_again_and_shows_what_it_saved(book: Daybook) -> None:
    book.inline_wait = 0
    with pytest.raises(Suspended):
        book.run(agents.capped_calls, 3, 0.015, run_id="saving")
    book.raise_budget("saving", usd=0.01)
    book.resume("saving")  # replays the two recorded calls, makes the third
    ledger = book.cost("saving")
    assert (ledger.saved_calls, ledger.respent_calls) == (2, 0)
    assert ledger.saved_usd == pytest.approx(2 * CALL_USD) and ledger.saved_tokens == 2 * 1002
    assert ledger.usd == pytest.approx(3 * CALL_USD)  # saved calls were not paid twice
    assert book.budget("saving")["spent"]["usd"] == pytest.approx(3 * CALL_USD)


@pytest.mark.parametrize(
    ("flag", "row", "respent"),
    [
        # Killed once call 2's reservation is durable, before the model is asked.
        ("--kill-after", 3, 1),
        # Killed after the model answered call 2, before its completion was recorded.
        ("--kill-before", 4, 1),
        # Killed once call 2 was recorded: nothing is made again.
        ("--kill-after", 4, 0),
    ],
)
def test_a_sigkill_mid_charged_call_leaves_the_books_right(
    db_url: str, flag: str, row: int, respent: int
) -> None:
    rid = f"kill-{uuid.uuid4().hex[:6]}"
    # Decision rows this process writes: 1 reserve call 1, 2 its completion, 3 reserve call 2, ...
    proc = run_child(db_url, "start", rid, "model_calls", json.dumps([3]), flag, f"decision:{row}")
    assert killed(proc), proc.stdout + proc.stderr
    with Daybook(db_url) as book:
        done = book.resume(rid)
        # No double charge, no lost charge: the budget holds each recorded call once.
        assert done["spent"]["usd"] == pytest.approx(3 * CALL_USD)
        assert book.budget(rid)["spent"]["usd"] == pytest.approx(3 * CALL_USD)
        assert completions(book, rid) == 3
        ledger = book.cost(rid)
        # The resumed execution replayed what was recorded (saved); a call cut off was re-spent.
        assert ledger.saved_calls == (1 if row < 4 or flag == "--kill-before" else 2)
        assert ledger.respent_calls == respent
        assert ledger.respent_usd == pytest.approx(respent * CALL_USD)
        assert ledger.usd == pytest.approx((3 + respent) * CALL_USD)
        [second] = [x for x in ledger.lines if x.step == 2]
        assert second.attempts == 1 + respent


def test_a_killed_and_resumed_runs_cost_shows_the_calls_it_saved(db_url: str) -> None:
    rid = f"saved-{uuid.uuid4().hex[:6]}"
    proc = run_child(db_url, "start", rid, "model_calls", json.dumps([3]), "--kill-after", "decision:6")
    assert killed(proc)
    with Daybook(db_url) as book:
        book.resume(rid)
        ledger = book.cost(rid)
        assert (ledger.saved_calls, ledger.respent_calls, ledger.calls) == (3, 0, 3)
        assert ledger.saved_usd == pytest.approx(3 * CALL_USD)


def test_a_trees_cost_sums_its_runs(book: Daybook) -> None:
    book.run(agents.cost_tree, run_id="family")
    alone = book.cost("family")
    whole = book.cost("family", tree=True)
    assert alone.calls == 1 and len(whole.runs) == 3
    assert whole.calls == 5 and whole.usd == pytest.approx(sum(book.cost(r).usd for r in whole.runs))
    assert whole.usd == pytest.approx(5 * CALL_USD)


def test_daybook_cost_prints_the_ledger_and_its_json(book: Daybook) -> None:
    book.run(agents.cost_tree, run_id="printed")
    text = cli_in_process("cost", "printed", "--tree", db=book.url)
    assert text.returncode == 0, text.stderr
    assert "saved by replay" in text.stdout and "re-spent" in text.stdout and "gpt-4o" in text.stdout
    as_json = cli_in_process("cost", "printed", "--json", db=book.url)
    doc = json.loads(as_json.stdout)
    assert doc["calls"] == 1 and doc["usd"] == pytest.approx(CALL_USD)
    missing = cli_in_process("cost", "no-such-run", db=book.url)
    assert missing.returncode != 0 and "no-such-run" in missing.stderr


def test_a_secret_given_to_a_model_call_is_never_in_clear_in_the_store(db_url: str) -> None:
    planted = f"sk-live-{uuid.uuid4().hex}"

    class Echo:
        model = "gpt-4o-mini"

        def complete(self, prompt: str, **params: object) -> daybook.Completion:
            key = params["api_key"]
            assert isinstance(key, daybook.Secret)
            return daybook.Completion(f"asked with {key.reveal()}", self.model, 3, 3)

    @daybook.workflow
    def secret_call(ctx: daybook.Context) -> str:
        reply = ctx.llm(Echo(), "what is the balance?", api_key=daybook.Secret(planted))
        return "ok" if planted in str(reply.value["text"]) else "no"

    with Daybook(db_url) as book:
        assert book.run(secret_call, run_id="secret-call") == "ok"
        assert book.cost("secret-call").calls == 1
        assert planted not in store_text(db_url)


def test_bad_prices_and_caps_are_refused_with_what_to_do(db_url: str, tmp_path: Path) -> None:
    with pytest.raises(PriceTableError, match=">= 0"):
        Daybook(db_url, prices={"my-model": {"input": -1.0, "output": 1.0}})
    with pytest.raises(PriceTableError, match="input and output"):
        Daybook(db_url, prices={"my-model": {"input": 1.0}})
    broken = tmp_path / "prices.json"
    broken.write_text("{not json")
    with pytest.raises(PriceTableError, match="could not be read as JSON"):
        Daybook(db_url, prices=str(broken))
    assert issubclass(PriceTableError, DaybookError)
    with pytest.raises(ConfigError, match="cost="):

        @daybook.tool(cost={"usd": -0.01})
        def negative(*, idempotency_key: str) -> None:
            return None

    @daybook.workflow
    def odd_cap(ctx: daybook.Context) -> None:
        ctx.budget.cap(usd=1, on_cap="later")

    with Daybook(db_url) as book, pytest.raises(DaybookError, match="on_cap must be 'pause' or 'fail'"):
        book.run(odd_cap, run_id="odd-cap")


def test_the_run_page_shows_the_cost_escaped(book: Daybook) -> None:
    from starlette.testclient import TestClient

    from daybook.web import build

    @daybook.workflow
    def odd_model(ctx: daybook.Context) -> None:
        ctx.llm(daybook.ScriptedLLM(["x"], model="<script>alert(1)</script>"), "q")

    book.run(odd_model, run_id="web-cost")
    book.run(agents.model_calls, 2, run_id="web-priced")
    client = TestClient(build(book))
    page = client.get("/runs/web-cost").text
    assert '<section id="cost">' in page and "unpriced" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    priced = client.get("/runs/web-priced").text
    assert f"${2 * CALL_USD:.6f}" in priced and "saved by replay" in priced


def framework_reply() -> dict[str, object]:
    return {"text": "hi", "model": "gpt-4o", "usage": {"in": 2, "out": 1000}}


def framework_usage(value: dict[str, Any]) -> dict[str, object]:
    return {
        "model": value["model"],
        "input_tokens": value["usage"]["in"],
        "output_tokens": value["usage"]["out"],
    }


def test_a_model_call_another_sdk_makes_is_charged_like_ctx_llm(book: Daybook) -> None:
    asked: list[str] = []

    def call() -> dict[str, object]:
        asked.append("x")
        return framework_reply()

    @daybook.workflow
    def sdk_calls(ctx: daybook.Context) -> dict[str, float]:
        ctx.budget.cap(tokens=1002, on_cap="fail")
        for _ in range(2):
            ctx.model_call("my-sdk:model", call, model="gpt-4o", usage=framework_usage, prompt="hello")
        return dict(ctx.budget.spent)

    with pytest.raises(daybook.RunFailed, match="BudgetExceeded"):
        book.run(sdk_calls, run_id="sdk-calls")
    assert asked == ["x"]  # the second call was refused before it was made
    ledger = book.cost("sdk-calls")
    assert (ledger.calls, ledger.input_tokens, ledger.output_tokens) == (1, 2, 1000)
    assert ledger.usd == pytest.approx(CALL_USD) and [m.model for m in ledger.models] == ["gpt-4o"]
    assert book.budget("sdk-calls")["spent"] == {"usd": pytest.approx(CALL_USD), "tokens": 1002.0}


def test_a_secret_in_a_framework_model_calls_value_is_never_in_clear_in_the_store(db_url: str) -> None:
    planted = f"sk-live-{uuid.uuid4().hex}"

    @daybook.workflow
    def secret_sdk(ctx: daybook.Context) -> str:
        def call() -> dict[str, object]:
            return {**framework_reply(), "token": daybook.Secret(planted)}

        got = ctx.model_call("my-sdk:model", call, model="gpt-4o", usage=framework_usage)
        return "ok" if got.value["token"].reveal() == planted else "no"

    with Daybook(db_url) as book:
        assert book.run(secret_sdk, run_id="secret-sdk") == "ok"
        assert book.cost("secret-sdk").calls == 1
        assert planted not in store_text(db_url)


def test_a_usage_function_that_returns_no_dict_is_refused_with_what_to_return(book: Daybook) -> None:
    @daybook.workflow
    def bad_usage(ctx: daybook.Context) -> None:
        ctx.model_call("my-sdk:model", framework_reply, model="gpt-4o", usage=lambda v: 42)  # type: ignore[arg-type,return-value]

    with pytest.raises(DaybookError, match="input_tokens"):
        book.run(bad_usage, run_id="bad-usage")
