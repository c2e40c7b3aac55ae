"""The irreversible-effect workload (Table 10): per run, three reversible file writes and two
confirmation emails to the SMTP sink, in the order file, email, file, email, file, under
faults at every call. Tx-Full is one daybook transaction (files written now and undone on abort;
emails held until commit, released once under their key; with `confirm` each held email also
passes an approval gate that an approver thread grants). The baselines act directly."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faults import InjectedFault, Injector, LostReply
from smtp import SmtpClient, SmtpSink

import daybook

PLAN = ("file", "email", "file", "email", "file")


@dataclass
class Mailroom:
    """The experiment's resources: a directory per run, the SMTP sink, the fault injector, and
    the keys of file writes that landed (the files' own dedup, for status queries)."""

    root: Path
    sink: SmtpSink | SmtpClient
    injector: Injector
    landed: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fault(self, run: str, step: int, draw: str) -> str | None:
        return self.injector.next(run, step, draw)

    def write(self, run: str, step: int, draw: str, key: str | None) -> Any:
        kind = self.fault(run, step, draw)
        if kind == "pre":
            raise InjectedFault(f"{run} file {step}")
        path = self.root / run / f"f{step}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.read_text() if path.exists() else None
        path.write_text(f"step {step}")
        if key is not None:
            with self.lock:
                self.landed[key] = before
        if kind == "post":
            raise LostReply(f"{run} file {step}")
        return before

    def mail(self, run: str, step: int, draw: str, message_id: str | None) -> str:
        kind = self.fault(run, step, draw)
        if kind == "pre":
            # Refused before anything was sent: certainly not delivered, safe to retry.
            raise daybook.TransientError(f"{run} email {step}: connection refused")
        sent = self.sink.send(logical=f"{run}:{step}", run=run, message_id=message_id)
        if kind == "post":
            raise LostReply(f"{run} email {step}: delivered, reply lost")
        return sent


ROOM: dict[str, Mailroom] = {}


def _file_status(key: str, args: dict[str, Any]) -> Any:
    room = ROOM["room"]
    with room.lock:
        if key in room.landed:
            return daybook.Confirmed(room.landed[key])
    return daybook.Absent()


def _mail_status(key: str, args: dict[str, Any]) -> Any:
    # Asks the sink itself whether a message with this Message-ID arrived.
    sink = ROOM["room"].sink
    assert isinstance(sink, SmtpSink)  # Tx-Full runs in the sink's own process
    return daybook.Confirmed(f"<{key}@daybook>") if sink.has(f"<{key}@daybook>") else daybook.Absent()


@daybook.tool(idempotent=True, irreversible=False)
def t10_unwrite(*, original: dict[str, Any], result: Any, idempotency_key: str) -> None:
    path = ROOM["room"].root / original["run"] / f"f{original['step']}.txt"
    path.unlink(missing_ok=True) if result is None else path.write_text(result)


@daybook.tool(
    inverse=t10_unwrite,
    status=_file_status,
    certain=(InjectedFault,),
    retry=daybook.Retry(max_attempts=1, backoff=0.001, reconcile_rounds=3),
)
def t10_write(*, run: str, step: int, draw: str, idempotency_key: str) -> Any:
    return ROOM["room"].write(run, step, draw, idempotency_key)


@daybook.tool(
    irreversible=True,
    status=_mail_status,
    # A refused send is retried under the same Message-ID until it goes: once committed, the
    # email is owed exactly once.
    retry=daybook.Retry(max_attempts=None, backoff=0.001, max_backoff=0.01, reconcile_rounds=3),
)
def t10_mail(*, run: str, step: int, draw: str, idempotency_key: str) -> str:
    return ROOM["room"].mail(run, step, draw, f"<{idempotency_key}@daybook>")


@daybook.workflow(name="atomix_t10")
def t10_run(ctx: daybook.Context, run: str, draw: str, confirm: bool) -> str:
    with ctx.transaction(scopes=["**"], retries=3, gate=confirm) as tx:
        for step, kind in enumerate(PLAN):
            tool = t10_write if kind == "file" else t10_mail
            ctx.effect(tool, run=run, step=step, draw=draw)
    return str(tx.status)


def approver(book: daybook.Daybook, stop: threading.Event) -> threading.Thread:
    """Grants every open release gate (Table 10's "confirm" setting), as an on-call person would."""
    token = book.add_approver("oncall")

    def loop() -> None:
        while not stop.is_set():
            for gate in book.approvals():
                book.approve(str(gate["run_id"]), str(gate["gate_id"]), approver="oncall", token=token)
            stop.wait(0.002)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def baseline(mode: str, room: Mailroom, run: str, draw: str) -> int:
    """CR: checkpoint the run's files, retry a faulted call after restoring them (emails go out
    at once, fresh Message-ID per send); No-Tx: stop at the first fault; No-Frontier: files now
    with before-images, emails held until the end, a fault compensates and stops. Returns how
    many emails were held (gated)."""
    held: list[int] = []
    undo: list[tuple[int, Any]] = []
    for step, kind in enumerate(PLAN):
        tries = 4 if mode == "CR" else 1
        for _ in range(tries):
            try:
                if kind == "email" and mode == "No-Frontier":
                    held.append(step)
                elif kind == "email":
                    room.mail(run, step, draw, None)
                else:
                    undo.append((step, room.write(run, step, draw, None)))
                break
            except (InjectedFault, LostReply, daybook.TransientError):
                continue  # CR's checkpoint is the run's files, which the retry rewrites whole
        else:
            if mode == "No-Frontier":
                _unwrite(room, run, undo)
            return len(held)
    _release(room, run, draw, held)
    return len(held)


def _unwrite(room: Mailroom, run: str, undo: list[tuple[int, Any]]) -> None:
    for step, before in reversed(undo):
        path = room.root / run / f"f{step}.txt"
        path.unlink(missing_ok=True) if before is None else path.write_text(before)


def _release(room: Mailroom, run: str, draw: str, held: list[int]) -> bool:
    """No-Frontier's commit: send the held emails, once each, no retry."""
    for step in held:
        try:
            room.mail(run, step, draw, None)
        except (LostReply, daybook.TransientError):
            return False
    return True
