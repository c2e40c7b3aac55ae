"""The audit log: every action a person takes in the web inspector, with who and from where.

One entry per sign-in, refused sign-in, sign-out, verdict and act on a run (pause, resume,
retry, cancel, steer, resolve), whether it was done or refused (and why): the action, the
signed-in name (or none), the outcome, the HTTP status, the line the page showed, the client's
address and user agent, and a digest of the session it came through.

It is kept in the store's append-only coordination-entity log (`daybook_entity_log`, whose
triggers refuse every update, delete and replace on both stores), so no schema change was
needed: each inspector process appends under an entity of its own,
`daybook.audit:web/<host>/<pid>/<random>`, claimed once (for a day at a time, claimed again when
it lapses), so two inspectors over one store never wait on each other. Reading merges every such
entity's entries by time. `daybook leases` does not list them (`coordination.entity`
hides the prefix); `daybook audit` and the inspector's `/audit` page show them.

Nothing secret is written: no token, no session id, no CSRF token. A session is named by the
first 16 hex digits of the SHA-256 of its id (enough to tell one session's acts from another's,
useless to sign in with); a refused sign-in under a name nobody registered keeps only such a
digest of the name (a token pasted into the name box must not land in the store); free text a
person typed (a reason, a steer, evidence) is left to the journal rows the act itself writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..records import JSON, dumps
from ..store import Entities, EntitiesReads

PREFIX = "daybook.audit:"
CLAIM_TTL = 86_400.0  # seconds an inspector's claim on its own audit entity lasts before renewal
MAX_TEXT = 300  # characters kept of a client-supplied value (user agent, a refused name, a line)
# Fields of a request an entry may carry: what was acted on, never what was typed as free text.
DETAIL_FIELDS = ("run_id", "gate", "step", "outcome", "kind", "compensate", "quantity", "amount")


def digest(secret: str) -> str:
    """A short one-way name for a secret (a session id, a name that may be a pasted token)."""
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()[:16]


def clean(value: object, limit: int = MAX_TEXT) -> str:
    """Client-supplied text as an entry keeps it: control characters (NUL included, which no
    store column holds) replaced, lone surrogates replaced, at most `limit` characters."""
    text = str(value)[:limit].encode("utf-8", "replace").decode("utf-8")
    return "".join("\N{REPLACEMENT CHARACTER}" if ord(c) < 32 or ord(c) == 127 else c for c in text)


@dataclass(frozen=True)
class Entry:
    """One audit entry: at `at`, `who` (None: nobody signed in) did `action` from `client`
    with `user_agent`; `outcome` is `done` or `refused`, `status` the HTTP status answered,
    `said` the line the page showed; `detail` what was acted on (run_id, gate, step, ...)."""

    id: int
    at: float
    inspector: str
    action: str
    who: str | None
    outcome: str
    status: int
    said: str
    client: str | None
    user_agent: str | None
    session: str | None
    detail: dict[str, JSON]

    def as_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "at": self.at,
            "inspector": self.inspector,
            "action": self.action,
            "who": self.who,
            "outcome": self.outcome,
            "status": self.status,
            "said": self.said,
            "client": self.client,
            "user_agent": self.user_agent,
            "session": self.session,
            "detail": self.detail,
        }


class Writer:
    """Appends one inspector process's entries, under its own entity (claimed at its first
    entry, so an inspector nobody acts in writes nothing)."""

    def __init__(self, store: Entities) -> None:
        self.store = store
        self.agent = f"web/{clean(socket.gethostname(), 60)}/{os.getpid()}/{secrets.token_hex(4)}"
        self.name = PREFIX + self.agent
        self._lock = threading.Lock()
        self._claimed = False

    def write(
        self,
        action: str,
        *,
        who: str | None,
        outcome: str,
        status: int,
        said: str,
        client: str | None,
        user_agent: str | None,
        session: str | None = None,
        detail: Mapping[str, object] | None = None,
    ) -> None:
        """Append one entry; `ConfigError` if the store refuses it (the caller logs it)."""
        data: dict[str, JSON] = {
            "who": None if who is None else clean(who, 200),
            "outcome": outcome,
            "status": status,
            "said": clean(said, 500),
            "client": None if client is None else clean(client, 100),
            "user_agent": None if user_agent is None else clean(user_agent),
            "session": session,
            "detail": {k: clean(v, 200) for k, v in (detail or {}).items() if k in DETAIL_FIELDS},
        }
        text = dumps(data, "an audit entry")
        name = clean(action, 40) or "-"
        with self._lock:
            now = time.time()
            if self._claimed and self.store.entity_record(self.name, self.agent, name, text, now):
                return
            # First entry, or the day's claim lapsed: claim again (the same holder always may).
            if not self.store.entity_claim(self.name, self.agent, CLAIM_TTL, now):
                raise ConfigError(f"the audit entity {self.name!r} is held by another process")
            self._claimed = True
            if not self.store.entity_record(self.name, self.agent, name, text, time.time()):
                raise ConfigError(f"the audit entity {self.name!r} was lost while writing to it")


def entries(store: EntitiesReads, since: float | None = None, limit: int | None = None) -> list[Entry]:
    """Every inspector's entries, oldest first (at or after `since`; the newest `limit`)."""
    found: list[Entry] = []
    for name, _holder, _deadline in store.entity_list():
        if not name.startswith(PREFIX):
            continue
        view = store.entity_view(name)
        for row_id, at, agent, action, text in view[2] if view else []:
            if action in ("claim", "release") or (since is not None and at < since):
                continue
            found.append(_entry(row_id, at, agent, action, text))
    found.sort(key=lambda e: (e.at, e.id))
    return found[-limit:] if limit else found


def _entry(row_id: int, at: float, agent: str, action: str, text: str) -> Entry:
    try:
        data: Any = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        data = {"said": "(an entry that is not a JSON object: written by hand?)"}
    detail = data.get("detail")
    return Entry(
        id=row_id,
        at=at,
        inspector=agent,
        action=action,
        who=_text(data.get("who")),
        outcome=str(data.get("outcome") or "?"),
        status=int(data["status"]) if isinstance(data.get("status"), int) else 0,
        said=str(data.get("said") or ""),
        client=_text(data.get("client")),
        user_agent=_text(data.get("user_agent")),
        session=_text(data.get("session")),
        detail=detail if isinstance(detail, dict) else {},
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)
