"""The workflow the worker load test runs: N payments against the bank, each keyed, reconcilable.

The tool keeps one HTTP/1.1 connection per worker thread, as a production HTTP client would;
a connection that went stale fails as a dropped connection, which daybook reads as `unknown`
and resolves by asking the bank, so reuse never risks a double payment.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

import daybook
from daybook.demo.agent import status_of

_local = threading.local()


def _post(bank: str, path: str, body: Any, key: str) -> Any:
    conn: http.client.HTTPConnection | None = getattr(_local, "conn", None)
    if conn is None:
        parts = urlsplit(bank)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
        _local.conn = conn
    try:
        conn.request(
            "POST", path, json.dumps(body), {"Content-Type": "application/json", "Idempotency-Key": key}
        )
        resp = conn.getresponse()
        data = resp.read()
    except BaseException:
        conn.close()
        _local.conn = None
        raise
    if resp.status >= 500:
        raise daybook.TransientError(f"HTTP {resp.status}")
    if resp.status >= 400:
        raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
    return json.loads(data)


@daybook.tool(reconcile=status_of("payments"))
def load_pay(*, bank: str, n: int, idempotency_key: str) -> Any:
    return _post(bank, "/payments", {"n": n}, idempotency_key)


@daybook.workflow(name="load_run")
def load_run(ctx: daybook.Context, bank: str, effects: int) -> int:
    for n in range(effects):
        ctx.effect(load_pay, bank=bank, n=n)
    return effects
