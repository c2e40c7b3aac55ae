"""Who may act from the inspector: registered approvers, signed in with their token.

Signing in checks the token against the store's approvers (`gates.approval.is_approver`, the
approvers file `daybook approve` checks) and opens a session held in this process's memory: a
random id in an HttpOnly, SameSite=Strict cookie, and a CSRF token every form posts back. The
approver's key (token) is kept with the session so a verdict is signed through `Daybook.approve`
with it, the same checked path as `daybook approve`, and an operator's act is journaled as
authenticated. Every request checks the session's key against the approvers file again, so a
session ends when its approver's key is rotated or removed; it also ends with the server, on
sign-out, or after `SESSION_TTL` seconds. What a session may do follows the approver's roles
(`operator` for acts on runs, `approver` for verdicts on the gates that list them, `viewer` for
reading alone), and the inspector's mode: `read_only` refuses every act (signing in and out
still work), `require_sign_in` refuses every read to someone not signed in. Every POST is
written to the audit log (`gates.audit`) through `audit`.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..book import Daybook
from ..errors import NotAuthorized
from ..gates import approval, audit, roster

COOKIE = "daybook_session"
SESSION_TTL = 8 * 3600.0


@dataclass(frozen=True)
class Session:
    name: str
    token: str
    csrf: str
    expires: float


class Sessions:
    """The signed-in approvers of one inspector process."""

    def __init__(self) -> None:
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, name: str, token: str) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._by_id[sid] = Session(name, token, secrets.token_urlsafe(24), time.time() + SESSION_TTL)
        return sid

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            found = self._by_id.get(sid)
            if found is not None and found.expires < time.time():
                del self._by_id[sid]
                return None
            return found

    def sid_of(self, session: Session) -> str | None:
        with self._lock:
            return next((k for k, v in self._by_id.items() if v is session), None)

    def close(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)


def csrf_ok(session: Session | None, sent: str | None) -> bool:
    """The form's CSRF token is this session's (compared in constant time)."""
    return session is not None and bool(sent) and hmac.compare_digest(session.csrf, str(sent))


class Inspector:
    """One store, its signed-in approvers, and the code `--app` named (for resume)."""

    def __init__(
        self, book: Daybook, apps: Sequence[str] = (), read_only: bool = False, require_sign_in: bool = False
    ) -> None:
        self.book = book
        self.apps = tuple(apps)
        self.sessions = Sessions()
        self.read_only = read_only
        self.require_sign_in = require_sign_in
        self.audit = audit.Writer(book.store)

    def roles(self, who: Session | None) -> tuple[str, ...]:
        """The signed-in person's roles as the approvers file says now (() if nobody)."""
        member = roster.member(self.book.store, who.name) if who is not None else None
        return member.roles if member is not None else ()

    def may_act(self, who: Session | None, role: str) -> bool:
        """Whether this inspector shows `who` the forms of acts that need `role`."""
        return not self.read_only and role in self.roles(who)

    def session_ref(self, who: Session | None) -> str | None:
        """The audit log's name for a session: a digest of its id, never the id."""
        sid = self.sessions.sid_of(who) if who is not None else None
        return audit.digest(sid) if sid else None

    def session(self, cookies: Mapping[str, str]) -> Session | None:
        """The signed-in approver of a request; None (and the session closed) when its key is
        no longer the one the approvers file holds for it (rotated or removed)."""
        sid = cookies.get(COOKIE)
        found = self.sessions.get(sid)
        if found is not None and not approval.is_approver(self.book.store, found.name, found.token):
            self.sessions.close(sid)
            return None
        return found

    def require(self, who: Session, role: str, what: str) -> None:
        """Refuse (403) an act the signed-in approver's roles do not cover."""
        member = roster.member(self.book.store, who.name)
        if member is None or not member.may(role):
            held = ", ".join(member.roles) if member else "none"
            raise NotAuthorized(
                f"{who.name!r} may not {what}: it needs the {role} role (held: {held}); "
                f"`daybook approvers add {who.name} --role approver --role {role}`"
            )


# What a person not signed in may still reach on a `--require-sign-in` inspector.
_OPEN_PATHS = ("/login", "/static/")


class SignInRequired:
    """`daybook web --require-sign-in`: a request from someone not signed in gets only the
    sign-in page and the static files; a page is redirected to /login, the JSON API and a live
    stream are a 401 saying to sign in. A POST goes on to its route, which refuses it (401)
    and writes it to the audit log."""

    def __init__(self, app: ASGIApp, inspector: Inspector) -> None:
        self.app = app
        self.inspector = inspector

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        reading = scope["type"] == "http" and scope["method"] in ("GET", "HEAD")
        if not reading or path.startswith(_OPEN_PATHS):
            await self.app(scope, receive, send)
            return
        cookies = cookie_parser(Headers(scope=scope).get("cookie", ""))
        if await run_in_threadpool(self.inspector.session, cookies) is not None:
            await self.app(scope, receive, send)
            return
        message = "sign in to read this inspector (it was started with --require-sign-in)"
        accept = Headers(scope=scope).get("accept", "")
        if (
            not path.startswith("/api/")
            and "text/event-stream" not in accept
            and not path.endswith("/events")
        ):
            answer: Any = RedirectResponse("/login?" + urlencode({"said": message}), status_code=303)
        else:
            answer = JSONResponse({"error": message}, status_code=401)
        await answer(scope, receive, send)
