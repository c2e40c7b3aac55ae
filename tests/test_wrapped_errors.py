"""An SDK's timeout is still a timeout, and a tool's own `EffectFailed` is a certain failure.

SDKs wrap their HTTP client's errors: the openai client raises `openai.APITimeoutError` *from*
an `httpx.ReadTimeout`. Read as a certain failure, a workflow's `except EffectFailed` fallback
pays a second time for a request the counterparty already executed. The counterparty here is a
real HTTP server on 127.0.0.1 that counts its executions and holds its answer back until the
test lets it go, and the tool calls it through the real openai SDK.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import openai
import pytest

import daybook
from daybook import Absent, Confirmed, Daybook, EffectFailed, Kind, RunStatus
from daybook.journal.failure import classify

COMPLETION = {
    "id": "c-1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "paid"}}],
}


class Counterparty:
    """POST /v1/chat/completions executes (counted per Idempotency-Key) and answers only once
    `answer` is set, unless the request asks for the backup route, answered at once; an amount
    over 1000 is declined with 402 (executed, counted as a refusal). GET /status/KEY says
    whether KEY was executed (each question counted)."""

    def __init__(self) -> None:
        self.executions: dict[str, int] = {}
        self.questions = 0
        self.answer = threading.Event()
        self.lock = threading.Lock()
        party = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                key = self.headers.get("Idempotency-Key", "")
                with party.lock:
                    party.executions[key] = party.executions.get(key, 0) + 1
                if self.headers.get("X-Route") == "decline":
                    return self._reply(402, {"error": {"message": "card declined"}})
                if self.headers.get("X-Route") != "backup":
                    party.answer.wait(30)
                self._reply(200, COMPLETION)

            def do_GET(self) -> None:
                with party.lock:
                    party.questions += 1
                key = self.path.rsplit("/", 1)[1]
                done = party.executions.get(key.replace("%2F", "/"))
                self._reply(200 if done else 404, {"executed": done or 0})

            def _reply(self, code: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client timed out and hung up, as it should
                    self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def total(self) -> int:
        return sum(self.executions.values())

    def close(self) -> None:
        self.answer.set()
        self.http.shutdown()
        self.http.server_close()


@pytest.fixture
def party() -> Iterator[Counterparty]:
    p = Counterparty()
    yield p
    p.close()


def complete(url: str, key: str, route: str = "main") -> str:
    """One chat completion through the openai SDK (its own timeout, no retries of its own)."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="test", timeout=0.3, max_retries=0)
    reply = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "pay"}],
        extra_headers={"Idempotency-Key": key, "X-Route": route},
    )
    return str(reply.choices[0].message.content)


def ask(key: str, args: dict[str, Any]) -> Any:
    reply = httpx.get(f"{args['url']}/status/{key.replace('/', '%2F')}", timeout=10)
    return Absent() if reply.status_code == 404 else Confirmed("paid")


@daybook.tool(retry=daybook.Retry(max_attempts=2, backoff=0.01))
def pay_by_model(*, url: str, idempotency_key: str) -> str:
    return complete(url, idempotency_key)


@daybook.tool(status=ask, retry=daybook.Retry(max_attempts=2, backoff=0.01))
def pay_by_model_asking(*, url: str, idempotency_key: str) -> str:
    return complete(url, idempotency_key)


@daybook.tool(retry=daybook.Retry(max_attempts=2, backoff=0.01))
def pay_by_backup(*, url: str, idempotency_key: str) -> str:
    return complete(url, idempotency_key, route="backup")


@daybook.workflow(name="wrapped_fallback")
def pay_with_fallback(ctx: daybook.Context, url: str, asking: bool) -> str:
    """The README's pattern: a certain failure takes another path."""
    try:
        return str(ctx.effect(pay_by_model_asking if asking else pay_by_model, url=url))
    except EffectFailed:
        return str(ctx.effect(pay_by_backup, url=url))


def test_without_daybook_an_sdk_timeout_taken_for_a_failure_pays_twice(party: Counterparty) -> None:
    """The control: the same fallback, written by hand, executes at the counterparty twice."""
    try:
        complete(party.url, "plain")
    except openai.APIError:
        complete(party.url, "plain-backup", route="backup")
    assert party.total() == 2


def test_an_sdk_timeout_wrapping_an_http_timeout_never_takes_the_fallback(
    book: Daybook, party: Counterparty
) -> None:
    with pytest.raises(daybook.NeedsAttention, match="pay_by_model"):
        book.run(pay_with_fallback, party.url, False, run_id="sdk")
    party.answer.set()
    assert party.total() == 1  # the counterparty's own count: no backup payment
    assert book.get_run("sdk").status == RunStatus.NEEDS_ATTENTION
    outcome = next(e for e in book.journal("sdk") if e.kind == Kind.OUTCOME)
    assert outcome.status == "unknown" and outcome.data["error"]["type"] == "APITimeoutError"


def test_an_sdk_timeout_on_a_tool_that_can_ask_is_resolved_by_asking(
    book: Daybook, party: Counterparty
) -> None:
    assert book.run(pay_with_fallback, party.url, True, run_id="asked") == "paid"
    party.answer.set()
    assert party.total() == 1 and party.questions == 1
    outcomes = [e.status for e in book.journal("asked") if e.kind == Kind.OUTCOME]
    assert outcomes == ["unknown", "confirmed"]


@daybook.tool(status=ask, retry=daybook.Retry(max_attempts=2, backoff=0.01))
def charge(*, url: str, idempotency_key: str) -> str:
    try:
        return complete(url, idempotency_key, route="decline")
    except openai.APIStatusError as exc:  # the counterparty said no: certain
        raise daybook.EffectFailed("card declined") from exc


@daybook.workflow(name="declined_charge")
def pay_or_decline(ctx: daybook.Context, url: str) -> str:
    try:
        return str(ctx.effect(charge, url=url))
    except EffectFailed as exc:
        return f"declined: {exc}"


def test_a_tool_raising_effect_failed_with_a_message_fails_for_certain_once_and_is_never_asked(
    book: Daybook, party: Counterparty
) -> None:
    result = book.run(pay_or_decline, party.url, run_id="declined")
    assert result.startswith("declined") and "card declined" in result
    assert party.total() == 1 and party.questions == 0  # executed once, never asked, never re-sent
    rows = [e for e in book.journal("declined") if e.kind == Kind.OUTCOME]
    outcomes = [(e.status, e.data["error"]["type"]) for e in rows]
    assert outcomes == [("failed", "EffectFailed")]


PUBLIC_ERRORS = sorted(
    name
    for name in daybook.__all__
    if isinstance(getattr(daybook, name), type) and issubclass(getattr(daybook, name), daybook.DaybookError)
)


@pytest.mark.parametrize("name", PUBLIC_ERRORS)
def test_every_public_error_can_be_raised_with_a_message(name: str) -> None:
    cls = getattr(daybook, name)
    with pytest.raises(cls) as caught:
        raise cls("card declined")
    assert "card declined" in str(caught.value)
    assert isinstance(caught.value, daybook.DaybookError)


def _named(module: str, name: str, *bases: type[BaseException]) -> type[BaseException]:
    return type(name, bases or (Exception,), {"__module__": module})


def _raised(outer: BaseException, inner: BaseException | None, *, implicit: bool = False) -> BaseException:
    """`outer` as raised: `from inner`, or (implicit) while handling `inner`."""
    try:
        try:
            raise inner if inner is not None else RuntimeError("none")
        except BaseException:
            if implicit:
                raise outer  # noqa: B904 - the implicit context is what this builds
            raise outer from inner
    except BaseException as exc:
        return exc


REQUEST = httpx.Request("POST", "http://127.0.0.1:1/v1/x")


def test_the_cause_chain_decides_what_a_wrapped_error_means() -> None:
    sdk_timeout = _raised(openai.APITimeoutError(request=REQUEST), httpx.ReadTimeout("t", request=REQUEST))
    assert classify(sdk_timeout) == "unknown"
    never_connected = _raised(openai.APIConnectionError(request=REQUEST), httpx.ConnectError("refused"))
    assert classify(never_connected) == "transient"
    dropped = _raised(openai.APIConnectionError(request=REQUEST), httpx.RemoteProtocolError("cut"))
    assert classify(dropped) == "unknown"
    assert classify(openai.APIConnectionError(request=REQUEST)) == "unknown"  # nothing wrapped: maybe sent
    # The application's own error, raised while handling a timeout: the request may still have landed.
    assert classify(_raised(ValueError("bad reply"), TimeoutError("t"), implicit=True)) == "unknown"
    # `raise ... from None` says the context is beside the point.
    hidden = _raised(ValueError("bad"), TimeoutError("t"), implicit=True)
    hidden.__suppress_context__ = True
    assert classify(hidden) == "failed"
    # A status error is an answer, whatever it was raised while handling.
    assert classify(_raised(_named("httpx", "HTTPStatusError")("402"), TimeoutError("t"))) == "failed"
    # A cycle in the chain ends the walk.
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    assert classify(a) == "failed"
    assert classify(_raised(daybook.EffectFailed("declined"), TimeoutError("t"))) == "failed"


def test_timeouts_and_connection_errors_of_other_clients_are_read_by_name() -> None:
    anthropic_conn = _named("anthropic._exceptions", "APIConnectionError")
    anthropic_timeout = _named("anthropic._exceptions", "APITimeoutError", anthropic_conn)
    assert classify(anthropic_timeout("t")) == "unknown"
    assert classify(_raised(anthropic_conn("c"), _named("httpx", "ConnectError")("refused"))) == "transient"
    assert classify(_named("google.api_core.exceptions", "DeadlineExceeded")("t")) == "unknown"
    assert classify(_named("stripe._error", "APIConnectionError")("t")) == "unknown"

    rpc_error = _named("grpc", "RpcError")

    def grpc_error(code: str) -> BaseException:
        status = type("StatusCode", (), {"name": code})()
        members = {"__module__": "grpc._channel", "code": lambda self: status}
        return type("_InactiveRpcError", (rpc_error,), members)()

    assert classify(grpc_error("DEADLINE_EXCEEDED")) == "unknown"
    assert classify(grpc_error("UNAVAILABLE")) == "unknown"
    assert classify(grpc_error("INVALID_ARGUMENT")) == "failed"
