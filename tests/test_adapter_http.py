"""The HTTP adapter against the real bank on 127.0.0.1: Idempotency-Key on every request, the
reply-lost and never-received cases, a counterparty down for a while, declarative config, and
compensation by the configured inverse call."""

from __future__ import annotations

import json
from pathlib import Path

import agents
import pytest
from conftest import killed, run_child

import daybook
from daybook import Daybook
from daybook.adapters.http import JsonApi
from daybook.demo.bank import Bank
from daybook.errors import ConfigError


def test_each_request_carries_the_runs_key_as_idempotency_key_and_the_reference_is_kept(
    db_url: str, bank: Bank
) -> None:
    with Daybook(db_url) as book:
        result = book.run(agents.http_payout, bank.url, 250, {}, run_id="pay-1")
        wire = book.effects("pay-1", tool="bankapi.wire")[0]
    assert bank.records["wires"]["pay-1/2"]["amount"] == 250
    assert wire["ref"] == result["wire"] and wire["status"] == "confirmed"
    assert wire["compensation"] == {"tool": "bankapi.wire.undo", "key": "comp/pay-1/2"}


def test_a_counterparty_down_for_a_while_is_retried_under_the_same_key(db_url: str, bank: Bank) -> None:
    bank.faults.refuse = 2  # 503 twice: certainly not executed
    bank.faults.collections = {"wires"}
    with Daybook(db_url) as book:
        book.run(agents.http_payout, bank.url, 10, {}, run_id="down")
        history = [h["status"] for h in book.effects("down", tool="bankapi.wire")[0]["history"]]  # type: ignore[union-attr]
    assert bank.stats()["requests_by_key"]["down/2"] == 3
    assert bank.stats()["executions_by_key"]["down/2"] == 1
    assert history == ["intent", "failed", "attempt", "failed", "attempt", "confirmed"]


def test_a_counterparty_that_refuses_with_a_4xx_is_a_failed_effect_not_an_unknown(
    db_url: str, bank: Bank
) -> None:
    api = JsonApi.from_config({"name": "strict", "base_url": bank.url, "endpoints": {"bad": {"path": "/"}}})

    @daybook.workflow
    def refused(ctx: daybook.Context) -> object:
        return api.call(ctx, "bad", x=1)  # the bank answers 400: POST needs a collection

    with Daybook(db_url) as book, pytest.raises(daybook.RunFailed, match=r"Rejected: .*HTTP 400"):
        book.run(refused, run_id="refused")


@pytest.mark.parametrize("point", ["intent:1", "outcome:1"])
def test_a_kill_at_each_point_of_a_request_sends_each_request_once(
    db_url: str, bank: Bank, point: str
) -> None:
    # intent:1 = after the intent, before the request left; outcome:1 (before) = the bank executed
    # the wire and replied, and the agent died before journaling the reply.
    flag = "--kill-after" if point == "intent:1" else "--kill-before"
    proc = run_child(db_url, "start", "crash", "http_payout", json.dumps([bank.url, 75, {}]), flag, point)
    assert killed(proc)
    proc = run_child(db_url, "resume", "crash")
    assert proc.returncode == 0, proc.stderr
    assert bank.stats()["executions_by_key"] == {"crash/2": 1, "crash/3": 1}
    with Daybook(db_url) as book:
        assert all(e["status"] == "confirmed" and e["ref"] for e in book.effects("crash"))


def test_compensation_calls_the_declared_inverse_once_under_the_comp_key(db_url: str, bank: Bank) -> None:
    api = agents.bank_api(bank.url)

    @daybook.workflow
    def undone(ctx: daybook.Context) -> object:
        api.call(ctx, "wire", to="ACME", amount=5)
        return ctx.compensate().compensated

    with Daybook(db_url) as book:
        assert book.run(undone, run_id="undo") == ["undo/1"]
    reversal = bank.records["reversals"]["comp/undo/1"]
    assert reversal["result"]["id"] == "wire-000001" and reversal["original"] == {"to": "ACME", "amount": 5}


def test_the_api_can_be_declared_in_a_json_file(tmp_path: Path, bank: Bank) -> None:
    config = tmp_path / "bank.json"
    config.write_text(json.dumps(agents.BANK_API))
    api = JsonApi.from_config(config, base_url=bank.url)
    profile = api.tool("wire").profile()
    assert profile["effect_class"] == "compensable" and profile["status_query"] is True
    assert profile["lookup_by_reference"] is True and profile["gated_by_default"] is False


@pytest.mark.parametrize(
    ("config", "complaint"),
    [
        ({"name": "x", "endpoints": {"a": {"path": "/a"}}}, "base_url"),
        ({"name": "x", "base_url": "ftp://h", "endpoints": {"a": {"path": "/a"}}}, "http://"),
        ({"name": "x", "base_url": "http://h", "endpoints": {"a": {"path": "a"}}}, "path starting"),
        ({"name": "x", "base_url": "http://h", "endpoints": {"a": {"path": "/a", "verb": "GET"}}}, "verb"),
        (
            {"name": "x", "base_url": "http://h", "endpoints": {"a": {"method": "FETCH", "path": "/a"}}},
            "method",
        ),
    ],
)
def test_a_bad_api_config_is_refused_with_what_to_fix(config: dict[str, object], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        JsonApi.from_config(config)


def test_an_unknown_endpoint_names_the_ones_there_are(bank: Bank) -> None:
    with pytest.raises(ConfigError, match="wire"):
        agents.bank_api(bank.url).tool("wires")
