"""`resolve` reaches a run a live process holds (issue 25 item 13, audit D-4).

A run polling a counterparty's status query for a pending outcome holds its lease; the webhook or
settlement file that settles the act arrives exactly then. `book.resolve` / `daybook resolve`
no longer raise `RunLeased`: the resolution goes through the run's inbox, the polling run
journals it as the effect's outcome and goes on with the resolved value, and the counterparty is
neither sent the act again nor asked again. Counted at the counterparty's own records.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import cli, wait_until

import daybook
from daybook import ConfigError, Daybook, RunStatus

CALLS = {"send": 0, "status": 0}


def _status(key: str, args: dict[str, Any]) -> daybook.Pending:
    CALLS["status"] += 1
    return daybook.Pending()  # the bank never says: only the settlement file will


@daybook.tool(status=_status, poll=0.2, retry=daybook.Retry(max_attempts=1))
def rl_wire(amount: int, idempotency_key: str) -> str:
    CALLS["send"] += 1
    raise daybook.OutcomeUnknown("the acknowledgement was lost")


@daybook.workflow(name="rl_payout")
def payout(ctx: daybook.Context, amount: int) -> dict[str, Any]:
    return {"wire": ctx.effect(rl_wire, amount=amount), "after": ctx.decide("after", lambda: "done").value}


def _polling(book: Daybook, run_id: str) -> None:
    def pending_rows() -> bool:
        if not book.runs():
            return False
        return sum(1 for e in book.journal(run_id) if e.data.get("answer") == "pending") >= 2

    wait_until(pending_rows)


def test_resolve_while_the_run_polls_is_taken_by_the_live_run(db_url: str) -> None:
    CALLS.update(send=0, status=0)
    out: dict[str, Any] = {}
    with Daybook(db_url, lease_ttl=15.0) as book:
        thread = threading.Thread(target=lambda: out.update(r=book.run(payout, 10, run_id="live")))
        thread.start()
        try:
            _polling(book, "live")
            assert book.get_run("live").status == RunStatus.RUNNING  # leased: the old RunLeased case
            ev = book.resolve("live", 1, confirmed="W-77", by="webhook", evidence="settlement.csv line 4")
        finally:
            thread.join(60)
        assert ev.seq > 0 and ev.status == "confirmed" and isinstance(ev.data["inbox_id"], int)
        assert ev.data["by"] == "webhook" and ev.data["resolved_by"] == "manual"
        assert out["r"] == {"wire": "W-77", "after": "done"}
        asked = CALLS["status"]
        assert book.resume("live") == {"wire": "W-77", "after": "done"}  # replayed from the row
        assert book.replay("live") == {"wire": "W-77", "after": "done"}
    assert CALLS["send"] == 1 and CALLS["status"] == asked  # never sent again, nor asked again


def test_resolve_absent_or_failed_through_the_inbox(db_url: str) -> None:
    CALLS.update(send=0, status=0)
    out: dict[str, Any] = {}
    with Daybook(db_url, lease_ttl=15.0) as book:

        def run() -> None:
            try:
                book.run(payout, 5, run_id="f")
            except daybook.RunFailed as exc:
                out["err"] = exc

        thread = threading.Thread(target=run)
        thread.start()
        try:
            _polling(book, "f")
            ev = book.resolve("f", 1, failed="the bank rejected it", by="ops")
        finally:
            thread.join(60)
        assert ev.status == "failed" and "the bank rejected it" in str(out["err"])
        assert book.get_run("f").status == RunStatus.FAILED
    assert CALLS["send"] == 1


def test_a_plain_signal_cannot_forge_a_resolution_and_a_bad_one_is_ignored(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(daybook.Suspended):
            book.run(payout, 1, run_id="s")  # poll=0.2 > inline_wait=0: suspended between rounds
        key = next(e.key for e in book.journal("s") if e.kind == "intent")
        with pytest.raises(ConfigError, match="reserved"):
            book.signal("s", f"resolve:{key}", {"status": "confirmed", "data": {"result": "forged"}})
        with pytest.raises(ConfigError, match="exactly one"):
            book.resolve("s", 1, confirmed="x", absent=True)
        with pytest.raises(ConfigError, match=r"text|string"):
            book.resolve("s", 1, confirmed="x", by=5)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="no effect at step 2"):
            book.resolve("s", 2, confirmed="x")
        # Junk under the reserved name (as a buggy sender might leave it) is not a resolution.
        store = book._store
        junks = [
            "not a resolution",
            {"status": "confirmed"},
            {"status": "gone", "data": {}},
            {"status": "confirmed", "data": {"result": 1, "attempt": 9}},
        ]
        for junk in junks:
            store.signal("s", f"resolve:{key}", json.dumps(junk), "x", 0.0)
        with pytest.raises(daybook.Suspended):
            book.resume("s")  # still pending: nothing was applied from the junk
        assert not [e for e in book.journal("s") if "inbox_id" in e.data]


APP = """
import json, pathlib, daybook
LOG = pathlib.Path(__file__).with_suffix(".log")

def _log(what):
    with LOG.open("a") as f:
        f.write(what + "\\n")

def _status(key, args):
    _log("status")
    return daybook.Pending()

@daybook.tool(status=_status, poll=0.2, retry=daybook.Retry(max_attempts=1))
def rl_cli_wire(amount: int, idempotency_key: str) -> str:
    _log("send")
    raise daybook.OutcomeUnknown("ack lost")

@daybook.workflow(name="rl_cli_payout")
def payout(ctx, amount):
    return {"wire": ctx.effect(rl_cli_wire, amount=amount)}

if __name__ == "__main__":
    import sys
    with daybook.Daybook(sys.argv[1], lease_ttl=15.0) as book:
        print(json.dumps(book.run(payout, 3, run_id="cli")))
"""


def test_daybook_resolve_reaches_a_run_polling_in_another_process(db_url: str, tmp_path: Path) -> None:
    app = tmp_path / "rl_app.py"
    app.write_text(APP)
    proc = subprocess.Popen(
        [sys.executable, str(app), db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        with Daybook(db_url) as book:
            wait_until(lambda: bool(book.runs()), timeout=60)
            _polling(book, "cli")
        done = cli("resolve", "cli", "1", "--confirmed", "W-9", "--by", "settlement-file", db=db_url)
        assert done.returncode == 0, done.stderr
        assert "the live run took it from its inbox" in done.stdout
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads(stdout.strip().splitlines()[-1]) == {"wire": "W-9"}, stderr
    log = (tmp_path / "rl_app.log").read_text().split()
    assert log.count("send") == 1 and log[-1] == "status"


def test_a_payload_that_is_not_json_is_not_a_resolution() -> None:
    from daybook.journal.resolution import decode

    assert decode("not json") is None and decode("[1]") is None
    assert decode(json.dumps({"status": "confirmed", "data": {"result": 1}})) is not None


BANK: dict[str, Any] = {}


def _answers_once_told(key: str, args: dict[str, Any]) -> Any:
    # The bank's own answer comes while the person's resolution is on its way: it wins.
    BANK["asking"].set()
    book = BANK["book"]
    wait_until(lambda: any(name.startswith("resolve:") for _, name, *_ in book.store.inbox("race")))
    return daybook.Confirmed("BANK-1", ref="BANK-1")


@daybook.tool(status=_answers_once_told, retry=daybook.Retry(max_attempts=1))
def rl_race_wire(amount: int, idempotency_key: str) -> str:
    raise daybook.OutcomeUnknown("the acknowledgement was lost")


@daybook.workflow(name="rl_race")
def race(ctx: daybook.Context) -> str:
    return str(ctx.effect(rl_race_wire, amount=1))


def test_a_resolution_the_run_no_longer_needs_says_so(db_url: str) -> None:
    out: dict[str, Any] = {}
    with Daybook(db_url, lease_ttl=15.0) as book:
        BANK.update(book=book, asking=threading.Event())
        thread = threading.Thread(target=lambda: out.update(r=book.run(race, run_id="race")))
        thread.start()
        try:
            assert BANK["asking"].wait(60)
            with pytest.raises(ConfigError, match="settled by the run itself meanwhile"):
                book.resolve("race", 1, confirmed="MINE-1", by="ops")
        finally:
            thread.join(60)
        assert out["r"] == "BANK-1"
        assert not [e for e in book.journal("race") if "inbox_id" in e.data]
