"""What an exception says about delivery: the standard library's and the common network
clients' errors, read by class name along the exception's chain.

A timeout or a connection dropped mid-exchange means the request may have been executed
(`unknown`); a failure to connect at all means it certainly was not sent (`transient`); an
answer from the counterparty (an HTTP status error) means it answered (`failed`). Each client
names these its own way, so they are recognised by (top-level package, class name) along the
exception's MRO, without importing any of the libraries (they are optional). The first class
of the MRO found in a table decides, so a connect timeout (a subclass of both "timeout" and
"connection error" in requests) is read as the more specific "never connected".

SDKs wrap their HTTP client's errors (`openai.APITimeoutError` is raised `from` an
`httpx.ReadTimeout`), and application code re-raises its own exceptions while handling a
network error. So the exception is read along its chain: `__cause__`, `__context__` (unless
`raise ... from None` suppressed it), and the `reason`/first argument urllib, urllib3 and
requests keep their cause in. The first link that is a leaf (a specific timeout, refusal or
answer) decides; a wrapper (an SDK's or requests' generic error) decides only when nothing it
wraps does.
"""

from __future__ import annotations

from collections.abc import Iterator

UNKNOWN = "unknown"
TRANSIENT = "transient"
FAILED = "failed"

# Never connected, or never got a connection: the request did not leave this process.
NOT_SENT = frozenset(
    {
        ("builtins", "ConnectionRefusedError"),
        ("socket", "gaierror"),
        ("requests", "ConnectTimeout"),
        ("urllib3", "ConnectTimeoutError"),  # NewConnectionError and NameResolutionError too
        ("urllib3", "NewConnectionError"),
        ("httpx", "ConnectError"),
        ("httpx", "ConnectTimeout"),
        ("httpx", "PoolTimeout"),
        ("httpcore", "ConnectError"),
        ("httpcore", "ConnectTimeout"),
        ("httpcore", "PoolTimeout"),
        ("aiohttp", "ClientConnectorError"),
        ("aiohttp", "ConnectionTimeoutError"),
        ("botocore", "EndpointConnectionError"),
        ("botocore", "ConnectTimeoutError"),
    }
)

# Sent (or possibly sent) and no answer came: the counterparty may have acted.
MAYBE_SENT = frozenset(
    {
        ("builtins", "TimeoutError"),  # socket.timeout, asyncio.TimeoutError
        ("builtins", "ConnectionError"),  # reset, aborted, broken pipe
        ("http", "RemoteDisconnected"),
        ("http", "IncompleteRead"),
        ("http", "BadStatusLine"),
        ("requests", "Timeout"),  # ReadTimeout
        ("requests", "ChunkedEncodingError"),
        ("urllib3", "TimeoutError"),  # ReadTimeoutError
        ("urllib3", "ProtocolError"),
        ("urllib3", "IncompleteRead"),
        ("httpx", "TimeoutException"),  # ReadTimeout, WriteTimeout
        ("httpx", "NetworkError"),  # ReadError, WriteError, CloseError
        ("httpx", "RemoteProtocolError"),
        ("httpcore", "TimeoutException"),
        ("httpcore", "NetworkError"),
        ("httpcore", "RemoteProtocolError"),
        ("aiohttp", "ServerTimeoutError"),
        ("aiohttp", "ClientConnectionError"),  # ServerDisconnectedError, ClientOSError
        ("aiohttp", "ClientPayloadError"),
        ("botocore", "ReadTimeoutError"),
        ("botocore", "ConnectionClosedError"),
        ("botocore", "HTTPClientError"),
        ("botocore", "ConnectionError"),
        ("asyncio", "TimeoutError"),
        ("asyncio", "IncompleteReadError"),
        ("google", "DeadlineExceeded"),  # google-api-core
        ("google", "ServiceUnavailable"),
    }
)

# The counterparty answered (a status code, a refusal): not a delivery question.
ANSWERED = frozenset(
    {
        ("urllib", "HTTPError"),
        ("requests", "HTTPError"),
        ("httpx", "HTTPStatusError"),
        ("aiohttp", "ClientResponseError"),
        ("botocore", "ClientError"),
        ("openai", "APIStatusError"),
        ("anthropic", "APIStatusError"),
    }
)

# Generic errors whose cause says more than they do. Their own reading applies only when
# nothing they wrap is recognised.
WRAPPERS = {
    ("urllib", "URLError"): UNKNOWN,
    ("urllib3", "MaxRetryError"): None,
    ("requests", "ConnectionError"): UNKNOWN,  # "Connection aborted", a reset mid-exchange
    ("openai", "APITimeoutError"): UNKNOWN,
    ("openai", "APIConnectionError"): UNKNOWN,
    ("anthropic", "APITimeoutError"): UNKNOWN,
    ("anthropic", "APIConnectionError"): UNKNOWN,
    ("stripe", "APIConnectionError"): UNKNOWN,
    ("google", "RetryError"): UNKNOWN,
}

# gRPC carries the meaning in the status code, not the class (grpc.RpcError, AioRpcError).
_GRPC_MAYBE_SENT = frozenset({"DEADLINE_EXCEEDED", "UNAVAILABLE", "CANCELLED", "UNKNOWN"})

# A chain longer than this is not one anybody wrote by hand; stop reading there.
_MAX_LINKS = 32


def read(exc: BaseException) -> str | None:
    """`unknown`, `transient`, `failed` (an answer), or None when nothing in the exception's
    chain is recognised."""
    fallback: str | None = None
    for link in chain(exc):
        verdict, wrapper = _own(link)
        if wrapper:
            fallback = fallback or verdict
        elif verdict is not None:
            return verdict
    return fallback


def chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it was raised from or while handling, outermost first, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo and len(seen) < _MAX_LINKS:
        link = todo.pop(0)
        if id(link) in seen:
            continue  # a cycle (an exception set as its own cause's context)
        seen.add(id(link))
        yield link
        todo.extend(_causes(link))


def _causes(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        found.append(reason)
    first = exc.args[0] if exc.args else None
    if isinstance(first, BaseException):
        found.append(first)
    if exc.__cause__ is not None:
        found.append(exc.__cause__)
    if exc.__context__ is not None and not exc.__suppress_context__:
        found.append(exc.__context__)
    return found


def _own(exc: BaseException) -> tuple[str | None, bool]:
    """This exception's reading alone, and whether it is a wrapper (its chain decides first)."""
    for cls in type(exc).__mro__:
        name = (cls.__module__.split(".", 1)[0], cls.__name__)
        if name in NOT_SENT:
            return TRANSIENT, False
        if name in WRAPPERS:
            return WRAPPERS[name], True
        if name in MAYBE_SENT:
            return UNKNOWN, False
        if name in ANSWERED:
            return FAILED, False
        if name == ("grpc", "RpcError"):
            return _grpc(exc), False
    return None, False


def _grpc(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    try:
        name = str(getattr(code(), "name", "")) if callable(code) else ""
    except Exception:  # a half-built error: its code is not readable, so assume the worst
        return UNKNOWN
    return UNKNOWN if name in _GRPC_MAYBE_SENT else FAILED
