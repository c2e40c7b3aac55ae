"""Which arguments of a proxied call are secret, and the call's arguments with those as
`daybook.Secret`: the same concealment `ctx.effect` gives a tool's `secrets=` (the journal holds
a keyed digest, the upstream gets the value, and the value's text is scrubbed from every row the
proxy writes, an upstream result that echoes it included).

An argument is secret when the tool's policy names it in `secrets` (case-insensitive), or, unless
the policy says `"default_secrets": false`, when its name says so: one of its words (split at
`_`, `-`, `.` and camelCase) is a word in `SECRET_WORDS`, or two adjacent words make one
(`api_key`, `apiKey`, `x-api-key`, `private_key`). Names match at any depth of the arguments.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from daybook import Secret

SECRET_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "secret",
        "token",
        "apikey",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "privatekey",
        "accesskey",
        "secretkey",
        "cookie",
    }
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def words(name: str) -> list[str]:
    """`x-api-key` -> [x, api, key]; `apiKey` -> [api, key]; `DB_PASSWORD` -> [db, password]."""
    return [w.lower() for w in _WORD.findall(name)]


def says_secret(name: str) -> bool:
    """Whether an argument's name says it holds a secret (see the module docstring)."""
    parts = words(name)
    pairs = (a + b for a, b in itertools.pairwise(parts))
    return any(w in SECRET_WORDS for w in parts) or any(p in SECRET_WORDS for p in pairs)


class SecretArguments:
    """The secret-argument rule of one tool: named ones, plus the default names unless off."""

    def __init__(self, names: tuple[str, ...] = (), defaults: bool = True) -> None:
        self.names = frozenset(n.lower() for n in names)
        self.defaults = defaults

    def __call__(self, name: str) -> bool:
        return name.lower() in self.names or (self.defaults and says_secret(name))

    def wrap(self, value: Any) -> Any:
        """`value` with the value of every secret-named entry as a `Secret`, at any depth."""
        if isinstance(value, dict):
            return {
                k: (Secret(v) if self(str(k)) and not isinstance(v, Secret) else self.wrap(v))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.wrap(v) for v in value]
        return value
