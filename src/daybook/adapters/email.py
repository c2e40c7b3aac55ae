"""Email through a durable outbox: messages are journaled when queued and leave, over SMTP, only
when the run releases them.

This module owns the `email.send` tool (one SMTP transaction per message, irreversible, held in
the outbox until release), the Message-ID scheme that carries each message's idempotency key to
the receiver (`message_id_for` / `key_of`), and `Outbox`, the per-server handle workflows use.
SMTP cannot be asked whether it accepted a message, so an unknown outcome is settled only by a
verifier the user supplies (an IMAP search, the relay's log); without one the run parks for a
person. Standard library only (smtplib, email).
"""

from __future__ import annotations

import logging
import smtplib
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import formatdate
from typing import Any

from daybook import (
    Absent,
    ConfigError,
    Confirmed,
    Context,
    Decision,
    OutcomeUnknown,
    Pending,
    ReconcileResult,
    Retry,
    TransientError,
    tool,
)

__all__ = ["Outbox", "Verify", "key_of", "message_id_for", "send"]

log = logging.getLogger("daybook.adapters.email")

DOMAIN = "daybook"

# Asked with a Message-ID: True (the message arrived), False (it certainly did not), None (cannot
# tell yet). False makes daybook send again, so answer it only when absence is proven.
Verify = Callable[[str], bool | None]

# Verifiers are code, not data, so they cannot live in the journal: each Outbox registers its own
# here under the server and sender that the effect's args name, and any process that builds the
# same Outbox (as the workflow body does on resume) can answer for its messages.
_VERIFIERS: dict[tuple[str, int, str], Verify] = {}

# Characters kept as they are in the left part of a Message-ID; everything else is %XX-escaped
# (UTF-8), so any key maps to a valid RFC 5322 msg-id and back.
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_/+=")


def message_id_for(key: str) -> str:
    """The Message-ID that carries `key`: `<escaped-key@daybook>`, the same on every attempt."""
    out: list[str] = []
    for i, ch in enumerate(key):
        # A dot may not start or end the id or follow another dot (dot-atom), so those escape.
        keep_dot = ch == "." and 0 < i < len(key) - 1 and out[-1] != "."
        out.append(ch if ch in _SAFE or keep_dot else "".join(f"%{b:02X}" for b in ch.encode()))
    return f"<{''.join(out)}@{DOMAIN}>"


def key_of(message_id: str) -> str | None:
    """The idempotency key in a Message-ID this adapter made, else None. A receiver that sees the
    same key twice is looking at a re-send of one message, not two messages."""
    text = message_id.strip()
    if not (text.startswith("<") and text.endswith(">")):
        return None
    left, sep, right = text[1:-1].rpartition("@")
    if not sep or right != DOMAIN or not left:
        return None
    return urllib.parse.unquote(left, errors="strict")


def _compose(sender: str, to: Sequence[str], subject: str, body: str, date: str, message_id: str) -> bytes:
    msg = EmailMessage(policy=SMTP)
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Subject"] = subject
    msg["Date"] = date
    msg["Message-ID"] = message_id
    msg.set_content(body)
    return msg.as_bytes()


def _reply(resp: bytes | str) -> str:
    return resp.decode("utf-8", "replace") if isinstance(resp, bytes) else resp


def _refusal(stage: str, code: int, resp: bytes | str) -> Exception:
    """A 4xx is the server saying "not now" (nothing was taken: retry under the same key); any
    other refusal is final."""
    text = f"SMTP server refused {stage}: {code} {_reply(resp)}"
    if 400 <= code < 500:
        return TransientError(text)
    return smtplib.SMTPResponseException(code, text)


def _verify(args: dict[str, Any]) -> ReconcileResult:
    """The tool's verify hook: SMTP has no status query, so ask the outbox's own verifier."""
    mid = str(args["message_id"])
    asker = _VERIFIERS.get((str(args["host"]), int(args["port"]), str(args["sender"])))
    if asker is None:
        log.warning(
            "email.send %s: SMTP cannot be asked whether it accepted a message and this outbox "
            "(%s:%s, from %s) has no verify=; the run waits for a person (`daybook resolve`)",
            mid,
            args["host"],
            args["port"],
            args["sender"],
        )
        return Pending()
    seen = asker(mid)
    if seen is True:
        return Confirmed({"message_id": mid, "to": list(args["to"]), "refused": None}, ref=mid)
    if seen is False:
        return Absent()
    return Pending()


@tool(
    name="email.send",
    scopes="email:outbox:{sender}",
    effect_class="irreversible",
    bufferable=True,
    verify=_verify,
    reference=lambda result: result["message_id"],
    # One round: a verifier that cannot tell yet (or no verifier at all) is a question for a
    # person or a later resume, never a reason to send again.
    retry=Retry(max_attempts=3, backoff=0.2, reconcile_rounds=1),
    certain=(smtplib.SMTPResponseException, ConfigError),  # a final refusal; a bad address
    # Re-queued by a recovery's re-run, the same message differs only in its Date: the same act.
    volatile=("date",),
)
def send(
    *,
    host: str,
    port: int,
    sender: str,
    to: list[str],
    subject: str,
    body: str,
    date: str,
    message_id: str,
    timeout: float,
    idempotency_key: str,
) -> dict[str, Any]:
    """Hand one message to the SMTP server at host:port in one transaction.

    Anything that fails before the end of DATA took nothing (RFC 5321 discards an unfinished
    transaction), so it is transient or final by its reply code; a connection lost during DATA
    may have delivered, so it is unknown. The key travels in the Message-ID."""
    data = _compose(sender, to, subject, body, date, message_id)
    try:
        smtp = smtplib.SMTP(host, port, timeout=timeout)
    except OSError as exc:
        # Includes a connect timeout and a refused greeting: no transaction was ever opened.
        raise TransientError(f"cannot reach SMTP server {host}:{port}: {exc}") from exc
    try:
        refused = _envelope(smtp, host, port, sender, to)
        try:
            code, resp = smtp.data(data)
        except smtplib.SMTPDataError as exc:
            # Refused at DATA itself (before the message was transmitted).
            raise _refusal("DATA", exc.smtp_code, exc.smtp_error) from exc
        except OSError as exc:
            raise OutcomeUnknown(
                f"SMTP {host}:{port}: connection lost while the message was being accepted: {exc}",
                ref=message_id,
            ) from exc
        if code != 250:
            raise _refusal("the message", code, resp)
        accepted = [r for r in to if r not in refused]
        return {"message_id": message_id, "to": accepted, "refused": refused}
    finally:
        try:
            smtp.quit()
        except (smtplib.SMTPException, OSError):
            smtp.close()


def _envelope(smtp: smtplib.SMTP, host: str, port: int, sender: str, to: list[str]) -> dict[str, list[Any]]:
    """HELO, MAIL FROM and RCPT TO; returns the recipients refused. Nothing here has taken the
    message yet, so every failure is transient or final by its reply code."""
    try:
        smtp.ehlo_or_helo_if_needed()
        code, resp = smtp.mail(sender)
        if code != 250:
            raise _refusal(f"sender {sender}", code, resp)
        refused: dict[str, list[Any]] = {}
        for rcpt in to:
            code, resp = smtp.rcpt(rcpt)
            if code not in (250, 251):
                refused[rcpt] = [code, _reply(resp)]
        if len(refused) == len(to):
            # Retry only if every refusal was temporary; one permanent "no" makes it final.
            worst = max(int(c) for c, _ in refused.values())
            raise _refusal("every recipient", worst, str(refused))
    except smtplib.SMTPHeloError as exc:
        raise _refusal("HELO", exc.smtp_code, exc.smtp_error) from exc
    except smtplib.SMTPResponseException:
        raise  # a final refusal, made above
    except OSError as exc:
        raise TransientError(f"SMTP {host}:{port} dropped before DATA: {exc}") from exc
    return refused


@dataclass
class _Queued:
    decision: Decision[Any]
    message_id: str
    settled: bool = False


def _address(value: str, what: str) -> str:
    if not isinstance(value, str) or "\r" in value or "\n" in value:
        raise ConfigError(f"email {what} {value!r}: give one address as a string on one line")
    try:
        parsed = Address(addr_spec=value.strip())
    except (ValueError, IndexError, HeaderParseError) as exc:
        raise ConfigError(
            f"email {what} {value!r} is not an address ({exc}); give a bare addr-spec like a@b.example"
        ) from None
    if not parsed.domain:
        raise ConfigError(f"email {what} {value!r} has no domain; give a bare addr-spec like a@b.example")
    return parsed.addr_spec


class Outbox:
    """A durable outbox in front of the SMTP server at host:port, sending as `sender`.

    `queue` journals a message and sends nothing; `release` sends every message of this run not
    yet sent, each as its own `email.send` effect. `verify(message_id) -> True | False | None`
    settles an outcome SMTP left unknown; without it such a run stops in `needs_attention`.
    Build it with the same host, port, sender and verify in every process that resumes the run
    (the workflow body is the natural place). The last Outbox built for a server and sender
    decides its verifier.
    """

    def __init__(
        self,
        host: str,
        port: int,
        sender: str,
        *,
        verify: Verify | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not isinstance(host, str) or not host:
            raise ConfigError(f"Outbox host {host!r}: give the SMTP server's host name or address")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"Outbox port {port!r}: give the SMTP server's TCP port (1-65535)")
        if timeout <= 0:
            raise ConfigError(f"Outbox timeout {timeout!r}: give seconds > 0")
        if verify is not None and not callable(verify):
            raise ConfigError("Outbox verify= must be a callable: verify(message_id) -> True | False | None")
        self.host = host
        self.port = port
        self.sender = _address(sender, "sender")
        self.timeout = float(timeout)
        self.verify = verify
        ident = (host, port, self.sender)
        if verify is None:
            _VERIFIERS.pop(ident, None)
        else:
            _VERIFIERS[ident] = verify

    def queue(self, ctx: Context, to: str | Sequence[str], subject: str, body: str) -> str:
        """Journal a message (a recorded `email.queue` step) without sending it; returns its
        Message-ID, which names the step's key and so is the same on every replay."""
        rcpts = [to] if isinstance(to, str) else list(to)
        if not rcpts:
            raise ConfigError("email to=: give at least one recipient address")
        rcpts = [_address(r, "recipient") for r in rcpts]
        if not isinstance(subject, str) or "\r" in subject or "\n" in subject:
            raise ConfigError(f"email subject {subject!r}: give one line of text (no CR or LF)")
        if not isinstance(body, str):
            raise ConfigError(f"email body must be text (str), got {type(body).__name__}")
        sender = self.sender

        def record(to: list[str], subject: str, body: str) -> dict[str, Any]:
            # The Date is fixed here, so every attempt sends byte-identical content.
            date = formatdate(time.time(), usegmt=True)
            return {"sender": sender, "to": to, "subject": subject, "body": body, "date": date}

        decision = ctx.decide("email.queue", record, to=rcpts, subject=subject, body=body)
        mid = message_id_for(decision.key(send.name, 0))
        ctx.held(self).append(_Queued(decision, mid))
        return mid

    def pending(self, ctx: Context) -> list[dict[str, Any]]:
        """The messages of this run queued and not yet released (to describe a gate before
        `release`): message_id, to and subject of each."""
        return [
            {"message_id": q.message_id, "to": q.decision.value["to"], "subject": q.decision.value["subject"]}
            for q in ctx.held(self)
            if not q.settled
        ]

    def release(self, ctx: Context) -> list[dict[str, Any]]:
        """Send every message of this run not yet released, in queue order, each as its own
        irreversible `email.send` effect keyed by its queue step; returns their results
        (`message_id`, accepted `to`, `refused`). Put a `ctx.gate` before this call when a person
        must approve what leaves. A message refused for good raises `EffectFailed` and is not
        tried again by a later release; the rest stay queued."""
        sent: list[dict[str, Any]] = []
        for q in ctx.held(self):
            if q.settled:
                continue
            # Settled before the call: a failure is final in the journal, and the same decision
            # must never be asked for a second effect.
            q.settled = True
            v = q.decision.value
            sent.append(
                ctx.effect(
                    send,
                    key=q.decision.key(send.name, 0),
                    decision=q.decision,
                    host=self.host,
                    port=self.port,
                    sender=v["sender"],
                    to=v["to"],
                    subject=v["subject"],
                    body=v["body"],
                    date=v["date"],
                    message_id=q.message_id,
                    timeout=self.timeout,
                )
            )
        return sent
