"""The approval outbox: each gate's approval request reaches a webhook on 127.0.0.1, signed,
once, across a sink that is down, a deliverer killed mid-delivery and two deliverers at once;
asserted at the receiver (what it was sent), on both stores."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import HERE, cli_in_process, killed, release_together, wait_until
from outbox_child import CARD
from outbox_child import gated_refund as refund
from store_bytes import store_text

import daybook
from daybook import Daybook, LogSink, Secret, SinkConfigError, Suspended, Webhook, verify_webhook
from daybook.gates import outbox
from daybook.gates.delivery import Deliverer

HOOK_SECRET = "hook-secret-4f1c9a7e2b3d5c6a"  # the HMAC key sender and receiver share


class Receiver:
    """A webhook receiver on 127.0.0.1: records every POST (headers, body, the status it
    answered), answers `fail` first requests with 500, and dedups by Idempotency-Key."""

    def __init__(self, port: int = 0, fail: int = 0) -> None:
        self.got: list[dict[str, Any]] = []
        self.fail = fail
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    status = 500 if outer.fail > 0 else 200
                    outer.fail -= 1
                    outer.got.append({"headers": dict(self.headers), "body": body, "status": status})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def accepted(self) -> list[dict[str, Any]]:
        with self.lock:
            return [g for g in self.got if g["status"] == 200]

    def once(self) -> dict[str, int]:
        """Idempotency-Key -> how many times it was accepted: what a receiver that dedups sees."""
        counts: dict[str, int] = {}
        for g in self.accepted():
            key = g["headers"]["Idempotency-Key"]
            counts[key] = counts.get(key, 0) + 1
        return counts

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def hook(url: str) -> Webhook:
    return Webhook(url, secret=Secret(HOOK_SECRET), timeout=2.0)


def open_gates(db_url: str, *run_ids: str) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        for run_id in run_ids:
            with pytest.raises(Suspended):
                book.run(refund, 50, run_id=run_id)


def deliver_until_done(db_url: str, sinks: list[Any], **options: Any) -> Deliverer:
    with Daybook(db_url) as book:
        d = Deliverer(book.store, sinks, backoff=0.01, **options)

        def done() -> bool:
            d.run_once()
            return all(r["state"] in ("delivered", "undelivered") for r in outbox.outbox(book.store))

        wait_until(done, interval=0.05)
        return d


def test_a_gate_opening_sends_one_signed_request_the_receiver_verifies(
    db_url: str, receiver: Receiver
) -> None:
    with Daybook(db_url, inline_wait=0, notify=[hook(receiver.url)]) as book:
        with pytest.raises(Suspended):
            book.run(refund, 50, run_id="r1")
        # Received, and recorded as delivered by the handle's thread.
        wait_until(lambda: [g["notice"] for g in book.approvals()] == ["delivered"])
        # Further passes (another deliverer, the same thread) send nothing more.
        Deliverer(book.store, [hook(receiver.url)]).run_once()
    assert len(receiver.got) == 1
    got = receiver.got[0]
    assert verify_webhook(got["body"], got["headers"]["Daybook-Signature"], Secret(HOOK_SECRET))
    assert not verify_webhook(got["body"] + b" ", got["headers"]["Daybook-Signature"], HOOK_SECRET)
    assert not verify_webhook(got["body"], got["headers"]["Daybook-Signature"], "another-secret-0123456")
    request = json.loads(got["body"])
    assert got["headers"]["Idempotency-Key"] == request["key"] == "r1/1/1"
    assert (request["run_id"], request["gate_id"], request["action"]) == ("r1", "r1/1", "refund")
    assert request["about"]["amount"] == 50 and request["deadline"] == request["opened"] + 3600


def test_a_replayed_old_request_fails_verification() -> None:
    from daybook.gates.sink import sign

    body = b'{"key": "r/1/1"}'
    old = sign(body, HOOK_SECRET.encode(), int(time.time()) - 3600)
    assert not verify_webhook(body, old, HOOK_SECRET)
    assert verify_webhook(body, old, HOOK_SECRET, tolerance=7200)
    assert not verify_webhook(body, "v1=deadbeef", HOOK_SECRET)


def test_a_sink_down_then_failing_then_up_gets_the_request_once(db_url: str) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there: connection refused
    open_gates(db_url, "r1")
    url = f"http://127.0.0.1:{port}/hook"
    with Daybook(db_url) as book:
        d = Deliverer(book.store, [hook(url)], backoff=0.01)
        assert d.run_once().failed == 1
        [row] = outbox.outbox(book.store)
        assert row["state"] == "retrying" and "refused" in str(row["last_error"]).lower()
    r = Receiver(port=port, fail=2)  # up, but failing twice with 500
    try:
        deliver_until_done(db_url, [hook(url)])
        assert r.once() == {"r1/1/1": 1}
        assert [g["status"] for g in r.got] == [500, 500, 200]
        assert len({g["headers"]["Idempotency-Key"] for g in r.got}) == 1
    finally:
        r.close()
    with Daybook(db_url) as book:
        [row] = outbox.outbox(book.store)
        assert row["state"] == "delivered" and row["tries"] == {hook(url).name: 4}


def test_a_request_given_up_shows_undelivered(db_url: str) -> None:
    r = Receiver(fail=100)
    try:
        open_gates(db_url, "r1")
        deliver_until_done(db_url, [hook(r.url)], attempts=3)
        assert len(r.got) == 3 and r.accepted() == []
    finally:
        r.close()
    with Daybook(db_url) as book:
        assert [g["notice"] for g in book.approvals()] == ["undelivered"]
        from daybook.web.approvals import approvals_page

        assert "undelivered" in str(approvals_page(book, None))
    shown = cli_in_process("outbox", "list", "--state", "undelivered", db=db_url)
    assert shown.returncode == 0 and "r1/1/1" in shown.stdout and "HTTP 500" in shown.stdout
    assert "undelivered" in cli_in_process("approvals", db=db_url).stdout


def _child(db_url: str, url: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "outbox_child.py"), db_url, url, *extra],
        stdin=subprocess.PIPE if "--ready-go" in extra else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOOK_SECRET": HOOK_SECRET},
    )


def _finished(proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 or killed(proc), err
    return proc


def test_a_deliverer_killed_after_the_send_is_redelivered_with_the_same_key(
    db_url: str, receiver: Receiver
) -> None:
    open_gates(db_url, "r1")
    # The receiver has the request; the process dies before it records the delivery.
    assert killed(_finished(_child(db_url, receiver.url, "--kill-before-record", "1")))
    assert len(receiver.got) == 1
    assert _finished(_child(db_url, receiver.url)).returncode == 0
    # Sent twice, the same key both times: a receiver that dedups by it acts once.
    assert len(receiver.got) == 2 and receiver.once() == {"r1/1/1": 2}
    for g in receiver.got:
        assert verify_webhook(g["body"], g["headers"]["Daybook-Signature"], HOOK_SECRET)
    assert len({g["headers"]["Idempotency-Key"] for g in receiver.got}) == 1


def test_a_deliverer_killed_before_the_send_delivers_after_the_restart(
    db_url: str, receiver: Receiver
) -> None:
    open_gates(db_url, "r1")
    assert killed(_finished(_child(db_url, receiver.url, "--kill-before-send", "1")))
    assert receiver.got == []
    with Daybook(db_url) as book:
        [row] = outbox.outbox(book.store)
        assert row["state"] == "retrying"  # a try began and was cut short: recorded
    assert _finished(_child(db_url, receiver.url)).returncode == 0
    assert receiver.once() == {"r1/1/1": 1} and len(receiver.got) == 1


def test_two_deliverers_in_two_processes_send_each_request_once(db_url: str, receiver: Receiver) -> None:
    runs = [f"r{i}" for i in range(6)]
    open_gates(db_url, *runs)
    procs = [_child(db_url, receiver.url, "--ready-go") for _ in range(2)]
    release_together(procs)
    for proc in procs:
        assert _finished(proc).returncode == 0
    assert receiver.once() == {f"{r}/1/1": 1 for r in runs}
    assert len(receiver.got) == len(runs)


def test_a_secret_in_the_gated_act_is_never_in_clear_in_the_store_or_the_webhook(
    db_url: str, receiver: Receiver
) -> None:
    open_gates(db_url, "r1")
    deliver_until_done(db_url, [hook(receiver.url), LogSink()])
    [got] = receiver.accepted()
    assert CARD.encode() not in got["body"]
    assert "$secret" in json.loads(got["body"])["about"]["card"]
    text = store_text(db_url)
    assert CARD not in text and HOOK_SECRET not in text
    assert "daybook.outbox/r1/1/1" in text  # the request is in the store (the test looks in the right place)


def test_a_restarted_run_does_not_enqueue_its_gate_twice(db_url: str) -> None:
    open_gates(db_url, "r1")
    with Daybook(db_url, inline_wait=0) as book:
        with pytest.raises(Suspended):
            book.resume("r1")
        assert [r["key"] for r in outbox.outbox(book.store)] == ["r1/1/1"]
        # Entities listed are the user's: the outbox's are under their own command.
        assert book.leases() == []


def test_bad_sink_configuration_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(SinkConfigError, match="http:// or https://"):
        Webhook("ftp://hooks.example.com/x", secret=Secret(HOOK_SECRET))
    with pytest.raises(SinkConfigError, match="http:// or https://"):
        Webhook("hooks.example.com/x", secret=Secret(HOOK_SECRET))
    with pytest.raises(SinkConfigError, match=r"daybook\.Secret"):
        Webhook("https://hooks.example.com/x", secret=HOOK_SECRET)  # type: ignore[arg-type]
    with pytest.raises(SinkConfigError, match="token_hex"):
        Webhook("https://hooks.example.com/x", secret=Secret("short"))
    with pytest.raises(SinkConfigError, match="list of sinks"):
        Daybook(f"sqlite:///{tmp_path / 'a.db'}", notify="https://hooks.example.com/x")
    assert issubclass(SinkConfigError, daybook.DaybookError)
    env = {k: v for k, v in os.environ.items() if k != "DAYBOOK_NOTIFY_SECRET"}
    db = f"sqlite:///{tmp_path / 'b.db'}"
    no_secret = cli_in_process("outbox", "deliver", "--notify-url", "https://h.example.com/x", db=db, env=env)
    assert no_secret.returncode != 0 and "DAYBOOK_NOTIFY_SECRET" in no_secret.stderr
    assert "Traceback" not in no_secret.stderr
    bad_url = cli_in_process(
        "outbox",
        "deliver",
        "--notify-url",
        "file:///etc/passwd",
        db=db,
        env={**env, "DAYBOOK_NOTIFY_SECRET": HOOK_SECRET},
    )
    assert bad_url.returncode != 0 and "http:// or https://" in bad_url.stderr
    assert "Traceback" not in bad_url.stderr


def test_a_worker_with_a_notify_url_delivers_the_outbox(db_url: str, receiver: Receiver) -> None:
    open_gates(db_url, "r1")
    worker = subprocess.Popen(
        [sys.executable, "-m", "daybook", "worker", "--db", db_url, "--app", str(HERE / "agents.py"),
         "--poll", "0.05", "--notify-url", receiver.url, "--notify-secret-env", "HOOK_SECRET", "--quiet"],
        env={**os.environ, "HOOK_SECRET": HOOK_SECRET},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_until(receiver.accepted)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=60)
    assert receiver.once() == {"r1/1/1": 1}


def test_a_request_past_its_gates_deadline_is_given_up_not_sent(db_url: str, receiver: Receiver) -> None:
    open_gates(db_url, "r1")
    with Daybook(db_url) as book:
        late = Deliverer(book.store, [hook(receiver.url)], clock=lambda: time.time() + 7200)
        assert late.run_once().gave_up == 1
        [row] = outbox.outbox(book.store)
        assert row["state"] == "undelivered" and "deadline" in str(row["gave_up"])
    assert receiver.got == []


def test_a_run_killed_between_its_request_and_its_gate_sends_one_request(
    db_url: str, receiver: Receiver
) -> None:
    child = subprocess.run(
        [sys.executable, str(HERE / "outbox_child.py"), "open", db_url, "r1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed(child), child.stderr
    with Daybook(db_url, inline_wait=0) as book:
        assert [r["key"] for r in outbox.outbox(book.store)] == ["r1/1/1"]
        assert not any(e.name.startswith("gate:") for e in book.journal("r1"))  # died before the gate's row
        with pytest.raises(Suspended):
            book.resume("r1", wait=30)
        [gate] = book.approvals()
        [held] = outbox.entries(book.store)
        assert gate["gate_id"] == "r1/1" and held.key == "r1/1/1"
        # The gate's time started when the request the approvers got says it did.
        [row] = [e for e in book.journal("r1") if e.name.startswith("gate:")]
        assert held.request is not None and row.data["value"]["opened"] == held.request["opened"]
    deliver_until_done(db_url, [hook(receiver.url)])
    assert receiver.once() == {"r1/1/1": 1} and len(receiver.got) == 1


def test_the_log_sink_writes_one_line_per_request(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    open_gates(db_url, "r1", "r2")
    with caplog.at_level("INFO", logger="daybook.outbox"):
        deliver_until_done(db_url, [LogSink()])
        deliver_until_done(db_url, [LogSink()])  # a second deliverer: nothing new to say
    lines = [r.getMessage() for r in caplog.records if r.name == "daybook.outbox"]
    assert sorted(line.split()[2].rstrip(":") for line in lines) == ["r1/1/1", "r2/1/1"], lines
    assert all(CARD not in line for line in lines)


def test_outbox_deliver_sends_one_pass_from_the_command_line(db_url: str, receiver: Receiver) -> None:
    open_gates(db_url, "r1")
    env = {**os.environ, "DAYBOOK_NOTIFY_SECRET": HOOK_SECRET}
    done = cli_in_process("outbox", "deliver", "--notify-url", receiver.url, db=db_url, env=env)
    assert done.returncode == 0 and "2 delivered" in done.stdout, done.stderr  # the webhook and the log
    again = cli_in_process("outbox", "deliver", "--notify-url", receiver.url, db=db_url, env=env)
    assert again.returncode == 0 and "0 delivered" in again.stdout
    assert receiver.once() == {"r1/1/1": 1} and len(receiver.got) == 1
    got = receiver.got[0]
    assert verify_webhook(got["body"], got["headers"]["Daybook-Signature"], HOOK_SECRET)
