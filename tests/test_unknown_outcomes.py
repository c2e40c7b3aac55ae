"""Unknown means unknown: a timeout or a dropped connection from a real HTTP client is never read
as a certain failure, a tool that can ask the counterparty asks, and no question hangs forever.

The counterparty is a real HTTP server on 127.0.0.1 that executes a payment and holds its answer
back until the test lets it go, so the client's timeout fires every time, whatever the load."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
import urllib3

import daybook
from daybook import Absent, Confirmed, Daybook, EffectFailed, Kind, NeedsAttention, RunStatus
from daybook.journal.failure import classify


class Server:
    """Payments by Idempotency-Key. POST executes (counted) and answers only once `answer` is set
    (the backup route at once);
    GET /payments/KEY answers at once (or, with `hang_status`, never before `answer`)."""

    def __init__(self) -> None:
        self.executions: dict[str, int] = {}
        self.answer = threading.Event()
        self.hang_status = False
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers["Idempotency-Key"]
                if body["amount"] > 1000:
                    return self._reply(402, {"error": "declined"})
                with server.lock:
                    server.executions[key] = server.executions.get(key, 0) + 1
                if self.headers.get("X-Route") != "backup":  # the backup route answers at once
                    server.answer.wait(30)
                self._reply(200, {"id": f"P-{key}", "amount": body["amount"]})

            def do_GET(self) -> None:
                if server.hang_status:
                    server.answer.wait(30)
                key = self.path.rsplit("/", 1)[1].replace("%2F", "/")
                if key not in server.executions:
                    return self._reply(404, {})
                self._reply(200, {"id": f"P-{key}", "executed": server.executions[key]})

            def _reply(self, code: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.answer.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def ask(key: str, args: dict[str, Any]) -> Any:
    reply = requests.get(f"{args['server']}/payments/{key.replace('/', '%2F')}", timeout=10)
    return Absent() if reply.status_code == 404 else Confirmed(reply.json(), ref=reply.json()["id"])


def post(server: str, amount: int, key: str, timeout: float | None, route: str = "main") -> Any:
    headers = {"Idempotency-Key": key, "X-Route": route}
    reply = requests.post(f"{server}/payments", json={"amount": amount}, headers=headers, timeout=timeout)
    reply.raise_for_status()
    return reply.json()


@daybook.tool(status=ask)
def pay(*, server: str, amount: int, idempotency_key: str) -> Any:
    return post(server, amount, idempotency_key, timeout=0.3)


@daybook.tool(status=ask)
def pay_by_backup_route(*, server: str, amount: int, idempotency_key: str) -> Any:
    return post(server, amount, idempotency_key, timeout=0.3, route="backup")


@daybook.workflow
def pay_with_fallback(ctx: daybook.Context, server: str, amount: int) -> Any:
    """The README's pattern: a certain failure takes another path."""
    try:
        return ctx.effect(pay, server=server, amount=amount)
    except EffectFailed:
        return ctx.effect(pay_by_backup_route, server=server, amount=amount)


def _history(book: Daybook, run_id: str) -> list[tuple[str, str | None, str | None]]:
    return [(e.kind, e.name, e.status) for e in book.journal(run_id) if e.kind in (Kind.INTENT, Kind.OUTCOME)]


def test_a_requests_timeout_is_unknown_and_resolved_by_status_so_the_fallback_never_pays_twice(
    book: Daybook, server: Server
) -> None:
    result = book.run(pay_with_fallback, server.url, 250, run_id="late")
    assert sum(server.executions.values()) == 1  # the counterparty's own count: paid once
    assert result["id"] == "P-late/1"
    assert _history(book, "late") == [
        ("intent", "pay", None),
        ("outcome", "pay", "unknown"),
        ("outcome", "pay", "confirmed"),
    ]
    unknown, confirmed = [e for e in book.journal("late") if e.kind == Kind.OUTCOME]
    assert unknown.data["error"]["type"] == "ReadTimeout"
    assert confirmed.data["resolved_by"] == "status"


def test_an_act_that_hangs_is_cut_off_by_the_retry_timeout_and_resolved_by_status(
    book: Daybook, server: Server
) -> None:
    @daybook.tool(status=ask, retry=daybook.Retry(timeout=0.3))
    def pay_no_client_timeout(*, server: str, amount: int, idempotency_key: str) -> Any:
        return post(server, amount, idempotency_key, timeout=None)  # would wait for ever

    @daybook.workflow
    def hangs(ctx: daybook.Context, server: str) -> Any:
        return ctx.effect(pay_no_client_timeout, server=server, amount=5)

    assert book.run(hangs, server.url, run_id="hang")["id"] == "P-hang/1"
    assert sum(server.executions.values()) == 1
    assert [s for _, _, s in _history(book, "hang")] == [None, "unknown", "confirmed"]


def test_an_exception_the_tool_cannot_vouch_for_is_unknown_when_the_counterparty_can_be_asked(
    book: Daybook, server: Server
) -> None:
    server.answer.set()

    @daybook.tool(status=ask)
    def pay_then_break(*, server: str, amount: int, idempotency_key: str) -> Any:
        post(server, amount, idempotency_key, timeout=10)
        raise RuntimeError("proxy reset the stream")  # after the payment went through

    @daybook.workflow
    def breaks(ctx: daybook.Context, server: str) -> Any:
        return ctx.effect(pay_then_break, server=server, amount=5)

    assert book.run(breaks, server.url, run_id="reset")["executed"] == 1
    assert [s for _, _, s in _history(book, "reset")] == [None, "unknown", "confirmed"]


class Declined(Exception):
    """The counterparty said no: nothing happened."""


def test_a_failure_the_tool_declares_certain_is_failed_and_may_take_another_path(
    book: Daybook, server: Server
) -> None:
    server.answer.set()

    @daybook.tool(status=ask, certain=(Declined, 402))
    def pay_or_decline(*, server: str, amount: int, idempotency_key: str) -> Any:
        if amount < 0:
            raise Declined("negative amount")
        return post(server, amount, idempotency_key, timeout=10)

    @daybook.workflow
    def tries(ctx: daybook.Context, server: str, amount: int) -> str:
        try:
            ctx.effect(pay_or_decline, server=server, amount=amount)
        except EffectFailed as exc:
            return str(exc.error["type"])
        return "paid"

    assert book.run(tries, server.url, -1, run_id="declined") == "Declined"
    assert book.run(tries, server.url, 5000, run_id="http-402") == "HTTPError"  # a named 4xx
    assert server.executions == {}
    assert [s for _, _, s in _history(book, "http-402")] == [None, "failed"]
    assert pay_or_decline.profile()["certain"] == ["Declined", 402]


def test_a_status_query_that_hangs_times_out_and_the_run_is_parked_not_held(
    book: Daybook, server: Server
) -> None:
    server.hang_status = True

    @daybook.tool(status=ask, retry=daybook.Retry(query_timeout=0.2, reconcile_rounds=2, backoff=0.01))
    def pay_slow_status(*, server: str, amount: int, idempotency_key: str) -> Any:
        return post(server, amount, idempotency_key, timeout=0.3)

    @daybook.workflow
    def stuck_counterparty(ctx: daybook.Context, server: str) -> Any:
        return ctx.effect(pay_slow_status, server=server, amount=5)

    with pytest.raises(NeedsAttention, match="after 2 queries"):
        book.run(stuck_counterparty, server.url, run_id="mute")
    info = book.get_run("mute")
    assert info.status == RunStatus.NEEDS_ATTENTION and info.lease_owner is None
    assert sum(server.executions.values()) == 1


def test_timeouts_and_dropped_connections_of_common_http_clients_are_unknown() -> None:
    def named(module: str, name: str, *bases: type[BaseException]) -> type[BaseException]:
        return type(name, bases or (Exception,), {"__module__": module})

    # httpx, aiohttp and botocore are recognised by class name: built here with their names.
    httpx_timeout = named("httpx", "TimeoutException")
    aiohttp_conn = named("aiohttp.client_exceptions", "ClientConnectionError", OSError)
    botocore_conn = named("botocore.exceptions", "ConnectionError")
    unknown = [
        requests.exceptions.ReadTimeout("read timed out"),
        requests.exceptions.ConnectionError("Connection aborted."),
        requests.exceptions.ChunkedEncodingError("cut"),
        urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),
        urllib3.exceptions.ProtocolError("Connection aborted."),
        named("httpx", "ReadTimeout", httpx_timeout)("timed out"),
        named("httpx", "RemoteProtocolError")("peer closed connection"),
        named("aiohttp.client_exceptions", "ServerDisconnectedError", aiohttp_conn)("gone"),
        named("botocore.exceptions", "ReadTimeoutError", botocore_conn)("timed out"),
        named("asyncio.exceptions", "IncompleteReadError", EOFError)("short"),
        TimeoutError("timed out"),
    ]
    assert {type(e).__name__: classify(e) for e in unknown} == {type(e).__name__: "unknown" for e in unknown}
    not_sent = [
        requests.exceptions.ConnectTimeout("connect timed out"),
        named("httpx", "ConnectError")("refused"),
        named("botocore.exceptions", "EndpointConnectionError", botocore_conn)("no route"),
    ]
    assert {classify(e) for e in not_sent} == {"transient"}
    try:  # a real refused connection through requests: certainly not sent, so retried
        requests.get("http://127.0.0.1:1/", timeout=5)
    except requests.exceptions.ConnectionError as exc:
        assert classify(exc) == "transient"
    assert classify(ValueError("bad")) == "failed"


def test_queries_have_a_timeout_by_default_and_acts_none() -> None:
    # An act's call runs in the caller's thread unless a timeout is asked for (a hand-off to a
    # helper thread per call is the price of one); a query is bounded by default.
    assert daybook.Retry().query_timeout == 30.0 and daybook.Retry().timeout is None
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(daybook.ConfigError):
            daybook.Retry(query_timeout=bad)
