"""What stands between the network and the inspector's routes: which Host names it answers, which
Origin may send it a POST, and the security headers on every answer.

- **Host** (DNS rebinding): a page on another site can make its own name resolve to 127.0.0.1 and
  read the inspector with the browser's help; such requests carry the attacker's name as Host.
  Only the loopback names, the address the server listens on and the names `--allowed-host`
  adds are answered (Starlette's `TrustedHostMiddleware`); any other Host is a 400.
- **Origin** (CSRF, login CSRF): a POST (sign-in, sign-out, every action) whose Origin, or
  failing that Referer, names another origin than the Host it was sent to is refused with a 403
  before its body is read. A request with neither (curl, a script) is let through: the session
  cookie (SameSite=Strict) and the form's CSRF token still guard every act.
- **Headers**: Content-Security-Policy (scripts from the inspector itself only, its one inline
  stylesheet by hash, no framing, forms post to itself), X-Frame-Options DENY,
  X-Content-Type-Options nosniff, Referrer-Policy same-origin.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConfigError
from .html import STYLE

# The names a browser on this machine reaches a loopback-bound inspector by.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Starlette's TestClient sends `Host: testserver`; not a name DNS gives out, so an embedding's
# default (`build(book)`) answers it too. `daybook web` never does (`hosts_for`).
TEST_HOST = "testserver"
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORT = {"http": "80", "https": "443"}


def _style_hash() -> str:
    digest = hashlib.sha256(STYLE.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        f"style-src {_style_hash()}",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)
HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def host_name(value: str) -> str:
    """An `--allowed-host` value as the Host check compares it: a name, an IPv4 address, an IPv6
    address (bracketed or not) or `*.domain`; lower case, without a port."""
    text = value.strip().lower()
    if text.count(":") >= 2 and not text.startswith("["):
        text = f"[{text}]"  # a bare IPv6 address, as it appears in a Host header
    elif text.startswith("[") and "]:" in text:
        text = text[: text.index("]") + 1]
    elif ":" in text and not text.startswith("["):
        text = text.split(":", 1)[0]  # name:port: the check looks at the name only
    wild = text.startswith("*.") and "*" not in text[1:]
    if not text or text == "*" or ("*" in text and not wild) or any(c in text for c in "/ ?#@"):
        raise ConfigError(
            f"--allowed-host {value!r} is not a host name: give a name (inspector.lan), an "
            "address (192.168.1.4, [fd00::4]) or a subdomain pattern (*.corp.example); "
            "a bare '*' is refused (it would answer any site)"
        )
    return text


def hosts_for(host: str, extra: Sequence[str] = ()) -> list[str]:
    """The Host names `daybook web --host HOST` answers: the loopback names, HOST, and `extra`."""
    return list(dict.fromkeys([*LOCAL_HOSTS, host_name(host), *(host_name(h) for h in extra)]))


def middleware(allowed_hosts: Sequence[str]) -> list[Middleware]:
    """Headers outermost (so a refusal carries them too), then Host, then Origin."""
    return [
        Middleware(SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts), www_redirect=False),
        Middleware(SameOrigin),
    ]


class SecurityHeaders:
    """Adds `HEADERS` to every HTTP answer (pages, the JSON API, the live stream, refusals)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


class SameOrigin:
    """Refuses a state-changing request that a page of another origin sent (403)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in _SAFE:
            refusal = cross_origin(Headers(scope=scope))
            if refusal:
                await PlainTextResponse(refusal, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def cross_origin(headers: Headers) -> str:
    """Why this request comes from another origin than the Host it was sent to ("" if it does
    not, or says nothing of where it comes from)."""
    if headers.get("sec-fetch-site") == "cross-site":
        return "refused: a page of another site sent this request (Sec-Fetch-Site: cross-site)"
    claimed = headers.get("origin") or headers.get("referer")
    if claimed is None:
        return ""
    parts = urlsplit(claimed)
    host = headers.get("host", "")
    known = claimed != "null" and parts.scheme in _DEFAULT_PORT
    if known and _netloc(parts.netloc, parts.scheme) == _netloc(host, parts.scheme):
        return ""
    return f"refused: this request comes from {claimed[:200]!r}, not from this inspector ({host[:200]})"


def _netloc(value: str, scheme: str) -> str:
    text = value.lower()
    default = ":" + _DEFAULT_PORT[scheme]
    return text[: -len(default)] if text.endswith(default) else text
