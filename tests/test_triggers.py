"""Reactive triggers (O13): a change log (an append-only file a CRM writes) read through a stored
offset, one handler run per event id, the offset advanced only after the handler's effect is
journaled. A follower SIGKILLed at each point between the effect and the offset redelivers the
event with no second payment at the bank; a plain consumer killed at the same point pays twice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import trigger_app
from conftest import HERE, killed, last_json, wait_until
from store_bytes import store_text

import daybook
from daybook import Daybook, FernetCodec, RunStatus
from daybook.demo.bank import Bank
from daybook.worker import Worker


def _world(tmp_path: Path, bank: Bank, events: int) -> Path:
    log = tmp_path / "changes.jsonl"
    log.write_text(
        "".join(json.dumps({"id": f"evt-{n}", "n": n, "bank": bank.url}) + "\n" for n in range(1, events + 1))
    )
    return log


def _follow(db_url: str, log: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(HERE / "trigger_app.py"), db_url, "follow", "crm", str(log), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _paid_once_each(bank: Bank, events: int) -> None:
    paid = sorted(rec["n"] for rec in bank.records.get("payments", {}).values())
    assert paid == list(range(1, events + 1))  # one payment per event, none twice
    assert all(n == 1 for n in bank.executions.values())


def test_each_change_is_handled_once_and_the_offset_moves_past_it(
    db_url: str, tmp_path: Path, bank: Bank
) -> None:
    log = _world(tmp_path, bank, 3)
    with Daybook(db_url) as book:
        done = book.follow_changes("crm", trigger_app.change_log(str(log)), trigger_app.on_change)
        assert [d["id"] for d in done["delivered"]] == ["evt-1", "evt-2", "evt-3"]  # type: ignore[index,union-attr]
        assert done["offset"] == 3 and book.trigger_offset("crm") == 3
        assert book.get_run("trigger:crm:evt-2").status == RunStatus.COMPLETED
        # Nothing new: nothing delivered. The world appends one: only that one.
        assert (
            book.follow_changes("crm", trigger_app.change_log(str(log)), trigger_app.on_change)["delivered"]
            == []
        )
        with log.open("a") as f:
            f.write(json.dumps({"id": "evt-4", "n": 4, "bank": bank.url}) + "\n")
        again = book.follow_changes("crm", trigger_app.change_log(str(log)), trigger_app.on_change)
        assert [d["id"] for d in again["delivered"]] == ["evt-4"]  # type: ignore[index,union-attr]
    _paid_once_each(bank, 4)


@pytest.mark.parametrize(
    "kill",
    [
        "--kill-after=intent:2",  # the second event's payment asked, not answered
        "--kill-after=outcome:1",  # the first event's payment journaled, its run not finished
        "--kill-after-finish=1",  # the first event's run finished, the offset not advanced
        "--kill-after-advance=1",  # the offset advanced past the first event
    ],
)
def test_a_follower_killed_between_the_effect_and_the_offset_redelivers_with_no_second_effect(
    db_url: str, tmp_path: Path, bank: Bank, kill: str
) -> None:
    log = _world(tmp_path, bank, 3)
    flag, at = kill.split("=")
    dead = _follow(db_url, log, flag, at)
    assert killed(dead), dead.stdout + dead.stderr
    with Daybook(db_url) as book:
        before = book.trigger_offset("crm")
    assert before == (1 if flag == "--kill-after-advance" or kill.endswith("intent:2") else 0)
    again = _follow(db_url, log)  # a new process: the dead follower's claim is taken over
    assert again.returncode == 0, again.stdout + again.stderr
    delivered = last_json(again.stdout)["result"]["delivered"]  # type: ignore[index]
    assert [d["id"] for d in delivered] == [f"evt-{n}" for n in range(before + 1, 4)]
    _paid_once_each(bank, 3)
    with Daybook(db_url) as book:
        assert book.trigger_offset("crm") == 3


# The control: a consumer without daybook, keeping its offset in a file and paying under a key it
# makes up per attempt (nothing durable names the act), killed after paying, before saving.
_PLAIN = """
import json, os, sys, uuid
from pathlib import Path
from daybook.demo.agent import http_json
log, offset_file, die = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "die"
at = int(offset_file.read_text()) if offset_file.exists() else 0
for i, line in enumerate(Path(log).read_text().splitlines()[at:], at + 1):
    event = json.loads(line)
    http_json("POST", event["bank"] + "/payments", {"n": event["n"]}, uuid.uuid4().hex)
    if die:
        os.kill(os.getpid(), 9)
    offset_file.write_text(str(i))
"""


def test_without_daybook_a_consumer_killed_before_saving_its_offset_pays_the_event_twice(
    tmp_path: Path, bank: Bank
) -> None:
    log, offset = _world(tmp_path, bank, 2), tmp_path / "offset"
    dead = subprocess.run(
        [sys.executable, "-c", _PLAIN, str(log), str(offset), "die"], capture_output=True, timeout=120
    )
    assert killed(dead)
    subprocess.run([sys.executable, "-c", _PLAIN, str(log), str(offset), "go"], check=True, timeout=120)
    paid = sorted(rec["n"] for rec in bank.records["payments"].values())
    assert paid == [1, 1, 2]  # the first event paid twice


def test_a_second_follower_while_one_holds_the_trigger_delivers_nothing(
    db_url: str, tmp_path: Path, bank: Bank
) -> None:
    log = _world(tmp_path, bank, 1)
    with Daybook(db_url) as book, Daybook(db_url) as other:
        assert other.store.entity_claim("trigger:crm", "someone-else-on-another-host", 60.0, time.time())
        held = book.follow_changes("crm", trigger_app.change_log(str(log)), trigger_app.on_change)
        assert held["delivered"] == [] and held["held_by"] == "someone-else-on-another-host"
    assert bank.records.get("payments", {}) == {}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ([(1, "a"), (1, "b")], "increasing offsets"),
        ([(0, "a")], "increasing offsets"),
        ([(1, "")], "non-empty string"),
        (["evt-1"], "each change is"),
        ([(1, "a", {1, 2})], "JSON"),
    ],
)
def test_a_change_log_that_returns_bad_changes_is_refused_with_what_it_must_return(
    book: Daybook, changes: list[object], says: str
) -> None:
    with pytest.raises(daybook.DaybookError, match=says):
        book.follow_changes("bad", lambda after, limit: changes, trigger_app.on_change)
    assert book.trigger_offset("bad") == 0


def test_bad_trigger_arguments_are_refused(book: Daybook) -> None:
    with pytest.raises(daybook.DaybookError, match="limit"):
        book.follow_changes("t", lambda a, b: [], trigger_app.on_change, limit=0)
    with pytest.raises(daybook.DaybookError, match="read"):
        book.follow_changes("t", "not a function", trigger_app.on_change)  # type: ignore[arg-type]
    with pytest.raises(daybook.DaybookError, match="name"):
        book.follow_changes("", lambda a, b: [], trigger_app.on_change)


def test_a_secret_in_a_change_is_never_in_clear_in_the_store_under_a_codec(
    db_url: str, tmp_path: Path, bank: Bank
) -> None:
    planted = f"PLANTED-{uuid.uuid4().hex}"
    log = tmp_path / "changes.jsonl"
    log.write_text(json.dumps({"id": "evt-1", "n": 1, "bank": bank.url, "card": planted}) + "\n")
    with Daybook(db_url, codec=FernetCodec(FernetCodec.new_key())) as book:
        done = book.follow_changes("crm", trigger_app.change_log(str(log)), trigger_app.on_change)
        assert done["offset"] == 1
        assert book.get_run("trigger:crm:evt-1").input["args"][0]["data"]["card"] == planted  # type: ignore[index]
    assert planted not in store_text(db_url)


def test_a_worker_follows_its_triggers_on_its_schedule(db_url: str, tmp_path: Path, bank: Bank) -> None:
    log = _world(tmp_path, bank, 2)
    trigger = ("crm", trigger_app.change_log(str(log)), trigger_app.on_change)
    worker = Worker(db_url, triggers=[trigger], queues=["nothing-here"], schedules=False, poll=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(bank.records.get("payments", {})) == 2, timeout=60)
        with log.open("a") as f:  # the world changes while the worker runs
            f.write(json.dumps({"id": "evt-3", "n": 3, "bank": bank.url}) + "\n")
        wait_until(lambda: len(bank.records.get("payments", {})) == 3, timeout=60)
    finally:
        worker.stop.set()
        thread.join(30)
    _paid_once_each(bank, 3)
    with Daybook(db_url) as book:
        assert book.trigger_offset("crm") == 3


def test_a_worker_trigger_that_is_not_name_read_workflow_is_refused(db_url: str) -> None:
    with pytest.raises(daybook.DaybookError, match="name, read, workflow"):
        Worker(db_url, triggers=[("crm", "changes.jsonl")])  # type: ignore[list-item]
