"""Small HTTP services on 127.0.0.1 (stdlib ThreadingHTTPServer, each over its own SQLite
database): a shop/forum app (the WebArena stand-in), a retail API with lookup, cancel, modify,
return and exchange (the τ-bench stand-in) and a travel provider with hold/cancel (Fig. 1).

Every mutating request may carry an Idempotency-Key, which the service dedupes and answers
status queries about. `HttpStore` is the client: the same `Store` shape as resources.py, with no
snapshot (the server's rows are not client-side state)."""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from resources import MISSING, Op, SqliteStore

# Each app's verbs, and what each does to its row: the verb names are the app's API.
VERBS = {
    "shop": {"add_to_cart": "add", "set_field": "set", "post_reply": "set", "view": "read"},
    "retail": {
        "lookup": "read",
        "cancel": "set",
        "modify": "set",
        "return": "add",
        "exchange": "set",
    },
}


class _Handler(BaseHTTPRequestHandler):
    server: Service

    def log_message(self, *args: Any) -> None:  # quiet: the benchmark prints its own progress
        return None

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/status":
            got = self.server.store.status(query["key"])
            self._reply(200, {"applied": got is not MISSING, "before": None if got is MISSING else got})
        elif url.path == "/state":
            self._reply(200, self.server.store.state())
        elif url.path == "/holds":
            self._reply(200, self.server.holds())
        else:
            self._reply(404, {"error": "no such path"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = self.headers.get("Idempotency-Key")
        path = self.path.strip("/")
        try:
            self._reply(200, self.server.handle(path, body, key))
        except KeyError as e:
            self._reply(404, {"error": f"unknown {e}"})


class Service(ThreadingHTTPServer):
    """One app on an ephemeral port of 127.0.0.1, served from a daemon thread."""

    daemon_threads = True

    def __init__(self, app: str, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.app = app
        root.mkdir(parents=True, exist_ok=True)
        self.store = SqliteStore(root / f"{app}.db")
        self._holds: dict[str, dict[str, Any]] = {}
        self._hold_keys: dict[str, str] = {}
        self._lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True).start()

    def handle(self, path: str, body: dict[str, Any], key: str | None) -> Any:
        if path == "undo":
            self.store.undo(body["name"], body["before"])
            return {"ok": True}
        if path in ("hold", "cancel_hold"):
            return self._travel(path, body, key)
        verb = VERBS[self.app][path]
        return {"before": self.store.apply(Op(verb, body["name"], body["value"]), key)}

    def _travel(self, path: str, body: dict[str, Any], key: str | None) -> Any:
        with self._lock:
            if path == "cancel_hold":
                self._holds.pop(body["hold"], None)
                return {"ok": True}
            if key is not None and key in self._hold_keys:
                return self._holds.get(self._hold_keys[key], {"id": self._hold_keys[key]})
            hold = {"id": f"H{len(self._hold_keys) + len(self._holds) + 1}-{body['branch']}"}
            hold |= {"branch": body["branch"], "price": body["price"]}
            self._holds[hold["id"]] = hold
            if key is not None:
                self._hold_keys[key] = hold["id"]
            return hold

    def holds(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._holds.values())

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def post(url: str, body: dict[str, Any], key: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"} | ({"Idempotency-Key": key} if key else {})
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


class HttpStore:
    """The `Store` shape over a Service: each op a request to the app's own verb."""

    def __init__(self, service: Service) -> None:
        self.base = service.url
        # The app verb that performs a generic set/add/read on this service.
        table = VERBS[service.app]
        self.verb_for = {generic: verb for verb, generic in table.items()}

    def apply(self, op: Op, key: str | None) -> Any:
        verb = op.api or self.verb_for[op.verb]
        return post(f"{self.base}/{verb}", {"name": op.name, "value": op.value}, key)["before"]

    def undo(self, name: str, before: Any) -> None:
        post(f"{self.base}/undo", {"name": name, "before": before})

    def status(self, key: str) -> Any:
        got = get(f"{self.base}/status?key={urllib.parse.quote(key)}")
        return got["before"] if got["applied"] else MISSING

    def state(self) -> dict[str, int]:
        rows: dict[str, int] = get(f"{self.base}/state")
        return rows

    def snapshot(self) -> Any:
        return None

    def restore(self, snap: Any) -> None:
        return None
