"""The HTTP adapter: a JSON API declared as data, each endpoint a daybook tool.

Every request carries the run's key as an `Idempotency-Key` header. A timeout, a dropped
connection or a 500/502/504 leaves the outcome `unknown` (the request may have been executed);
a 503/429 or a refused connection is transient (it certainly was not); other 4xx are failures.
Unknowns are resolved by the endpoint's status path (by key), and past the counterparty's dedup
window by its lookup path (by the counterparty's own id). An `inverse` call makes the endpoint
compensable. Effect class: idempotent (or compensable with an inverse), externalized.

    api = JsonApi.from_config({
        "name": "bank", "base_url": "http://127.0.0.1:8080",
        "endpoints": {
            "wire": {"method": "POST", "path": "/wires", "status_path": "/wires/{key}",
                     "lookup_path": "/by-id/{ref}", "reference": "id", "dedup_window": 86400,
                     "inverse": {"method": "POST", "path": "/reversals"}},
        },
    })
    api.call(ctx, "wire", to="ACME", amount=100)
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daybook import (
    Absent,
    ConfigError,
    Confirmed,
    Context,
    DaybookError,
    OutcomeUnknown,
    Pending,
    ReconcileResult,
    Tool,
    TransientError,
    tool,
)

_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_FIELDS = {
    "method",
    "path",
    "status_path",
    "lookup_path",
    "reference",
    "dedup_window",
    "poll",
    "timeout",
    "inverse",
    "idempotent",
}


class Rejected(DaybookError):
    """The counterparty answered no (a 4xx other than 429): the effect failed and was not done."""


@dataclass(frozen=True)
class Endpoint:
    """One call of a JSON API. Paths may name `{key}` (the idempotency key, URL-quoted), `{ref}`
    (the counterparty's own id) and any argument of the call, e.g. `/accounts/{account}`."""

    name: str
    method: str
    path: str
    status_path: str | None = None
    lookup_path: str | None = None
    reference: str | None = None
    dedup_window: float | None = None
    poll: float | None = None
    timeout: float = 10.0
    inverse: Endpoint | None = None
    idempotent: bool = True


class JsonApi:
    """A JSON API behind Idempotency-Key: `call(ctx, endpoint, **body)` journals each request.

    Tools are registered as `<api name>.<endpoint>` when the API is built, so build it at import
    time of the workflow's module: a resuming process then finds the same tools."""

    def __init__(
        self,
        name: str,
        base_url: str,
        endpoints: Mapping[str, Endpoint],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"JsonApi {name!r}: base_url {base_url!r} must start with http:// or https://")
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.endpoints = dict(endpoints)
        self.tools: dict[str, Tool[Any]] = {n: self._tool(e) for n, e in self.endpoints.items()}

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | str | Path, *, base_url: str | None = None) -> JsonApi:
        """Build from a dict or a JSON file: `{"name", "base_url", "headers", "endpoints": {NAME:
        {method, path, status_path, lookup_path, reference, dedup_window, poll, timeout, inverse,
        idempotent}}}`; `base_url=` overrides the file's (one config, several environments)."""
        if isinstance(config, str | Path):
            try:
                config = json.loads(Path(config).read_text())
            except (OSError, ValueError) as exc:
                raise ConfigError(f"JSON API config {config}: cannot read it ({exc})") from None
        if not isinstance(config, Mapping):
            raise ConfigError("a JSON API config is a JSON object with name, base_url and endpoints")
        name = config.get("name")
        url = base_url or config.get("base_url")
        raw = config.get("endpoints")
        if not isinstance(name, str) or not isinstance(url, str) or not isinstance(raw, Mapping) or not raw:
            raise ConfigError(
                'a JSON API config needs "name" (str), "base_url" (str) and "endpoints" '
                "(an object of NAME: {method, path, ...})"
            )
        endpoints = {str(n): _endpoint(f"{name}.{n}", spec) for n, spec in raw.items()}
        return cls(name, url, endpoints, config.get("headers"))

    def tool(self, endpoint: str) -> Tool[Any]:
        try:
            return self.tools[endpoint]
        except KeyError:
            raise ConfigError(
                f"JSON API {self.name!r} has no endpoint {endpoint!r}; "
                f"it has: {', '.join(sorted(self.tools))}"
            ) from None

    def call(self, ctx: Context, endpoint: str, /, **body: Any) -> Any:
        """One journaled request: the body is the arguments; returns the decoded JSON reply."""
        return ctx.effect(self.tool(endpoint), **body)

    # -- building tools -------------------------------------------------------------------------

    def _tool(self, ep: Endpoint) -> Tool[Any]:
        api = self

        def request(*, idempotency_key: str, **body: Any) -> Any:
            return api._send(ep, ep.path, body, idempotency_key, ep.method)

        def status(key: str, args: dict[str, Any]) -> ReconcileResult:
            assert ep.status_path is not None
            return api._ask(ep, ep.status_path, {**args, "key": key})

        def lookup(ref: Any) -> ReconcileResult:
            assert ep.lookup_path is not None
            return api._ask(ep, ep.lookup_path, {"ref": ref})

        def reference(result: Any) -> Any:
            return result.get(ep.reference) if isinstance(result, dict) and ep.reference else None

        inverse = None
        if ep.inverse is not None:
            inv = ep.inverse

            def undo(*, original: dict[str, Any], result: Any, idempotency_key: str) -> Any:
                fields = {**original, "ref": reference(result)}
                return api._send(
                    inv,
                    inv.path,
                    {"original": original, "result": result},
                    idempotency_key,
                    inv.method,
                    fields,
                )

            inverse = tool(name=inv.name, idempotent=inv.idempotent, effect_class="idempotent")(undo)
        request.__name__ = ep.name
        return tool(
            name=ep.name,
            idempotent=ep.idempotent,
            status=status if ep.status_path else None,
            lookup=lookup if ep.lookup_path else None,
            reference=reference if ep.reference else None,
            dedup_window=ep.dedup_window,
            poll=ep.poll,
            inverse=inverse,
            effect_class="compensable" if inverse is not None else "idempotent",
            irreversible=False,
            certain=(Rejected, ConfigError),  # a 4xx other than 429; a path it could not build
        )(request)

    # -- the wire -------------------------------------------------------------------------------

    def _url(self, ep: Endpoint, path: str, fields: Mapping[str, Any]) -> str:
        quoted = {k: urllib.parse.quote(str(v), safe="") for k, v in fields.items()}
        try:
            return self.base_url + path.format(**quoted)
        except (KeyError, IndexError) as exc:
            raise ConfigError(
                f"endpoint {ep.name!r}: path {path!r} names {exc}, which the call does not supply"
            ) from None

    def _send(
        self,
        ep: Endpoint,
        path: str,
        body: Any,
        key: str,
        method: str,
        fields: Mapping[str, Any] | None = None,
    ) -> Any:
        url = self._url(ep, path, {**(fields if fields is not None else body), "key": key})
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("Idempotency-Key", key)
        for name, value in self.headers.items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=ep.timeout) as resp:
                reply = _decode(resp.read())
                accepted = resp.status == 202
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            if exc.code in (429, 503):
                raise TransientError(f"{method} {url}: HTTP {exc.code} (not executed): {detail}") from None
            if exc.code in (500, 502, 504):
                raise OutcomeUnknown(f"{method} {url}: HTTP {exc.code}; it may have been executed") from None
            raise Rejected(f"{method} {url}: HTTP {exc.code}: {detail}") from None
        if accepted:
            # Accepted, not settled: the outcome is the counterparty's to report (status path).
            ref = reply.get(ep.reference) if isinstance(reply, dict) and ep.reference else None
            raise OutcomeUnknown(f"{method} {url}: 202 Accepted, not settled yet", ref=ref)
        return reply

    def _ask(self, ep: Endpoint, path: str, fields: Mapping[str, Any]) -> ReconcileResult:
        url = self._url(ep, path, fields)
        req = urllib.request.Request(url, method="GET")
        for name, value in self.headers.items():
            req.add_header(name, value)
        try:
            with urllib.request.urlopen(req, timeout=ep.timeout) as resp:
                body = _decode(resp.read())
                code = resp.status
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):
                return Absent()
            return Pending()  # the status service is down: ask again later
        except OSError:
            return Pending()
        ref = body.get(ep.reference) if isinstance(body, dict) and ep.reference else None
        if code == 202:
            return Pending(ref=ref)
        return Confirmed(body, ref=ref)


def _decode(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {"text": data.decode(errors="replace")}


def _endpoint(name: str, spec: Any) -> Endpoint:
    if not isinstance(spec, Mapping):
        raise ConfigError(f"endpoint {name!r}: expected an object with method and path")
    unknown = set(spec) - _FIELDS
    if unknown:
        raise ConfigError(f"endpoint {name!r}: unknown field(s) {sorted(unknown)}; known: {sorted(_FIELDS)}")
    method = str(spec.get("method", "POST")).upper()
    path = spec.get("path")
    if method not in _METHODS or not isinstance(path, str) or not path.startswith("/"):
        raise ConfigError(f"endpoint {name!r}: needs a method in {_METHODS} and a path starting with /")
    inverse = spec.get("inverse")
    return Endpoint(
        name=name,
        method=method,
        path=path,
        status_path=spec.get("status_path"),
        lookup_path=spec.get("lookup_path"),
        reference=spec.get("reference"),
        dedup_window=spec.get("dedup_window"),
        poll=spec.get("poll"),
        timeout=float(spec.get("timeout", 10.0)),
        inverse=_endpoint(f"{name}.undo", inverse) if inverse is not None else None,
        idempotent=bool(spec.get("idempotent", True)),
    )
