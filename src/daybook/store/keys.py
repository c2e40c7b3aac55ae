"""The secret key and the keyed digest: how a secret value is written to the journal.

A secret (a `daybook.Secret`, a tool argument named in `secrets=`, a secret tool result) is
journaled as `hmac-sha256:<hex>`, an HMAC-SHA256 of the value's canonical JSON under the store's
secret key. The digest is stable across processes (so replay's fingerprint check passes) and
tells an auditor whether two runs used the same value, without holding the value.

Where the key comes from, first found wins:
1. `Daybook(secret_key=...)` (bound to the store handle with `bind_key`);
2. `$DAYBOOK_SECRET_KEY`;
3. a random key the store makes once and keeps in `daybook_meta` (`secret_key`).

The third is a convenience with a cost: anyone holding the store file (or a database dump)
holds the key, and can test guesses of a low-entropy secret (a PIN, a short password) against
its digest. An operator-given key, kept apart from the store (a secret manager, the
environment), closes that; use one in production.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets as _random
import weakref
from typing import Any

from ..errors import ConfigError
from ..records import JSON, canonical

ENV = "DAYBOOK_SECRET_KEY"
PREFIX = "hmac-sha256:"
META = "secret_key"

_BOUND: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()


def as_key(value: str | bytes, what: str) -> bytes:
    """A key given as text or bytes; refused when too short to resist guessing."""
    raw = value.encode() if isinstance(value, str) else bytes(value)
    if len(raw) < 16:
        raise ConfigError(
            f"{what} is {len(raw)} bytes; a secret key needs at least 16 (make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    return raw


def bind_key(store: Any, key: str | bytes | None) -> None:
    """Make `key` the secret key of every digest written through `store` (None: unbind)."""
    if key is None:
        _BOUND.pop(store, None)
    else:
        _BOUND[store] = as_key(key, "secret_key")


def key_for(store: Any) -> bytes:
    """The secret key for digests written through `store` (see the module docstring)."""
    found = _BOUND.get(store)
    if found is not None:
        return found
    env = os.environ.get(ENV)
    if env:
        key = as_key(env, f"${ENV}")
    else:
        key = as_key(store.meta_value(META, _random.token_urlsafe(32)), "the store's secret key")
    _BOUND[store] = key
    return key


def digest(key: bytes, value: JSON) -> str:
    """The keyed digest of a JSON value: `hmac-sha256:` and 32 hex digits (128 bits)."""
    mac = hmac.new(key, canonical(value).encode("utf-8", "backslashreplace"), hashlib.sha256)
    return PREFIX + mac.hexdigest()[:32]
