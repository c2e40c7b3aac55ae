"""The inspector's ASGI application: routes, sign-in, and how errors become answers.

Reads go through `Daybook` (the same calls as `daybook runs`, `show`, `approvals`, ...). Every
write is a POST from a signed-in approver carrying the session's CSRF token, and goes through
the same checked call as its command (`actions`). Whatever is wrong with a request (an unknown
run, a malformed body, a missing CSRF token, a body over `MAX_BODY`) is a 4xx with a line saying
what; a DaybookError is mapped by kind, and nothing is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..book import Daybook
from ..errors import ConfigError, DaybookError, NotAuthorized, RunNotFound
from ..gates import audit, roster
from ..gates.approval import is_approver
from . import actions, approvals, audit_page, guard, live, pages, views
from .auth import COOKIE, Inspector, Session, SignInRequired, csrf_ok
from .html import Markup, field, page, tag

MAX_BODY = 64 * 1024  # bytes a form or JSON body may hold
READ_ONLY = (
    "refused: this inspector is read-only (`daybook web --read-only`): it shows runs and "
    "gates but takes no action; act with the CLI, or from an inspector started without --read-only"
)
READ_ONLY_BANNER = "read-only: this inspector takes no action"
log = logging.getLogger("daybook.web")


class BadRequest(Exception):
    """A request the inspector refuses before touching the store (status, message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


_STATUS_OF: list[tuple[type[DaybookError], int]] = [
    (RunNotFound, 404),
    (NotAuthorized, 403),
    (ConfigError, 400),
]


def status_of(exc: DaybookError) -> int:
    for kind, code in _STATUS_OF:
        if isinstance(exc, kind):
            return code
    return 409  # the run is not in a state that allows it (leased, finished, paused, ...)


async def read_body(request: Request) -> dict[str, str]:
    """The POST body as {name: value}: a form (urlencoded) or a JSON object of strings, at most
    MAX_BODY bytes (read in chunks, so a lying Content-Length does not get past)."""
    declared = request.headers.get("content-length")
    if declared and (
        not (declared.isascii() and declared.isdigit()) or len(declared) > 9 or int(declared) > MAX_BODY
    ):
        raise BadRequest(413, f"the body is over {MAX_BODY} bytes")
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise BadRequest(413, f"the body is over {MAX_BODY} bytes")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise BadRequest(400, "the body is not UTF-8") from None
    if request.headers.get("content-type", "").startswith("application/json"):
        return _json_fields(text)
    return {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}


def _json_fields(text: str) -> dict[str, str]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BadRequest(400, f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict) or not all(
        isinstance(v, str | int | float | bool) for v in value.values()
    ):
        raise BadRequest(400, "give a JSON object of names to strings")
    return {str(k): str(v) for k, v in value.items()}


def _answer(
    request: Request, who: str | None, code: int, message: str, ins: Inspector | None = None
) -> Response:
    if "application/json" in request.headers.get("accept", "") or request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=code)
    if ins is not None:
        session = ins.session(request.cookies)
        text = framed(ins, session, "Error", tag("p", message), flash=message, error=True)
    else:
        text = page("Error", tag("p", message), who=who, flash=message, error=True)
    return HTMLResponse(text, status_code=code)


def build(
    book: Daybook,
    apps: Sequence[str] = (),
    allowed_hosts: Sequence[str] | None = None,
    *,
    read_only: bool = False,
    require_sign_in: bool = False,
) -> Starlette:
    """The ASGI app over an open `Daybook`, answering the Host names `allowed_hosts` lists
    (`guard.hosts_for`); by default the loopback names and Starlette's TestClient's. With
    `read_only` every act is refused (403) and no action form is shown; with `require_sign_in`
    every page, API answer and stream needs a signed-in person (any role, `viewer` included)."""
    ins = Inspector(book, apps, read_only=read_only, require_sign_in=require_sign_in)
    readers = live.Readers(book.store)  # one journal reader per live run, shared by its viewers
    view = _viewer(ins)
    act = _actor(ins)
    routes = [
        Route("/", view(lambda r, c: ("Runs", pages.runs_list(book, dict(r.query_params), c)))),
        Route("/runs/{run_id:path}/{verb}", act(actions.on_run), methods=["POST"]),
        Route(
            "/runs/{rest:path}",
            _run_or_stream(
                view(lambda r, c: _run_view(book, r, c)),
                live.stream(book, readers),
                live.chunk_stream(book),
            ),
            methods=["GET"],
        ),
        Route("/approvals", _approvals(ins)),
        Route("/approvals/{verb}", act(actions.on_gate), methods=["POST"]),
        Route("/attention", view(lambda r, c: ("Attention", pages.attention_page(book, c)))),
        Route("/audit", view(lambda r, c: ("Audit log", audit_page.audit_page(ins, r)))),
        Route("/login", _login_page(ins), methods=["GET"]),
        Route("/login", _login(ins), methods=["POST"]),
        Route("/logout", act(actions.logout), methods=["POST"]),
        Route("/api/runs", _api_runs(book)),
        Route("/api/audit", audit_page.api_endpoint(ins)),
        Route("/api/views/{name}", _api_view(book)),
        Route("/api/runs/{run_id:path}", _api_run(book)),
        Mount("/static", StaticFiles(directory=Path(__file__).parent / "static"), name="static"),
    ]
    hosts = [*guard.LOCAL_HOSTS, guard.TEST_HOST] if allowed_hosts is None else allowed_hosts
    middleware = guard.middleware(hosts)
    if require_sign_in:
        middleware.append(Middleware(SignInRequired, inspector=ins))
    app = Starlette(routes=routes, middleware=middleware)
    app.state.inspector = ins
    app.state.readers = readers
    return app


Viewer = Callable[[Request, str | None], tuple[str, Markup]]


def _run_view(book: Daybook, request: Request, csrf: str | None) -> tuple[str, Markup]:
    """A run's page, or one of its pictures when the query names a view (`?view=timeline`)."""
    run_id = request.path_params["run_id"]
    query = dict(request.query_params)
    name = query.pop("view", "")
    if name:
        return f"{views.find(name).title}: run {run_id}", views.view_page(book, run_id, name, query)
    return "Run " + run_id, pages.run_page(book, run_id, csrf, query)


def _viewer(ins: Inspector) -> Callable[..., Callable[[Request], Any]]:
    """A page: the body is given the session's CSRF token only when the signed-in person may
    take the acts its forms post (`role`, and the inspector not read-only), so a viewer, an
    approver on an operator's page and everyone on a read-only inspector see no action form."""

    def wrap(fn: Viewer, role: str = "operator") -> Callable[[Request], Any]:
        def endpoint(request: Request) -> Response:  # sync: Starlette runs it in a thread
            session = ins.session(request.cookies)
            who = session.name if session else None
            acts = session.csrf if session and ins.may_act(session, role) else None
            try:
                title, body = fn(request, acts)
            except DaybookError as exc:
                return _answer(request, who, status_of(exc), str(exc), ins)
            except ValueError as exc:
                return _answer(request, who, 400, f"bad query: {exc}", ins)
            said = request.query_params.get("said", "")
            return HTMLResponse(framed(ins, session, title, body, flash=said))

        return endpoint

    return wrap


def framed(
    ins: Inspector, session: Session | None, title: str, body: Any, *, flash: str = "", error: bool = False
) -> str:
    """A page in the inspector's frame: who is signed in and with which roles, the audit
    link for an operator, and the read-only banner."""
    roles = ins.roles(session)
    return page(
        title,
        body,
        who=f"{session.name} ({', '.join(roles) or 'no role'})" if session else None,
        flash=flash,
        error=error,
        csrf=session.csrf if session else None,
        audit="operator" in roles,
        banner=READ_ONLY_BANNER if ins.read_only else "",
    )


def _approvals(ins: Inspector) -> Callable[[Request], Any]:
    """The approvals inbox: forms only on the gates the signed-in person may decide."""

    def body(request: Request, csrf: str | None) -> tuple[str, Markup]:
        session = ins.session(request.cookies)
        why = "sign in to decide"
        if ins.read_only:
            why = "read-only inspector"
        elif session is not None:
            why = f"{session.name} does not hold the approver role"
        return "Approvals", approvals.approvals_page(
            ins.book, csrf, session.name if session else None, why_not=why
        )

    return _viewer(ins)(body, "approver")


Action = Callable[[Inspector, Session, dict[str, str], dict[str, str]], str]


def _actor(ins: Inspector) -> Callable[[Action], Callable[[Request], Any]]:
    """A POST endpoint: body read and bounded, the inspector not read-only, signed in, CSRF
    checked, then the action (run in a thread: it writes to the store); it answers with a
    redirect to where the person was. Whatever the outcome, one audit entry says who tried
    what, from where, and how it ended."""

    def wrap(fn: Action) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            session = ins.session(request.cookies)
            who = session.name if session else None
            action = "sign-out" if fn is actions.logout else request.path_params.get("verb", "?")
            ref = ins.session_ref(session)
            fields: dict[str, str] = {}
            try:
                fields = await read_body(request)
                if ins.read_only and fn is not actions.logout:
                    raise BadRequest(403, READ_ONLY)
                if session is None:
                    raise BadRequest(401, "sign in as a registered approver first (/login)")
                if not csrf_ok(session, fields.get("csrf") or request.headers.get("x-csrf-token")):
                    raise BadRequest(403, "the form's CSRF token is missing or wrong; reload the page")
                said = await _in_thread(fn, ins, session, dict(request.path_params), fields)
            except BadRequest as exc:
                await audit_page.record(ins, request, action, who, ref, exc.status, str(exc), fields)
                return _answer(request, who, exc.status, str(exc), ins)
            except DaybookError as exc:
                code = status_of(exc)
                await audit_page.record(ins, request, action, who, ref, code, str(exc), fields)
                return _answer(request, who, code, str(exc), ins)
            await audit_page.record(ins, request, action, who, ref, 200, said, fields)
            if "application/json" in request.headers.get("accept", ""):
                return JSONResponse({"said": said})
            back = request.headers.get("referer") or "/"
            return RedirectResponse(_with_said(back, said, request.headers.get("host")), status_code=303)

        return endpoint

    return wrap


async def _in_thread(fn: Action, *args: Any) -> str:
    return await run_in_threadpool(fn, *args)


def _with_said(url: str, said: str, host: str | None = None) -> str:
    """A same-origin path to go back to, with the line to show. Only a path starting with one
    '/' is kept (never `//other.example/x` or `/\\other.example`, which a browser reads as
    another host), and only from a Referer naming this Host (when `host` is given)."""
    from urllib.parse import urlencode, urlsplit

    parts = urlsplit(url)
    path = parts.path
    foreign = host is not None and parts.netloc.lower() not in ("", host.lower())
    if foreign or not path.startswith("/") or path.startswith("//") or "\\" in path:
        path = "/"
    return f"{path}?{urlencode({'said': said})}"


def _run_or_stream(
    page: Callable[[Request], Any], stream: Callable[[Request], Any], chunks: Callable[[Request], Any]
) -> Callable[[Request], Any]:
    """GET /runs/...: a run's page, its live stream when the URL ends in an unencoded `/events`,
    or the live chunks of its durable stream NAME when it ends in `/streams/NAME`. Read from
    the raw (still percent-encoded) path, so a run whose id holds '/' (as the pages link it,
    `/runs/a%2Fevents`) is one segment and never taken for a stream."""

    async def endpoint(request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.url.path.encode()
        rest = raw.split(b"?", 1)[0][len(b"/runs/") :]
        head, _, tail = rest.rpartition(b"/")
        streaming = bool(head) and tail == b"events"
        named = head.endswith(b"/streams") and len(head) > len(b"/streams")
        run = head[: -len(b"/streams")] if named else head if streaming else rest
        run_id = unquote_to_bytes(run).decode("utf-8", "replace")
        request.scope["path_params"] = {"run_id": run_id}
        if named:
            request.scope["path_params"]["stream"] = unquote_to_bytes(tail).decode("utf-8", "replace")
            answer: Response = await chunks(request)
        elif streaming:
            answer = await stream(request)
        else:
            answer = await run_in_threadpool(page, request)
        return answer

    return endpoint


def _login_page(ins: Inspector) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        body = tag(
            "form",
            field("name", "approver"),
            field("token", "token", kind="password"),
            tag("button", "Sign in", type="submit"),
            method="post",
            action="/login",
            id="login",
        )
        session = ins.session(request.cookies)
        return HTMLResponse(framed(ins, session, "Sign in", body, flash=request.query_params.get("said", "")))

    return endpoint


def _login(ins: Inspector) -> Callable[[Request], Any]:
    """Sign in (also on a read-only inspector: it changes no run, and `--require-sign-in`
    needs it to read). Every attempt is audited; a refused one under a name nobody registered
    keeps only a digest of that name (it may be a token pasted in the wrong box)."""

    async def endpoint(request: Request) -> Response:
        try:
            fields = await read_body(request)
        except BadRequest as exc:
            await audit_page.record(ins, request, "sign-in", None, None, exc.status, str(exc), {})
            return _answer(request, None, exc.status, str(exc), ins)
        name, token = fields.get("name", ""), fields.get("token", "")
        if not name or not token or not is_approver(ins.book.store, name, token):
            message = "refused: that approver is unknown or the token does not match"
            known = await run_in_threadpool(roster.member, ins.book.store, name) if name else None
            claimed = (
                name if known is not None else (f"unregistered name #{audit.digest(name)}" if name else None)
            )
            log.warning("sign-in refused for approver %r", claimed)  # never a pasted key, here either
            await audit_page.record(ins, request, "sign-in", claimed, None, 403, message, {})
            return _answer(request, None, 403, message, ins)
        sid = ins.sessions.open(name, token)
        said = f"signed in as {name}"
        await audit_page.record(ins, request, "sign-in", name, audit.digest(sid), 200, said, {})
        response = RedirectResponse(_with_said("/approvals", said), status_code=303)
        response.set_cookie(COOKIE, sid, httponly=True, samesite="strict")
        return response

    return endpoint


def _api_runs(book: Daybook) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        try:
            limit = int(request.query_params.get("limit", "100"))
            found = book.runs(request.query_params.get("status") or None, limit)
        except (ValueError, DaybookError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse([r.as_dict() for r in found])

    return endpoint


def _api_view(book: Daybook) -> Callable[[Request], Response]:
    """GET /api/views/NAME?run=RUN: the JSON a view's script draws (`views.view_data`)."""

    def endpoint(request: Request) -> Response:
        query = dict(request.query_params)
        run_id = query.pop("run", "")
        try:
            if not run_id:
                raise ValueError("name the run: /api/views/NAME?run=RUN")
            return JSONResponse(views.view_data(book, run_id, request.path_params["name"], query))
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except DaybookError as exc:
            return JSONResponse({"error": str(exc)}, status_code=status_of(exc))

    return endpoint


def _api_run(book: Daybook) -> Callable[[Request], Response]:
    def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(book.export(request.path_params["run_id"]))
        except DaybookError as exc:
            return JSONResponse({"error": str(exc)}, status_code=status_of(exc))

    return endpoint
