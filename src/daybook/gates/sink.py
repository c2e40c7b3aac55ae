"""Where approval requests are sent: a webhook (JSON, signed with HMAC-SHA256) and the log.

Sinks come from the process's configuration only (`Daybook(notify=[...])`, `daybook worker
--notify-url`, `$DAYBOOK_NOTIFY_URL`), never from a row in the store: a store someone can
write to cannot send requests (and a request's `about`) anywhere.

A webhook POST carries the request as its JSON body and three headers:
`Idempotency-Key` (the request's delivery key: a receiver drops a second delivery of a key it
has seen, which a crash between the send and its record makes possible), `Daybook-Timestamp`
and `Daybook-Signature: t=<unix seconds>,v1=<hex>`, where `v1` is
HMAC-SHA256(secret, "<t>." + body). `verify_webhook` is the receiver's check: the signature
over the exact bytes received, and a timestamp within `tolerance` seconds (a replayed old
request is refused).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ..errors import SinkConfigError
from ..records import JSON, dumps
from ..store.secrets import Secret

if TYPE_CHECKING:
    import urllib.request

SIGNATURE = "Daybook-Signature"
TIMESTAMP = "Daybook-Timestamp"
IDEMPOTENCY = "Idempotency-Key"
# A shorter HMAC key is guessable: refused with what to do.
MIN_SECRET = 16

log = logging.getLogger("daybook.outbox")


class Refused(Exception):
    """A sink refused the request for good (a 3xx or a 4xx other than 408/425/429): trying again
    is useless."""


class Sink(Protocol):
    """Something a request is delivered to: `name` (what the outbox log records; never a
    secret) and `send(request)`, which raises on a failure (`Refused` if trying again is useless)."""

    @property
    def name(self) -> str: ...

    def send(self, request: dict[str, JSON]) -> None: ...


def sign(body: bytes, secret: bytes, at: int) -> str:
    """The `Daybook-Signature` header value of `body` sent at `at` (unix seconds)."""
    mac = hmac.new(secret, f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={mac}"


def verify_webhook(
    body: bytes,
    signature: str,
    secret: str | bytes | Secret[str],
    *,
    tolerance: float = 300.0,
    now: float | None = None,
) -> bool:
    """A receiver's check of a request: True if `signature` (the `Daybook-Signature` header) is
    HMAC-SHA256 over the exact `body` bytes received with `secret`, sent within `tolerance`
    seconds of `now`. Compare in constant time; then drop a request whose `Idempotency-Key`
    was seen before."""
    key = _key_bytes(secret.reveal() if isinstance(secret, Secret) else secret)
    parts = dict(p.split("=", 1) for p in signature.split(",") if "=" in p)
    try:
        at = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - at) > tolerance:
        return False
    expected = sign(body, key, at).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


@dataclass(frozen=True)
class Webhook:
    """POST each approval request to `url` (http or https) as JSON, signed with `secret` (a
    `daybook.Secret` holding at least 16 characters; the receiver holds the same), within
    `timeout` seconds per try. `name` is what the outbox log records for this sink (default:
    the host and a digest of the URL, which may itself hold a token)."""

    url: str
    secret: Secret[str] = field(repr=False)
    timeout: float = 10.0
    label: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise SinkConfigError(
                f"a webhook URL must be http:// or https:// with a host, got {_shown_url(self.url)}; "
                "e.g. Webhook('https://hooks.example.com/daybook', secret=daybook.Secret(KEY))"
            )
        if not isinstance(self.secret, Secret):
            raise SinkConfigError(
                "the webhook's HMAC secret must be a daybook.Secret (so it is never journaled or "
                "printed): Webhook(url, secret=daybook.Secret(os.environ['HOOK_SECRET']))"
            )
        if not self.secret.available or not isinstance(self.secret.reveal(), str | bytes):
            raise SinkConfigError("the webhook's secret must hold text (the shared HMAC key)")
        if len(self.secret.reveal()) < MIN_SECRET:
            raise SinkConfigError(
                f"the webhook's HMAC secret is shorter than {MIN_SECRET} characters, which is "
                "guessable; generate one, e.g. `python -c 'import secrets; print(secrets.token_hex(32))'`"
            )
        if not (0 < float(self.timeout) <= 60):
            raise SinkConfigError(f"a webhook's timeout must be in (0, 60] seconds, got {self.timeout!r}")

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:12]
        return f"webhook:{urlsplit(self.url).hostname}#{digest}"

    def send(self, request: dict[str, JSON]) -> None:
        body = dumps(request, "an approval request").encode()
        at = int(time.time())
        headers = {
            "Content-Type": "application/json",
            IDEMPOTENCY: str(request.get("key")),
            TIMESTAMP: str(at),
            SIGNATURE: sign(body, _key_bytes(self.secret.reveal()), at),
            "User-Agent": "daybook-outbox",
        }
        # Imported here: urllib.request brings ssl, http.client and email (a tenth of the CPU
        # of starting a daybook process), and only a process that sends a webhook needs them.
        import urllib.error
        import urllib.request

        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with _opener().open(req, timeout=self.timeout) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code not in (408, 425, 429):  # a 3xx too: not followed
                raise Refused(f"HTTP {exc.code} {exc.reason}") from None
            raise OSError(f"HTTP {exc.code} {exc.reason}") from None


@dataclass(frozen=True)
class LogSink:
    """Write each approval request as one line to the `daybook.outbox` logger (INFO)."""

    name: str = "log"

    def send(self, request: dict[str, JSON]) -> None:
        log.info(
            "approval request %s: run %s gate %s (%s) waits for %s until %s",
            request.get("key"),
            request.get("run_id"),
            request.get("gate_id"),
            request.get("action"),
            request.get("approvers") or "any approver",
            request.get("deadline"),
        )


def from_env(url: str | None = None, secret_env: str | None = None) -> list[Sink]:
    """The sinks a worker's options (or `$DAYBOOK_NOTIFY_URL` and the variable named by
    `$DAYBOOK_NOTIFY_SECRET_ENV`, default `DAYBOOK_NOTIFY_SECRET`) configure: a webhook when a
    URL is given, and the log whenever any sink is."""
    url = url or os.environ.get("DAYBOOK_NOTIFY_URL") or None
    if url is None:
        return []
    var = secret_env or os.environ.get("DAYBOOK_NOTIFY_SECRET_ENV") or "DAYBOOK_NOTIFY_SECRET"
    value = os.environ.get(var)
    if not value:
        raise SinkConfigError(
            f"a webhook URL is configured but ${var} (its HMAC secret) is not set; export it "
            "(e.g. `export DAYBOOK_NOTIFY_SECRET=$(python -c 'import secrets; "
            "print(secrets.token_hex(32))')`) or name the variable with --notify-secret-env"
        )
    return [Webhook(url, secret=Secret(value)), LogSink()]


def sinks_of(value: Any) -> list[Sink]:
    """The sinks of `Daybook(notify=...)`: a list of `Webhook`/`LogSink` (or any object with a
    `name` and a `send`), checked."""
    if value is None:
        return []
    items = [value] if isinstance(value, Webhook | LogSink) else value
    if not isinstance(items, list | tuple):
        raise SinkConfigError(
            "notify= takes a list of sinks, e.g. [Webhook(url, secret=Secret(...)), LogSink()]; "
            f"got {type(value).__name__}"
        )
    for s in items:
        if not isinstance(getattr(s, "name", None), str) or not callable(getattr(s, "send", None)):
            raise SinkConfigError(
                f"{s!r} is not a sink: use daybook.Webhook(url, secret=...) or daybook.LogSink()"
            )
    names = [s.name for s in items]
    if len(set(names)) != len(names):
        raise SinkConfigError(f"two sinks share a name ({names}); give one a label=")
    return list(items)


def _key_bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _shown_url(value: object) -> str:
    if not isinstance(value, str):
        return f"{type(value).__name__} {value!r}"[:80]
    parts = urlsplit(value)
    return f"{parts.scheme or '(no scheme)'}://{parts.hostname or '(no host)'}/..."


@functools.cache
def _opener() -> urllib.request.OpenerDirector:
    """The one opener every webhook sends with (built on first use, as urllib is imported)."""
    import urllib.request

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        # A redirect would send the signed body to a host nobody configured: it is a failure.
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    return urllib.request.build_opener(_NoRedirect())
