"""Workflows the queue and schedule tests run in worker processes, and the counterparty they
call: a meter on 127.0.0.1 that records, on its own clock, every call it gets, how many were
in flight at once (in all and per partition key) and when each began."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import daybook
from daybook import Context
from daybook.demo.agent import http_json


@daybook.tool(idempotent=True)
def hold(*, meter: str, part: str, seconds: float, idempotency_key: str) -> Any:
    """One call to the meter, which holds it open for `seconds` (`part`: its partition key)."""
    return http_json("POST", f"{meter}/hold", {"key": part, "seconds": seconds}, idempotency_key)


@daybook.workflow
def held(ctx: Context, meter: str, part: str, seconds: float) -> Any:
    return ctx.effect(hold, decision=None, meter=meter, part=part, seconds=seconds)


@daybook.workflow
def tagged(ctx: Context, customer: str, n: int) -> int:
    ctx.set_attributes(customer=customer, n=n)
    return n


@daybook.workflow
def tick(ctx: Context, meter: str) -> Any:
    return ctx.effect(hold, decision=None, meter=meter, part=ctx.run_id, seconds=0.0)


class Meter:
    """The counterparty: counts concurrent calls (overall and per key) and stamps each call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        self.per_key: dict[str, int] = {}
        self.max_per_key = 0
        self.calls: list[tuple[float, str, str]] = []  # (began at, key, idempotency key)
        meter = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                meter.enter(body["key"], self.headers.get("Idempotency-Key") or "")
                time.sleep(float(body["seconds"]))
                meter.leave(body["key"])
                out = json.dumps({"ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def enter(self, key: str, idem: str) -> None:
        with self.lock:
            self.calls.append((time.time(), key, idem))
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            self.per_key[key] = self.per_key.get(key, 0) + 1
            self.max_per_key = max(self.max_per_key, self.per_key[key])

    def leave(self, key: str) -> None:
        with self.lock:
            self.inflight -= 1
            self.per_key[key] -= 1

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
