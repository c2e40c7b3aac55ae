"""Secret values: what the journal holds as a keyed digest, never in clear.

A value is secret when it is wrapped in `Secret(value)`, when it is a tool argument the tool
names in `secrets=`, or when it is the result of a tool declared `secret_result=True`. On its
way to the journal a secret becomes `{"$secret": "hmac-sha256:<hex>"}` (`store.keys`): the
digest is stable, so the fingerprint replay compares is stable too, and a tool still receives
the real value, live.

What the journal does not hold cannot be replayed: a secret decision value or tool result
comes back on replay as a *withheld* `Secret`, which carries the digest (so passing it on to a
step that is already settled replays as before) and raises `SecretUnavailable` if read. While
a secret is live, its text is also scrubbed from every row this execution writes (an error
message that quotes a password, a result that echoes it).
"""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

from ..errors import SecretUnavailable
from ..records import JSON, MAX_DEPTH
from .keys import digest, key_for

T = TypeVar("T")

MARK = "$secret"
# Shorter text is not scrubbed from messages: replacing every "a" would garble them and protect
# nothing (a secret that short is guessable anyway).
_SCRUB_MIN = 4
_MISSING: Any = object()


class Secret(Generic[T]):
    """A value daybook journals as a keyed digest, never in clear. `reveal()` gives the value.

    Pass one as a tool argument (the tool receives the value) or return one from `ctx.decide`
    (the journal holds the digest). `repr` and `str` never show the value."""

    __slots__ = ("_digest", "_value")

    def __init__(self, value: T) -> None:
        if isinstance(value, Secret):
            raise TypeError("Secret(Secret(...)): the value is already secret")
        self._value = value
        self._digest: str | None = None

    @classmethod
    def withheld(cls, digest: str) -> Secret[Any]:
        """A secret known only by its digest, as replay finds it in the journal."""
        made: Secret[Any] = cls.__new__(cls)
        made._value = _MISSING
        made._digest = digest
        return made

    @property
    def available(self) -> bool:
        """False for a withheld secret (replayed from the journal, which holds only a digest)."""
        return self._value is not _MISSING

    @property
    def digest(self) -> str | None:
        """The keyed digest, once the value was journaled (or as the journal holds it)."""
        return self._digest

    def reveal(self) -> T:
        if self._value is _MISSING:
            raise SecretUnavailable(
                f"this secret ({self._digest}) was replayed from the journal, which holds only "
                "its digest, never the value; read it live: fetch it again inside the step "
                "that needs it (e.g. from your secret manager in the tool itself), or keep the "
                "step that uses it before the step that produced it settles"
            )
        value: T = self._value
        return value

    def __repr__(self) -> str:
        return f"Secret({self._digest or '***'})" if self._digest else "Secret(***)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        if self.available and other.available:
            return bool(self._value == other._value)
        return self._digest is not None and self._digest == other._digest

    def __hash__(self) -> int:
        return hash(self._digest)

    def __reduce__(self) -> Any:
        raise TypeError("a daybook.Secret cannot be pickled")


class Concealer:
    """Turns values into what the journal may hold, remembering live secret text to scrub."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._key: bytes | None = None
        self.live: set[str] = set()

    @property
    def key(self) -> bytes:
        # Resolved at the first secret, not before: a run with none never needs a key.
        if self._key is None:
            self._key = key_for(self._store)
        return self._key

    def conceal(self, value: Any, names: tuple[str, ...] = ()) -> tuple[JSON, bool]:
        """`value` with every Secret (and each top-level entry named in `names`, for a dict) as
        its digest mark; and whether anything was concealed."""
        if names and isinstance(value, dict):
            found = False
            out: dict[str, JSON] = {}
            for k, v in value.items():
                if k in names:
                    out[k] = self._mark(v if isinstance(v, Secret) else Secret(v))
                    found = True
                else:
                    out[k], hit = self.conceal(v)
                    found = found or hit
            return out, found
        if not has_secret(value):
            return value, False  # the hot path: nothing rebuilt
        try:
            return self._walk(value)
        except RecursionError:  # too deep to journal: check_json refuses it, saying so
            return value, False

    def _walk(self, value: Any) -> tuple[JSON, bool]:
        if isinstance(value, Secret):
            return self._mark(value), True
        if isinstance(value, dict):
            pairs = [(k, self._walk(v)) for k, v in value.items()]
            return {k: v for k, (v, _) in pairs}, any(hit for _, (_, hit) in pairs)
        if isinstance(value, list | tuple):
            items = [self._walk(v) for v in value]
            walked = [v for v, _ in items]
            return (walked if isinstance(value, list) else tuple(walked)), any(h for _, h in items)
        return value, False

    def _mark(self, secret: Secret[Any]) -> dict[str, JSON]:
        if secret.available:
            value = secret.reveal()
            secret._digest = digest(self.key, _plain(value))
            self._remember(value)
        return {MARK: secret._digest}

    def _remember(self, value: Any) -> None:
        if isinstance(value, str):
            if len(value) >= _SCRUB_MIN:
                self.live.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                self._remember(v)
        elif isinstance(value, list | tuple):
            for v in value:
                self._remember(v)

    def scrub(self, value: JSON) -> JSON:
        """`value` with the text of every live secret replaced by `[secret]` (error messages,
        echoed results): a secret that leaks into other text is still not written in clear."""
        if not self.live:
            return value
        if isinstance(value, str):
            for s in self.live:
                if s in value:
                    value = value.replace(s, "[secret]")
            return value
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        return value


def _plain(value: Any) -> JSON:
    """A secret's value as JSON for its digest (a nested Secret by its own value)."""
    if isinstance(value, Secret):
        return _plain(value.reveal())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def reveal_all(value: Any) -> Any:
    """`value` with every Secret replaced by its value: what a tool receives, live."""
    if isinstance(value, Secret):
        return value.reveal()
    if isinstance(value, dict):
        return {k: reveal_all(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal_all(v) for v in value]
    if isinstance(value, tuple):
        return tuple(reveal_all(v) for v in value)
    return value


SEALED = "sealed"  # set in a row's data when a value in it is a digest mark


def withheld(value: JSON) -> Any:
    """A journaled value with every digest mark as a withheld Secret (what replay returns)."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(MARK), str):
            return Secret.withheld(value[MARK])
        return {k: withheld(v) for k, v in value.items()}
    if isinstance(value, list):
        return [withheld(v) for v in value]
    return value


def has_secret(value: Any, depth: int = 0) -> bool:
    """True if a Secret is anywhere inside `value` (looked for down to MAX_DEPTH: deeper, the
    value is refused as a journal payload anyway, by `check_json`, with its own message)."""
    if type(value) in _LEAVES:  # the common case first: no isinstance, no call per leaf
        return False
    if isinstance(value, Secret):
        return True
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return False
    for item in items:  # noqa: SIM110 (a loop, not any() over a generator: every row is walked)
        if type(item) not in _LEAVES and has_secret(item, depth + 1):
            return True
    return False


# Exact types that hold no Secret (a subclass goes the long way, as before).
_LEAVES = frozenset({str, int, float, bool, type(None)})


_CONCEALERS: weakref.WeakKeyDictionary[Any, Concealer] = weakref.WeakKeyDictionary()


def share_concealer(handle: Any, store: Any) -> None:
    """`handle` (a view of `store` a run writes through) conceals with `store`'s Concealer: the
    same key, and the live secret text `store` scrubs from whatever it writes."""
    _CONCEALERS[handle] = concealer_for(store)


def concealer_for(store: Any) -> Concealer:
    """The one Concealer of a store handle: its key, and the live secret text of every
    execution through it (scrubbed from whatever the handle writes)."""
    found = _CONCEALERS.get(store)
    if found is None:
        found = _CONCEALERS[store] = Concealer(store)
    return found
