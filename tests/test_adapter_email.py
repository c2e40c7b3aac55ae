"""The email outbox against a real SMTP server (aiosmtpd on 127.0.0.1, writing a maildir), on
both store backends: messages leave only when released, each once, and an outcome SMTP left
unknown is settled by the verifier or by a person, never by sending again on a guess."""

from __future__ import annotations

import asyncio
import errno
import json
import mailbox
import os
import re
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from email_child import SENDER, email_mailer, received_ids, spool_verifier

import daybook
from daybook import Context, Daybook, Kind, NeedsAttention, RunFailed
from daybook.adapters.email import Outbox, key_of, message_id_for, send

CHILD = Path(__file__).parent / "email_child.py"
ANN, BOB, CY = "ann@example.test", "bob@example.test", "cy@example.test"


class MailServer:
    """The test SMTP server's handler: a message is written to the maildir before the 250."""

    def __init__(self, spool: Path) -> None:
        self.spool = str(spool)
        self.maildir = mailbox.Maildir(self.spool, create=True)
        self.host = "127.0.0.1"
        self.port = 0
        self.delay = 0.0  # seconds to hold the 250 back: a reply that never reaches the client
        self.reject: set[str] = set()
        self.on_rcpt: Callable[[str], None] | None = None
        self.on_data: Callable[[], None] | None = None
        self.envelopes: list[list[str]] = []

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if self.on_rcpt is not None:
            self.on_rcpt(address)
        if address in self.reject:
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.maildir.add(envelope.content)
        self.envelopes.append(list(envelope.rcpt_tos))
        if self.on_data is not None:
            self.on_data()
        if self.delay:
            await asyncio.sleep(self.delay)
        return "250 2.0.0 queued"

    def ids(self) -> list[str]:
        return received_ids(self.spool)

    def args(self, messages: list[list[Any]], *, verify: bool = True, timeout: float = 30.0) -> list[Any]:
        """email_mailer's input: this server, the maildir for the verifier (or none), messages."""
        return [self.host, self.port, self.spool if verify else None, messages, timeout]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[MailServer]:
    server = MailServer(tmp_path / "maildir")
    # The free port is only free until the server binds it: another process on the machine (a
    # parallel test worker, another suite) can take it in between. Then pick another one.
    for attempt in range(5):
        server.port = _free_port()
        controller = Controller(server, hostname=server.host, port=server.port)
        try:
            controller.start()
            break
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or attempt == 4:
                raise
    yield server
    controller.stop()


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=300)


def _killed(returncode: int | None) -> bool:
    return returncode == -signal.SIGKILL


def _sends(book: Daybook, run_id: str) -> list[daybook.Event]:
    return [e for e in book.journal(run_id) if e.name == "email.send"]


def _outcomes(book: Daybook, run_id: str) -> list[str | None]:
    return [e.status for e in _sends(book, run_id) if e.kind == Kind.OUTCOME]


ONE = [[ANN, "Q3 numbers", "The Q3 report is attached."]]
TWO = [[ANN, "Q3 numbers", "Yours."], [[BOB, CY], "Q3 numbers", "Yours too."]]


@daybook.workflow
def email_staged(ctx: Context, host: str, port: int, spool: str) -> dict[str, Any]:
    outbox = Outbox(host, port, SENDER, verify=spool_verifier(spool))
    ids = [outbox.queue(ctx, ANN, "Q3", "one"), outbox.queue(ctx, [BOB, CY], "Q3", "two")]
    arrived = ctx.decide("received before release", received_ids, spool).value
    waiting = [m["message_id"] for m in outbox.pending(ctx)]
    sent = outbox.release(ctx)
    return {"ids": ids, "arrived": arrived, "waiting": waiting, "sent": sent, "again": outbox.release(ctx)}


@daybook.workflow
def email_bad_subject(ctx: Context, host: str, port: int) -> str:
    return Outbox(host, port, SENDER).queue(ctx, ANN, "Hi\r\nBcc: everyone@example.test", "x")


# -- in-process behaviour ---------------------------------------------------------------------


def test_queued_messages_leave_only_when_released_each_once(book: Daybook, smtp: MailServer) -> None:
    out = book.run(email_staged, smtp.host, smtp.port, smtp.spool, run_id="staged")
    assert out["arrived"] == [] and out["waiting"] == out["ids"]
    assert [r["message_id"] for r in out["sent"]] == out["ids"] and out["again"] == []
    assert sorted(smtp.ids()) == sorted(out["ids"])
    assert smtp.envelopes == [[ANN], [BOB, CY]]
    queued = [e for e in book.journal("staged") if e.name == "email.queue"]
    intents = [e for e in _sends(book, "staged") if e.kind == Kind.INTENT]
    # Each send names its queue step (the why) and carries its key in the Message-ID.
    assert [e.data["decision"] for e in intents] == [f"staged/{e.step}" for e in queued]
    assert [message_id_for(e.key) for e in intents] == out["ids"]
    assert [e.data["ref"] for e in _sends(book, "staged") if e.kind == Kind.OUTCOME] == out["ids"]


def test_running_a_finished_run_again_or_replaying_it_sends_nothing(book: Daybook, smtp: MailServer) -> None:
    first = book.run(email_mailer, *smtp.args(TWO), run_id="again")
    assert book.run(email_mailer, *smtp.args(TWO), run_id="again") == first
    assert book.replay("again") == first
    assert sorted(smtp.ids()) == sorted(first["ids"])


def test_message_id_carries_the_key_and_is_a_valid_msg_id() -> None:
    atext = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
    for key in ["run-1/2/email.send/0", ".lead..dots.", "sp ace/ü@x<y>/1", "100%/%41"]:
        mid = message_id_for(key)
        assert re.fullmatch(rf"<{atext}(\.{atext})*@daybook>", mid), mid
        assert key_of(mid) == key
    assert message_id_for("r/1/email.send/0") == "<r/1/email.send/0@daybook>"
    assert key_of("<abc@mail.example.com>") is None and key_of("no brackets") is None


def test_lost_smtp_reply_is_settled_by_verify_without_a_second_message(
    book: Daybook, smtp: MailServer
) -> None:
    smtp.delay = 1.0  # the server takes the message; its 250 comes after the client gave up
    out = book.run(email_mailer, *smtp.args(ONE, timeout=0.3), run_id="lost-reply")
    assert _outcomes(book, "lost-reply") == ["unknown", "confirmed"]
    settled = _sends(book, "lost-reply")[-1]
    assert settled.data["resolved_by"] == "verify" and settled.data["ref"] == out["ids"][0]
    assert smtp.ids() == out["ids"]


def test_lost_reply_without_verify_parks_and_a_resend_is_detectable_by_message_id(
    book: Daybook, smtp: MailServer
) -> None:
    smtp.delay = 1.0
    with pytest.raises(NeedsAttention):
        book.run(email_mailer, *smtp.args(ONE, verify=False, timeout=0.3), run_id="no-verify")
    [unknown] = [u for u in book.unknowns() if u["run_id"] == "no-verify"]
    assert unknown["tool"] == "email.send" and book.get_run("no-verify").status == "needs_attention"
    assert len(smtp.ids()) == 1  # taken once; nothing was sent again on a guess

    # A person who wrongly records it as never arrived makes daybook send it again: the
    # receiver sees the same Message-ID twice, and the id names the one key it was sent under.
    smtp.delay = 0.0
    book.resolve("no-verify", int(unknown["step"]), absent=True, by="test", evidence="guessed")
    book.resume("no-verify")
    [(mid, count)] = Counter(smtp.ids()).items()
    assert count == 2 and key_of(mid) == unknown["key"]


def test_refused_recipients_are_reported_and_a_message_nobody_takes_fails(
    book: Daybook, smtp: MailServer
) -> None:
    smtp.reject = {"nobody@example.test"}
    out = book.run(email_mailer, *smtp.args([[[ANN, "nobody@example.test"], "s", "b"]]), run_id="some")
    assert out["sent"][0]["to"] == [ANN] and out["sent"][0]["refused"]["nobody@example.test"][0] == 550
    assert smtp.envelopes == [[ANN]]
    with pytest.raises(RunFailed, match="550"):
        book.run(email_mailer, *smtp.args([["nobody@example.test", "s", "b"]]), run_id="none")
    assert _outcomes(book, "none") == ["failed"] and len(smtp.ids()) == 1


def test_bad_addresses_and_header_injection_are_refused_before_anything_is_journaled(
    book: Daybook, smtp: MailServer
) -> None:
    with pytest.raises(daybook.ConfigError, match="port"):
        Outbox("127.0.0.1", 0, SENDER)
    with pytest.raises(daybook.ConfigError, match="addr-spec"):
        Outbox("127.0.0.1", smtp.port, "Agent <agent@daybook.test>")
    with pytest.raises(RunFailed, match="CR or LF"):
        book.run(email_bad_subject, smtp.host, smtp.port, run_id="inject")
    assert [e for e in book.journal("inject") if e.name == "email.queue"] == []
    assert smtp.ids() == []


def test_send_is_declared_irreversible_and_held_until_release() -> None:
    profile = send.profile()
    assert profile["effect_class"] == "irreversible" and profile["bufferable"] is True
    assert profile["verify"] is True and profile["idempotent"] is False
    assert profile["gated_by_agent_loop"] is True  # the agent loop gates it unless told otherwise
    assert profile["gated_by_default"] is False  # a plain ctx.effect sends it (D-3)
    assert profile["in_transaction"] == "held"  # held, and so under a transaction's release gate


# -- crash tests: SIGKILL the agent process, resume in a new one ------------------------------


@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no-verify"])
def test_kill_after_send_intent_then_resume_sends_once(db_url: str, smtp: MailServer, verify: bool) -> None:
    run = f"intent-{verify}"
    proc = _child(db_url, "start", run, json.dumps(smtp.args(ONE, verify=verify)), "--kill-after", "intent:1")
    assert _killed(proc.returncode), proc.stderr
    assert smtp.ids() == []  # the intent is durable; nothing reached the server
    resumed = _child(db_url, "resume", run)
    if not verify:
        # An intent without an outcome may have been sent; with nobody to ask, a person decides.
        assert resumed.returncode == 3 and "NeedsAttention" in resumed.stdout
        assert smtp.ids() == []
        with Daybook(db_url) as book:
            [unknown] = book.unknowns()
            book.resolve(run, int(unknown["step"]), absent=True, by="postmaster", evidence="not in the log")
        resumed = _child(db_url, "resume", run)
    assert resumed.returncode == 0, resumed.stderr
    ids = json.loads(resumed.stdout)["result"]["ids"]
    assert smtp.ids() == ids
    with Daybook(db_url) as book:
        assert _outcomes(book, run)[-1] == "confirmed" and book.unknowns() == []


@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no-verify"])
def test_kill_after_smtp_accepted_before_outcome_never_sends_twice(
    db_url: str, smtp: MailServer, verify: bool
) -> None:
    run = f"accepted-{verify}"
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), db_url, "start", run, json.dumps(smtp.args(ONE, verify=verify))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    smtp.on_data = lambda: os.kill(proc.pid, signal.SIGKILL)  # the message is in the maildir
    proc.communicate(timeout=300)
    assert _killed(proc.returncode)
    smtp.on_data = None
    [mid] = smtp.ids()
    with Daybook(db_url) as book:
        assert [e.kind for e in _sends(book, run)] == [Kind.INTENT]
    resumed = _child(db_url, "resume", run)
    with Daybook(db_url) as book:
        if verify:
            assert resumed.returncode == 0, resumed.stderr
            assert _outcomes(book, run) == ["unknown", "confirmed"]
            assert _sends(book, run)[-1].data["resolved_by"] == "verify"
        else:
            assert resumed.returncode == 3 and "NeedsAttention" in resumed.stdout
            [unknown] = book.unknowns()
            assert unknown["run_id"] == run and key_of(mid) == unknown["key"]
            # The postmaster finds the Message-ID in the mailbox and says so.
            result = {"message_id": mid, "to": [ANN], "refused": None}
            book.resolve(run, int(unknown["step"]), confirmed=result, by="postmaster", evidence=mid)
            assert _child(db_url, "resume", run).returncode == 0
        assert book.get_run(run).status == "completed" and book.unknowns() == []
    assert smtp.ids() == [mid]


def test_kill_mid_smtp_transaction_delivers_nothing_then_every_recipient_once(
    db_url: str, smtp: MailServer
) -> None:
    messages = [[[ANN, BOB, CY], "all hands", "Friday."]]
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), db_url, "start", "mid", json.dumps(smtp.args(messages))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def kill_at_second_recipient(address: str) -> None:
        if address == BOB:
            os.kill(proc.pid, signal.SIGKILL)

    smtp.on_rcpt = kill_at_second_recipient
    proc.communicate(timeout=300)
    assert _killed(proc.returncode)
    smtp.on_rcpt = None
    assert smtp.ids() == []  # an unfinished SMTP transaction is discarded whole
    resumed = _child(db_url, "resume", "mid")
    assert resumed.returncode == 0, resumed.stderr
    assert smtp.ids() == json.loads(resumed.stdout)["result"]["ids"]
    assert smtp.envelopes == [[ANN, BOB, CY]]


def test_kill_after_queueing_before_release_then_resume_releases_once(db_url: str, smtp: MailServer) -> None:
    proc = _child(db_url, "start", "queued", json.dumps(smtp.args(TWO)), "--kill-after", "decision:2")
    assert _killed(proc.returncode), proc.stderr
    assert smtp.ids() == []
    with Daybook(db_url) as book:
        queued = [e for e in book.journal("queued") if e.name == "email.queue"]
        assert len(queued) == 2 and _sends(book, "queued") == []
    resumed = _child(db_url, "resume", "queued")
    assert resumed.returncode == 0, resumed.stderr
    ids = json.loads(resumed.stdout)["result"]["ids"]
    # The Message-IDs were fixed when queued, by the queue steps the first process journaled.
    assert ids == [message_id_for(f"queued/{e.step}/email.send/0") for e in queued]
    assert sorted(smtp.ids()) == sorted(ids)


def test_kill_between_two_sends_of_a_release_sends_the_rest_once(db_url: str, smtp: MailServer) -> None:
    proc = _child(db_url, "start", "between", json.dumps(smtp.args(TWO)), "--kill-after", "outcome:1")
    assert _killed(proc.returncode), proc.stderr
    [first] = smtp.ids()
    resumed = _child(db_url, "resume", "between")
    assert resumed.returncode == 0, resumed.stderr
    ids = json.loads(resumed.stdout)["result"]["ids"]
    assert first == ids[0] and sorted(smtp.ids()) == sorted(ids)
