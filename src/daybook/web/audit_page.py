"""The inspector's audit log as it is written and read here: one entry per POST a person sends
(sign-in, refused sign-in, sign-out, verdicts, acts on runs, refusals), with where it came from
(the client's address as the server saw it and its User-Agent), written through
`gates.audit.Writer`; and the `/audit` page and `/api/audit` that show it to operators.

The address is the peer the server saw: behind a reverse proxy it is the proxy's (a forwarded
header is a claim anyone can make, so it is not taken for the address)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import ConfigError, DaybookError, NotAuthorized
from ..gates import audit
from ..records import JSON
from .auth import Inspector
from .html import Markup, join, link, payload, table, tag, when

log = logging.getLogger("daybook.web")
PAGE = 200  # entries shown, newest first
MAX_PAGE = 10_000


async def record(
    ins: Inspector,
    request: Request,
    action: str,
    who: str | None,
    session: str | None,
    status: int,
    said: str,
    fields: dict[str, str],
) -> None:
    """Append the entry of one POST (its `fields` only for what was acted on: run, gate, step,
    outcome; never a token, the CSRF token or free text). An entry the store refuses is logged
    as an error: the act it describes has already happened or been refused."""
    detail: dict[str, object] = {**fields, **request.path_params}
    if "run_id" not in request.path_params and "rest" in request.path_params:
        detail["run_id"] = request.path_params["rest"]
    client = request.client.host if request.client else None
    try:
        await run_in_threadpool(
            ins.audit.write,
            action,
            who=who,
            outcome="done" if status < 400 else "refused",
            status=status,
            said=said,
            client=client,
            user_agent=request.headers.get("user-agent"),
            session=session,
            detail=detail,
        )
    except DaybookError as exc:
        log.error("the audit entry of %s by %r could not be written: %s", action, who, exc)


def _allowed(ins: Inspector, request: Request) -> None:
    session = ins.session(request.cookies)
    if session is None:
        raise NotAuthorized("the audit log is for operators: sign in (/login) as one")
    roles = ins.roles(session)
    if "operator" not in roles:
        raise NotAuthorized(
            f"the audit log is for operators; {session.name!r} holds {', '.join(roles) or 'no role'} "
            f"(`daybook approvers add {session.name} --role operator` adds it)"
        )


def _query(request: Request) -> tuple[float | None, int]:
    since_text = request.query_params.get("since", "")
    limit_text = request.query_params.get("limit", str(PAGE))
    try:
        since = float(since_text) if since_text else None
        limit = int(limit_text)
    except ValueError:
        raise ConfigError("since is epoch seconds and limit a whole number") from None
    if not 1 <= limit <= MAX_PAGE:
        raise ConfigError(f"limit is between 1 and {MAX_PAGE}")
    return since, limit


def audit_page(ins: Inspector, request: Request) -> Markup:
    """The newest entries first: when, who, what, outcome, the line shown, from where."""
    _allowed(ins, request)
    since, limit = _query(request)
    found = audit.entries(ins.book.store, since, limit)
    if not found:
        return tag("p", "Nothing in the audit log yet.", id="no-audit")
    rows = [
        [
            when(e.at),
            e.who or "-",
            e.action,
            tag("span", e.outcome, class_=f"status s-{'completed' if e.outcome == 'done' else 'failed'}"),
            str(e.status),
            _target(e.detail),
            e.said,
            e.client or "-",
            tag("small", e.user_agent or "-"),
            e.session or "-",
        ]
        for e in reversed(found)
    ]
    headers = ["at", "who", "action", "outcome", "status", "on", "said", "client", "user agent", "session"]
    return join(
        [
            tag("p", f"{len(found)} entries, newest first (", link("/api/audit", "JSON"), ")."),
            table(headers, rows, id="audit"),
        ]
    )


def _target(detail: dict[str, JSON]) -> Any:
    run = detail.get("run_id")
    parts: list[Any] = []
    if isinstance(run, str) and run:
        parts.append(link("/runs/" + quote(run, safe=""), run))
    rest = {k: v for k, v in detail.items() if k != "run_id"}
    if rest:
        parts.append(payload(rest))
    return join(parts) if parts else "-"


def api_endpoint(ins: Inspector) -> Any:
    """GET /api/audit?since=EPOCH&limit=N: the entries as JSON, oldest first (operators)."""

    def endpoint(request: Request) -> Response:
        try:
            _allowed(ins, request)
            since, limit = _query(request)
            found = audit.entries(ins.book.store, since, limit)
        except NotAuthorized as exc:
            return JSONResponse({"error": str(exc)}, status_code=403)
        except DaybookError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse([e.as_dict() for e in found])

    return endpoint
