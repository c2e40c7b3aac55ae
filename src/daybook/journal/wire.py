"""What the common network clients' exceptions say about delivery, read by class name.

A timeout or a connection dropped mid-exchange means the request may have been executed
(`unknown`); a failure to connect at all means it certainly was not sent (`transient`). Each
client names these its own way, so they are recognised by (top-level package, class name)
along the exception's MRO, without importing any of the libraries. The first class of the MRO
found in either table decides, so a connect timeout (a subclass of both "timeout" and
"connection error" in requests) is read as the more specific "never connected".
"""

from __future__ import annotations

# Never connected, or never got a connection: the request did not leave this process.
NOT_SENT = frozenset(
    {
        ("requests", "ConnectTimeout"),
        ("urllib3", "ConnectTimeoutError"),  # NewConnectionError and NameResolutionError too
        ("urllib3", "NewConnectionError"),
        ("httpx", "ConnectError"),
        ("httpx", "ConnectTimeout"),
        ("httpx", "PoolTimeout"),
        ("aiohttp", "ClientConnectorError"),
        ("aiohttp", "ConnectionTimeoutError"),
        ("botocore", "EndpointConnectionError"),
        ("botocore", "ConnectTimeoutError"),
    }
)

# Sent (or possibly sent) and no answer came: the counterparty may have acted.
MAYBE_SENT = frozenset(
    {
        ("requests", "Timeout"),  # ReadTimeout
        ("requests", "ConnectionError"),  # "Connection aborted", a reset mid-exchange
        ("requests", "ChunkedEncodingError"),
        ("urllib3", "TimeoutError"),  # ReadTimeoutError
        ("urllib3", "ProtocolError"),
        ("urllib3", "IncompleteRead"),
        ("httpx", "TimeoutException"),  # ReadTimeout, WriteTimeout
        ("httpx", "NetworkError"),  # ReadError, WriteError, CloseError
        ("httpx", "RemoteProtocolError"),
        ("aiohttp", "ServerTimeoutError"),
        ("aiohttp", "ClientConnectionError"),  # ServerDisconnectedError, ClientOSError
        ("aiohttp", "ClientPayloadError"),
        ("botocore", "ReadTimeoutError"),
        ("botocore", "ConnectionClosedError"),
        ("botocore", "HTTPClientError"),
        ("botocore", "ConnectionError"),
        ("asyncio", "TimeoutError"),
        ("asyncio", "IncompleteReadError"),
    }
)

# Wrappers whose cause says more than they do (urllib3's retry wrapper, requests' errors).
_WRAPPERS = frozenset({("urllib3", "MaxRetryError"), ("requests", "ConnectionError")})


def read(exc: BaseException, depth: int = 0) -> str | None:
    """`transient`, `unknown`, or None when no known network client's class is in the MRO."""
    for cls in type(exc).__mro__:
        name = (cls.__module__.split(".", 1)[0], cls.__name__)
        if name in NOT_SENT:
            return "transient"
        if name in _WRAPPERS and depth < 3:
            inner = _cause(exc)
            if inner is not None and read(inner, depth + 1) == "transient":
                return "transient"
        if name in MAYBE_SENT:
            return "unknown"
    return None


def _cause(exc: BaseException) -> BaseException | None:
    reason = getattr(exc, "reason", None)
    if isinstance(reason, BaseException):
        return reason
    first = exc.args[0] if exc.args else None
    return first if isinstance(first, BaseException) else None
