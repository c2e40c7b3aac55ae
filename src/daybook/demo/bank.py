"""A small bank on 127.0.0.1: a real HTTP counterparty that honours idempotency keys.

Used by the demo and the tests. It keeps its own books (what it executed, per key) so a test can
assert what the counterparty received, not what the journal says. Faults can be injected:
refuse the first N requests (503), execute and then drop the connection without a reply, or run
a hook between executing and replying (the demo kills the agent there).

    POST /<collection>        body JSON, header Idempotency-Key; 201 new, 200 replayed
    GET  /<collection>/<key>  200 the record, 202 still pending, 404 never received (or forgotten)
    GET  /by-id/<id>          the record by the bank's own id (never forgotten)
    POST /reversals           body {"original": {...}, "result": {"id": ...}}: undo a record
    GET  /<collection>        the keys it holds
    GET  /balances            the day's balances (what the treasury agent reads)
    GET  /stats               executions and requests, per key
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Faults:
    """Mutable fault plan; counters go down as faults fire."""

    refuse: int = 0  # answer 503 without executing, this many times
    drop_after_execute: int = 0  # execute, then close the socket without replying
    status_down: int = 0  # status queries answer 503 this many times
    pending: int = 0  # status queries answer 202 (accepted, not settled) this many times
    on_execute: Callable[[str, str], None] | None = None  # (collection, key) before the reply
    collections: set[str] = field(default_factory=set)  # empty: faults apply to all


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    bank: Bank

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that vanish mid-request are part of the tests; a traceback would be noise.
        return


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, a keep-alive client's delayed ACK
    # would hold the body back 40 ms.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, *args: Any) -> None:
        return

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client died mid-exchange (the demo kills it on purpose).
            self.close_connection = True

    def do_GET(self) -> None:
        bank = self.server.bank
        # Keys hold slashes; clients may send them raw or percent-encoded.
        parts = [p for p in urllib.parse.unquote(self.path).split("/") if p]
        if parts == ["stats"]:
            self._send(200, bank.stats())
        elif parts == ["balances"]:
            self._send(200, bank.balances)
        elif len(parts) == 1:  # the keys of a collection: what reconciliation compares
            with bank._lock:
                self._send(200, sorted(bank.records.get(parts[0], {})))
        elif len(parts) == 2 and parts[0] == "by-id":
            with bank._lock:
                rec = bank.by_id.get(parts[1])
            self._send(200, rec) if rec else self._send(404, {"error": "no such id"})
        elif len(parts) >= 2:
            self._send(*bank.status(parts[0], "/".join(parts[1:])))
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        parts = [p for p in self.path.split("/") if p]
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        key = self.headers.get("Idempotency-Key")
        if len(parts) != 1 or not key:
            self._send(400, {"error": "POST /<collection> with an Idempotency-Key header"})
            return
        code, reply, drop = self.server.bank.execute(parts[0], key, body)
        if drop:
            self.close_connection = True
            self.connection.close()
            return
        self._send(code, reply)


class Bank:
    def __init__(self, balances: dict[str, int] | None = None, dedup_window: float | None = None) -> None:
        # Like a real payment API, the bank forgets keys after a window: a key older than this
        # is unknown to its status endpoint, and a POST under it executes again.
        self.dedup_window = dedup_window
        self.by_id: dict[str, dict[str, Any]] = {}
        self.balances = balances or {"USD-operating": 1_250_000, "AUD-operating": 310_000}
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        self.executions: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.faults = Faults()
        self._stamps: dict[str, float] = {}
        self._lock = threading.Lock()
        self._seq = 0
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.bank = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def status(self, coll: str, key: str) -> tuple[int, dict[str, Any]]:
        """The answer of the status endpoint for a key: the record, pending, or no such key."""
        with self._lock:
            if self._fault(coll, "status_down"):
                return 503, {"error": "status service unavailable"}
            rec = self._remembered(coll, key)
            if rec and self._fault(coll, "pending"):
                return 202, {"id": rec["id"], "state": "pending"}
        return (200, rec) if rec else (404, {"error": "no such key"})

    def execute(self, coll: str, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], bool]:
        """A POST under an idempotency key: (status code, reply, drop the connection unanswered)."""
        with self._lock:
            self.requests[key] = self.requests.get(key, 0) + 1
            if self._fault(coll, "refuse"):
                return 503, {"error": "try again"}, False
            existing = self._remembered(coll, key)
            if existing is not None:
                return 200, existing, False
            self._seq += 1
            rec = {"id": f"{coll[:-1] if coll.endswith('s') else coll}-{self._seq:06d}", "key": key, **body}
            self.records.setdefault(coll, {})[key] = rec
            self.by_id[rec["id"]] = rec
            self._stamps[key] = time.monotonic()
            self.executions[key] = self.executions.get(key, 0) + 1
            drop = self._fault(coll, "drop_after_execute")
            hook = self.faults.on_execute
        if hook is not None:
            hook(coll, key)
        return 201, rec, drop

    def _remembered(self, coll: str, key: str) -> dict[str, Any] | None:
        rec = self.records.get(coll, {}).get(key)
        if rec is None or self.dedup_window is None:
            return rec
        return rec if time.monotonic() - self._stamps.get(key, 0.0) <= self.dedup_window else None

    def _fault(self, coll: str, name: str) -> bool:
        f = self.faults
        if f.collections and coll not in f.collections:
            return False
        left: int = getattr(f, name)
        if left > 0:
            setattr(f, name, left - 1)
            return True
        return False

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Bank:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Bank:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "executed": {c: len(r) for c, r in self.records.items()},
                "executions_by_key": dict(self.executions),
                "requests_by_key": dict(self.requests),
            }
