"""The store knows its codec: which payload codec (and which keys, by fingerprint) wrote it, so a
handle with no codec or a wrong key is refused at open, before it writes anything.

Recorded in `daybook_meta` by the first read-write handle with a codec: `codec` = the codec's
name and its writing key's fingerprint (`codec.key_fingerprint`: a domain-separated SHA-256,
never the key), then one `codec_key:<fingerprint>` row per key a rotation made the writer.
Rows are only ever inserted (the least-privilege role needs no UPDATE). A read-write handle is
refused (ConfigError, nothing written) when the store records a codec and the handle has none,
another one, or none of the recorded keys. A handle that holds a recorded key and a new one
first (a rotation: `$DAYBOOK_CODEC_KEY=new,old`) is accepted and records the new key, which
then opens the store on its own. A read-only handle is never refused here: listings work
without the key, and reading a payload says which codec it needs.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .codec import ENV, PayloadCodec

NAME = "codec"
KEY = "codec_key:"


def fingerprints(codec: PayloadCodec) -> tuple[str, ...]:
    """The codec's key fingerprints, the writing key first; () for a codec without keys."""
    found = getattr(codec, "fingerprints", None)
    return tuple(found()) if callable(found) else ()


def verify(store: Any, codec: PayloadCodec | None) -> None:
    """Refuse a read-write handle whose codec is not the store's (see the module docstring);
    record the codec at a handle's first open with it."""
    if store.read_only:
        return
    name, keys = _recorded(store.meta_items(NAME))
    if codec is None:
        if name is not None:
            raise ConfigError(_keyless(store.url, name, keys))
        return
    mine = fingerprints(codec)
    if name is None:
        # The first handle with a codec: its name and writing key in one row, inserted once, so
        # of two first handles with different keys only one is recorded (the other is refused).
        first = store.meta_value(NAME, " ".join((codec.name, *mine[:1])))
        name, keys = _recorded({NAME: first})
    if name != codec.name:
        raise ConfigError(
            f"the store {store.url} is written with the {name!r} payload codec and this handle "
            f"has {codec.name!r}: open it with the {name!r} codec; nothing was written"
        )
    if keys and not set(mine) & set(keys):
        raise ConfigError(
            f"the store {store.url} encrypts its payloads under {_which(keys)}, and this handle's "
            f"{codec.name!r} keys ({', '.join(mine) or 'none'}) are none of them: give "
            f"{'that key' if len(keys) == 1 else 'one of them'} (${ENV}=KEY, or a new key first "
            f"and then that one to rotate: ${ENV}=NEW,KEY); nothing was written"
        )
    if mine and mine[0] not in keys:
        store.meta_value(KEY + mine[0], "writes")  # a rotation: the new key writes from now on


def _recorded(rows: dict[str, str]) -> tuple[str | None, list[str]]:
    """The recorded codec name and key fingerprints: the first key in the `codec` row (`name
    fingerprint`), each later one (rotations) in a `codec_key:` row."""
    first = rows.get(NAME)
    if first is None:
        return None, []
    name, *keys = first.split()
    return name, sorted({*keys, *(k.removeprefix(KEY) for k in rows if k.startswith(KEY))})


def _which(keys: list[str]) -> str:
    if len(keys) == 1:
        return f"the key with fingerprint {keys[0]}"
    return f"keys with fingerprints {', '.join(keys)}"


def _keyless(url: str, name: str, keys: list[str]) -> str:
    which = f" under {_which(keys)}" if keys else ""
    return (
        f"the store {url} encodes its payloads with the {name!r} payload codec{which}, and this "
        f"handle has no codec, so it would write them in clear: give the key (${ENV}=KEY, or "
        "Daybook(codec=FernetCodec(KEY))), or open the store read-only to list it; nothing "
        "was written"
    )
