"""The real local counterparties the scripted agents act on, and the fault switchboard.

One SQLite file per domain holds the counterparty's durable state (every table keyed by `run`),
the armed faults and the data version a "stale cache" refresh bumps. Navigation and diagnosis
reach theirs through an HTTP service on 127.0.0.1 (`Service`); schedule invitations go through
daybook's email adapter to an SMTP server on 127.0.0.1 (`Sink`). The audit reads these, never the
journal.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from aiosmtpd.controller import Controller

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS faults (run TEXT, site TEXT, remaining INTEGER, drift INTEGER, raw TEXT)",
    "CREATE TABLE IF NOT EXISTS version (run TEXT PRIMARY KEY, v INTEGER)",
    "CREATE TABLE IF NOT EXISTS records (run TEXT, entity TEXT, value TEXT, based_on TEXT, key TEXT)",
    "CREATE TABLE IF NOT EXISTS confirms (run TEXT, entity TEXT, value TEXT, key TEXT)",
    "CREATE TABLE IF NOT EXISTS acts (run TEXT, what TEXT, body TEXT, key TEXT)",
)
TIMEOUT_S = 0.3  # the client's deadline: a "timeout" fault makes the service sleep past it


def connect(db: str) -> sqlite3.Connection:
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def create(db: str) -> None:
    with connect(db) as conn:
        for stmt in SCHEMA:
            conn.execute(stmt)


def arm(db: str, run: str, site: str, drift: bool, raw: str = "exception") -> None:
    """Make the action at `site` fail once in `run`; `drift`: the failure refreshes the stale
    cache, so re-deriving the producer's value afterwards gives a different one."""
    with connect(db) as conn:
        conn.execute("INSERT INTO faults VALUES (?, ?, 1, ?, ?)", (run, site, int(drift), raw))


def trip(db: str, run: str, site: str) -> str | None:
    """The raw form of the armed fault at `site` (consumed), or None."""
    with connect(db) as conn:
        row = conn.execute(
            "SELECT rowid, drift, raw FROM faults WHERE run=? AND site=? AND remaining>0", (run, site)
        ).fetchone()
        if row is None:
            return None
        conn.execute("UPDATE faults SET remaining = remaining - 1 WHERE rowid=?", (row[0],))
        if row[1]:
            conn.execute("INSERT INTO version VALUES (?, 1) ON CONFLICT(run) DO UPDATE SET v = v + 1", (run,))
        return str(row[2])


def version(db: str, run: str) -> int:
    with connect(db) as conn:
        row = conn.execute("SELECT v FROM version WHERE run=?", (run,)).fetchone()
    return int(row[0]) if row else 0


def raise_raw(raw: str, site: str) -> None:
    """An in-process counterparty's failure in one of its raw forms (T28)."""
    if raw == "timeout":
        raise TimeoutError(f"{site}: timed out")
    if raw == "missing":
        raise KeyError(f"{site}: field 'result' missing")
    if raw == "http500":
        raise RuntimeError(f"{site}: HTTP 500 Internal Server Error")
    raise RuntimeError(f"{site}: stale cache, refused")


def rows(db: str, table: str, run: str) -> list[tuple[Any, ...]]:
    with connect(db) as conn:
        return list(conn.execute(f"SELECT * FROM {table} WHERE run=? ORDER BY rowid", (run,)))


class _Handler(BaseHTTPRequestHandler):
    """GET /candidates?run=&entity= ; POST /record, /confirm, /act (JSON bodies). A site armed
    for the posted action answers in its raw fault form: a 500, a stall past the client's
    deadline, or a body without the result field."""

    db = ""

    def log_message(self, *args: Any) -> None:  # quiet: one line per request would drown stderr
        return

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        q = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        v = version(self.db, q["run"])
        self._reply(200, {"result": candidates(q["entity"], v)})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        raw = trip(self.db, body["run"], body.get("site", ""))
        if raw == "timeout":
            time.sleep(TIMEOUT_S * 2)
            return self._reply(200, {"result": None})
        if raw == "missing":
            return self._reply(200, {"note": "no result"})
        if raw is not None:
            return self._reply(500, {"error": "stale cache"})
        self._reply(200, {"result": store(self.db, urlparse(self.path).path.strip("/"), body)})
        return None


def candidates(entity: str, v: int) -> list[str]:
    """What a query for `entity` returns at data version `v`: a refresh reorders the ranking."""
    items = [f"{entity}/opt{i}" for i in range(4)]
    return items[v % 4 :] + items[: v % 4]


def store(db: str, table: str, body: dict[str, Any]) -> str:
    """A durable write at the counterparty: consumer records are upserts (per run and entity);
    confirmations and acts append (they happen, and stay happened)."""
    run, key = body["run"], body["key"]
    with connect(db) as conn:
        if table == "record":
            conn.execute("DELETE FROM records WHERE run=? AND entity=?", (run, body["entity"]))
            conn.execute(
                "INSERT INTO records VALUES (?,?,?,?,?)",
                (run, body["entity"], body["value"], body["based_on"], key),
            )
        elif table == "confirm":
            conn.execute("INSERT INTO confirms VALUES (?,?,?,?)", (run, body["entity"], body["value"], key))
        else:
            conn.execute("INSERT INTO acts VALUES (?,?,?,?)", (run, body["what"], body["body"], key))
    return f"{table}:{key}"


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that gave up (the timeout fault) closes its socket: expected, not news


class Service:
    """The HTTP counterparty on 127.0.0.1 (a thread of this process)."""

    def __init__(self, db: str) -> None:
        handler = type("Handler", (_Handler,), {"db": db})
        self.server = _Server(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Service:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Sink:
    """An SMTP server on 127.0.0.1 keeping every accepted message (the invitations' recipients)."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.port = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(envelope.content)
        return "250 2.0.0 queued"

    def start(self) -> Sink:
        for attempt in range(5):  # a free port stays free only until somebody binds it
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = int(s.getsockname()[1])
            self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
            try:
                self.controller.start()
                return self
            except OSError:
                if attempt == 4:
                    raise
        return self

    def stop(self) -> None:
        self.controller.stop()

    def for_run(self, run: str) -> list[str]:
        return [m.decode(errors="replace") for m in self.messages if f"run={run};".encode() in m]


class Counterparty:
    """A domain's live counterparty: the `res` the tools get, how to stop it, and the mail the
    SMTP sink accepted for a run (empty where the domain sends none)."""

    def __init__(self, res: dict[str, str], stop: Any, sink: Sink | None = None) -> None:
        self.res, self._stop, self.sink = res, stop, sink

    def mail(self, run: str) -> list[str]:
        return self.sink.for_run(run) if self.sink else []

    def stop(self) -> None:
        self._stop()
