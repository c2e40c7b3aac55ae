"""An SMTP sink on 127.0.0.1 (aiosmtpd) that appends every message it accepts to its own
JSONL log: Message-ID, the logical email it stands for (X-Logical-Id), the run, and when. The
Table 10 counts are read back from that log, never from the sender's side."""

from __future__ import annotations

import email
import email.utils
import json
import smtplib
import socket
import threading
import time
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Delivery:
    message_id: str
    logical: str
    run: str
    at: float


class _Handler:
    def __init__(self, log: Path) -> None:
        self.log = log
        self.lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        msg = email.message_from_bytes(envelope.content)
        row = {
            "message_id": msg.get("Message-ID", ""),
            "logical": msg.get("X-Logical-Id", ""),
            "run": msg.get("X-Run", ""),
            "at": time.time(),
        }
        with self.lock, self.log.open("a") as f:
            f.write(json.dumps(row) + "\n")
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmtpSink:
    """Started on a free port; `deliveries()` reads the sink's log."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.log = root / "smtp-sink.jsonl"
        self.log.touch()
        self.port = _free_port()
        self._ctl = Controller(_Handler(self.log), hostname="127.0.0.1", port=self.port)
        self._ctl.start()

    def deliveries(self) -> list[Delivery]:
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [Delivery(**r) for r in rows]

    def has(self, message_id: str) -> bool:
        return any(d.message_id == message_id for d in self.deliveries())

    def send(self, *, logical: str, run: str, message_id: str | None = None) -> str:
        return SmtpClient(self.port).send(logical=logical, run=run, message_id=message_id)

    def stop(self) -> None:
        self._ctl.stop()


@dataclass
class SmtpClient:
    """Sends to a sink by port (a peer system's subprocess has the port, not the sink)."""

    port: int

    def send(self, *, logical: str, run: str, message_id: str | None = None) -> str:
        """Deliver one email (a real SMTP exchange); a fresh Message-ID unless one is given,
        as a plain client would mint one per send."""
        msg = EmailMessage()
        msg["From"] = "agent@example.com"
        msg["To"] = "customer@example.com"
        msg["Subject"] = f"confirmation {logical}"
        msg["Message-ID"] = message_id or email.utils.make_msgid(domain="atomix.local")
        msg["X-Logical-Id"] = logical
        msg["X-Run"] = run
        msg.set_content("Your booking is confirmed.")
        with smtplib.SMTP("127.0.0.1", self.port, timeout=30) as client:
            client.send_message(msg)
        return str(msg["Message-ID"])
