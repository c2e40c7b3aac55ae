"""Resource scopes: which resources a transaction (or one tool call) touches.

A scope is `<type>:<path>[:<id>]`, e.g. `fs:/srv/shop/**`, `api:hotel:holds:H1`,
`db:postgres:shop:orders:*`, `email:outbox:ops@example.com`. It is read as a list of segments:
the type, then the rest split at every `:` and `/` (so `fs:/a/b` and `fs:a/b` name the same
resource). Two wildcards, each a whole segment:

- `*` matches exactly one segment;
- `**` matches any suffix (zero or more segments); only as the last segment. The scope `**`
  alone is every resource (what a speculation's branches hold when given no scopes).

Scopes are hierarchical: a scope stands for its resource and everything below it, so
`fs:/srv/shop` covers `fs:/srv/shop/offer.html`. Hence the two relations the runtime uses:

- `overlaps(a, b)`: some resource is covered by both (a conflict between two transactions);
- `covers(outer, inner)`: every resource `inner` covers is covered by `outer` (a call's scope
  inside its transaction's declared scopes).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

_TYPE = re.compile(r"[a-z][a-z0-9_-]*")
_SPLIT = re.compile(r"[:/]")


@dataclass(frozen=True, order=True)
class Scope:
    """A parsed scope: its text as given and its segments (type first)."""

    text: str
    segments: tuple[str, ...]

    def __str__(self) -> str:
        return self.text


def parse(text: Scope | str) -> Scope:
    """The scope `text`, or ConfigError saying what is wrong with it."""
    if isinstance(text, Scope):
        return text
    if isinstance(text, str):
        return _parse_text(text)
    return _parse_text.__wrapped__(text)  # not a string: refused there, never cached


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Scope:
    """`parse` of a scope's text (the same few texts recur: each transaction's, each look's)."""
    if text == "**":
        return Scope("**", ("**",))  # everything: overlaps and covers every scope
    if not isinstance(text, str) or ":" not in text:
        raise ConfigError(
            f"scope {text!r} is not `<type>:<path>[:<id>]` (e.g. 'fs:/srv/shop/**', "
            "'api:hotel:holds:*'); give a type, a colon, then the resource"
        )
    kind, rest = text.split(":", 1)
    if not _TYPE.fullmatch(kind):
        raise ConfigError(f"scope {text!r}: the type {kind!r} must be lowercase letters, digits, _ or -")
    segments = (kind, *[s for s in _SPLIT.split(rest) if s])
    if len(segments) < 2:
        raise ConfigError(f"scope {text!r} names no resource after its type; use e.g. '{kind}:**' for all")
    for i, seg in enumerate(segments):
        if "*" in seg and seg not in ("*", "**"):
            raise ConfigError(f"scope {text!r}: wildcards are whole segments ('*' or '**'), not {seg!r}")
        if seg == "**" and i != len(segments) - 1:
            raise ConfigError(f"scope {text!r}: '**' (any suffix) may only be the last segment")
    if segments[0] in ("*", "**"):
        raise ConfigError(f"scope {text!r}: the type cannot be a wildcard")
    return Scope(text, segments)


def parse_all(texts: Iterable[str], what: str = "scopes") -> tuple[Scope, ...]:
    if isinstance(texts, str):
        raise ConfigError(f"{what} must be a list of scopes, got the single string {texts!r}")
    return tuple(parse(t) for t in texts)


def overlaps(a: Scope | str, b: Scope | str) -> bool:
    """True if some resource is covered by both `a` and `b` (symmetric)."""
    return _overlap(parse(a).segments, parse(b).segments)


def _overlap(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    for s, t in zip(x, y, strict=False):
        if s == "**" or t == "**":
            return True
        if s != t and s != "*" and t != "*":
            return False
    return True  # equal, or one names an ancestor of the other


def covers(outer: Scope | str, inner: Scope | str) -> bool:
    """True if every resource `inner` covers is also covered by `outer`."""
    o, i = parse(outer).segments, parse(inner).segments
    for n, seg in enumerate(o):
        if seg == "**":
            return True
        if n >= len(i):
            return False  # inner names an ancestor of outer: more than outer covers
        if seg == "*":
            if i[n] == "**":
                return False
        elif i[n] != seg:
            return False
    return True


def any_overlap(mine: Sequence[Scope], theirs: Sequence[Scope]) -> bool:
    # Parsed already: compared segment by segment (what every frontier look runs per header).
    return any(_overlap(a.segments, b.segments) for a in mine for b in theirs)


def outside(declared: Sequence[Scope], used: Sequence[Scope]) -> list[Scope]:
    """The scopes of `used` that no declared scope covers."""
    return [u for u in used if not any(covers(d, u) for d in declared)]


ScopeSpec = Callable[..., Iterable[str]] | Sequence[str] | str


def for_call(spec: Any, args: dict[str, Any], tool: str) -> tuple[Scope, ...]:
    """The scopes one call of a tool touches: `spec(**args)` for a function, else each
    template formatted with the call's arguments (`"fs:/srv/{path}"`)."""
    if spec is None:
        return ()
    try:
        if callable(spec):
            out = _called(spec, args)
            texts = [out] if isinstance(out, str) else list(out)
        else:
            templates = [spec] if isinstance(spec, str) else list(spec)
            texts = [t.format(**args) for t in templates]
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"tool {tool!r}: its scopes= could not be derived from the call's arguments "
            f"{sorted(args)}: {type(exc).__name__}: {exc}; make scopes= accept these arguments"
        ) from None
    return parse_all(texts, f"tool {tool!r} scopes")


def _called(spec: Callable[..., Any], args: dict[str, Any]) -> Any:
    """`spec(**args)`; a function of one parameter that does not name an argument gets the
    arguments as one dict."""
    try:
        return spec(**args)
    except TypeError:
        params = list(inspect.signature(spec).parameters)
        if len(params) == 1 and params[0] not in args:
            return spec(args)
        raise
