"""Who did it: the one identity rule for every act a person takes on a run from outside.

Pause, cancel, retry, resolve, recover, steer, fork, gc, budget raises, updates and signals name
who acts (`by=`, `author=`, `sender=`, `--by`, `--as`). A name in the approvers file
(`gates.roster`) is a claim that needs its credential: the token (private key) given with it
must be that person's, and the person must hold the act's role (`operator`; a signal's sender
`approver` or `operator`: a `viewer` signs nothing), else `NotAuthorized` and nothing is
written. Any other name is taken as given but journaled as unauthenticated, beside what the
process can tell for sure: the OS user and, on PostgreSQL, the database role (`current_user`).
An authenticated act also carries a signature over (act, run, name, time), which `verify`
checks against the approvers file.
"""

from __future__ import annotations

import getpass
import time
from typing import Any

from ..errors import ConfigError, NotAuthorized
from ..records import JSON
from ..store import Store
from . import roster, signing

ROLE = "operator"


def actor(
    store: Any, name: str | None, token: str | None, act: str, run_id: str, role: str | None = ROLE
) -> tuple[str, dict[str, JSON]]:
    """(the name to journal, the identity record beside it) for `act` on `run_id`; `role` the
    role a registered name needs (None: approver or operator, as for a signal's sender; a
    viewer alone signs nothing)."""
    check(name, token)
    os_user = getpass.getuser()
    record: dict[str, JSON] = {"authenticated": False, "os_user": os_user, "db_role": _db_role(store)}
    if name is None:
        return os_user, record  # nobody was named: the OS user, as it is, claimed by no one
    member = roster.member(store, name)
    if member is None:
        return name, record
    if not token:
        raise NotAuthorized(
            f"{name!r} is a registered approver: acting under that name needs its key "
            "($DAYBOOK_TOKEN, --token or --key-file; token= in Python); without one, act "
            "under another name and it is journaled as unauthenticated"
        )
    if _public(token) != member.public_key:
        raise NotAuthorized(f"the key given is not {name!r}'s; nothing was done")
    if role is None and not _acts(member):
        raise NotAuthorized(
            f"{name!r} is a viewer: it reads (`daybook web`) and signs nothing, a signal included; "
            f"`daybook approvers add {name} --role viewer --role operator` lets it act"
        )
    if role is not None and not member.may(role):
        what = "an approver of gates" if member.may("approver") else "a viewer"
        raise NotAuthorized(
            f"{name!r} is {what}, not an operator of runs ({_what(act)} needs the operator role): "
            f"`daybook approvers add {name} {' '.join(f'--role {r}' for r in (*member.roles, 'operator'))}`"
        )
    at = time.time()
    signed = signing.sign(token, _fields(act, run_id, name, at))
    return name, {**record, "authenticated": True, "at": at, "signature": signed}


def check(name: object, token: object) -> None:
    """Refuse, before anything is written, a name that is empty or not text, or a key that is
    not text (`ConfigError`)."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"who acts must be a non-empty name (or None: the OS user), not {name!r}")
    if isinstance(name, str) and any(0 < ord(c) < 32 or ord(c) == 127 for c in name):
        # A line break or escape in a name forges what a reader sees ("alice\n[approved by cfo]");
        # a NUL is left to the store's own check (`NotSerializable`, naming the field).
        raise ConfigError(f"who acts must be one line of printable text, not {name!r}")
    if token is not None and not isinstance(token, str):
        raise ConfigError(
            f"a key (token=) is the text `daybook approvers add` printed, not {type(token).__name__}"
        )


def verify(store: Any, act: str, run_id: str, name: str, record: Any, role: str | None = ROLE) -> bool:
    """Whether an identity record says, verifiably, that `name` did `act` on `run_id` (and
    still holds `role`; None: any)."""
    if not isinstance(record, dict) or not record.get("authenticated"):
        return False
    member = roster.member(store, name)
    if member is None or (role is not None and not member.may(role)) or not _acts(member):
        return False
    fields = _fields(act, run_id, name, record.get("at"))
    return signing.verify(member.public_key, fields, record.get("signature"))


def _acts(member: roster.Member) -> bool:
    """Whether `member` may sign anything at all: a `viewer` alone only reads."""
    return member.may("approver") or member.may("operator")


def _what(act: str) -> str:
    return act.split(":", 1)[0]  # "steer:<digest>" reads as "steer"


def _fields(act: str, run_id: str, name: str, at: object) -> dict[str, Any]:
    return {"act": act, "run_id": run_id, "by": name, "at": at}


def _public(token: str) -> str:
    try:
        return signing.public_of(token)
    except NotAuthorized:
        return ""


def _db_role(store: Store) -> str | None:
    """The database role this handle connects as (PostgreSQL); None for SQLite, whose only
    access control is the file's."""
    return store.current_role()
