"""The approvers file: who may decide gates and operate runs, kept OUTSIDE the store.

Each registered person has a name, an Ed25519 public key (`gates.signing`) and roles:
`approver` (decides the gates that allow them), `operator` (pauses, cancels, retries,
resolves and steers runs under their name) and `viewer` (signs in to the web inspector to read,
and nothing more: what `daybook web --require-sign-in` asks of a reader; every role reads).
The file is JSON, written only by `daybook approvers add|remove` (the owner), and read afresh
at every check, so a key rotated or removed takes effect at once, in every process.

It lives outside the database on purpose: the process that checks a verdict is the agent's own,
and the agent's database role can write rows; it must not be able to name whose key counts.
Where the file is, first found wins:
1. `Daybook(approvers_file=...)` (bound to the store handle with `bind`);
2. `$DAYBOOK_APPROVERS_FILE`;
3. beside a SQLite store: `<file>.approvers.json`; for PostgreSQL:
   `$XDG_CONFIG_HOME/daybook/approvers/<host-port-db-schema digest>.json` (~/.config if unset).
Keep it writable by the owner only (the agent's OS user must not be able to change it).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import ConfigError
from ..records import check_text
from . import signing

ENV = "DAYBOOK_APPROVERS_FILE"
ROLES = ("approver", "operator", "viewer")
FORMAT = "daybook.approvers"

_BOUND: weakref.WeakKeyDictionary[Any, Path] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Member:
    """One registered person: name, public key, roles, when the key was made."""

    name: str
    public_key: str
    roles: tuple[str, ...]
    added: float

    def may(self, role: str) -> bool:
        return role in self.roles


def bind(store: Any, path: str | os.PathLike[str] | None) -> None:
    """Make `path` the approvers file of every check made through `store` (None: unbind)."""
    if path is None:
        _BOUND.pop(store, None)
    else:
        _BOUND[store] = Path(path)


def path_for(store: Any) -> Path:
    """Where `store`'s approvers file is (see the module docstring)."""
    bound = _BOUND.get(store)
    if bound is not None:
        return bound
    named = os.environ.get(ENV)
    if named is not None:
        if not named.strip():
            raise ConfigError(f"${ENV} is set but empty: name the approvers file, or unset it")
        return Path(named)
    return default_path(str(getattr(store, "dsn", None) or store.url))


def default_path(url: str) -> Path:
    """The approvers file of a store nobody named one for (beside a SQLite file; under the user's
    config directory for PostgreSQL, one per host, port, database and schema)."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        schema = (parse_qs(parts.query).get("schema") or ["public"])[0]
        where = f"{parts.hostname}:{parts.port or 5432}{parts.path}?schema={schema}"
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        return base / "daybook" / "approvers" / f"{hashlib.sha256(where.encode()).hexdigest()[:20]}.json"
    path = url
    if url.startswith("sqlite:"):
        parts = urlsplit(url)
        path = parts.netloc + parts.path if parts.netloc else parts.path[1:]
    if not path or ":memory:" in path:
        raise ConfigError(
            f"an in-memory store has no place for its approvers file: set ${ENV} or "
            "Daybook(approvers_file=...)"
        )
    return Path(os.path.abspath(path) + ".approvers.json")


def members(store: Any) -> dict[str, Member]:
    """Everyone registered, read from the file now ({} when there is no file yet)."""
    path = path_for(store)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the approvers file {path} cannot be read as JSON: {exc}") from None
    found = doc.get("approvers") if isinstance(doc, dict) else None
    if not isinstance(found, dict):
        raise ConfigError(f"the approvers file {path} has no `approvers` object; was it edited by hand?")
    return {
        name: Member(name, str(m.get("public_key", "")), tuple(m.get("roles") or ()), _at(m))
        for name, m in found.items()
        if isinstance(m, dict)
    }


def _at(entry: dict[str, Any]) -> float:
    return float(entry.get("added") or 0)


def member(store: Any, name: str) -> Member | None:
    return members(store).get(name)


def has_operators(store: Any) -> bool:
    """Whether anyone holds the operator role: until someone does, nobody can act authenticated
    on runs, and an act taken on trust keeps the force it had before identities existed."""
    return any(m.may("operator") for m in members(store).values())


def add(store: Any, name: str, roles: tuple[str, ...] | None = None) -> str:
    """Register `name` with a new key pair (or rotate its key); returns the private key (the
    token), which is kept nowhere. `roles` None: its roles so far, else `approver`."""
    if not name or ":" in name:
        raise ConfigError("an approver name must be non-empty and contain no ':'")
    check_text(name, "the approver name")
    _writable(store)
    for role in roles or ():
        if role not in ROLES:
            raise ConfigError(f"a role is one of {', '.join(ROLES)}, not {role!r}")
    with _locked(path_for(store)):
        everyone = members(store)
        before = everyone.get(name)
        kept = roles or (before.roles if before else ("approver",))
        token = signing.new_token()
        everyone[name] = Member(name, signing.public_of(token), tuple(dict.fromkeys(kept)), time.time())
        _write(path_for(store), everyone)
    return token


def remove(store: Any, name: str) -> bool:
    """Unregister `name`: its key stops working at once. False if it was not registered."""
    _writable(store)
    with _locked(path_for(store)):
        everyone = members(store)
        if everyone.pop(name, None) is None:
            return False
        _write(path_for(store), everyone)
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time (two `approvers add` at once would lose one of the keys)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(f"{path}.lock", "a")  # noqa: SIM115 - held across the yield
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot write the approvers file {path}: {exc}") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        except OSError as exc:
            raise ConfigError(f"cannot write the approvers file {path}: {exc}") from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _writable(store: Any) -> None:
    if getattr(store, "read_only", False):
        raise ConfigError(
            f"the store {store.url} is open read-only, so its approvers cannot change; open it "
            "without read_only (the approvers file is written, not the store)"
        )


def _write(path: Path, everyone: dict[str, Member]) -> None:
    """Replace the file whole (a reader sees the old file or the new one, never half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "format": FORMAT,
        "approvers": {
            m.name: {"public_key": m.public_key, "roles": list(m.roles), "added": m.added}
            for m in sorted(everyone.values(), key=lambda m: m.name)
        },
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".approvers-")
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out, indent=2)
    os.chmod(tmp, 0o644)  # public keys only: anyone may read it, only its owner may change it
    os.replace(tmp, path)
