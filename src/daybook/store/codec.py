"""Payload codecs: a whole-payload policy applied by the store to what it writes and reads, the
way Temporal's payload codecs work.

A codec turns a payload's JSON bytes into other bytes and back. The store applies it to every
journal row's `data` and to a run header's `input`, `result` and `error`; the audit spine (run
ids, kinds, step names, keys, statuses, fingerprints, times, the decision an effect links to)
stays in clear, so listings, `daybook effects` and reconciliation work without the key.

An opaque codec's output is kept as JSON too (the journal holds JSON only):
`{"$codec": "<name>", "data": "<base64>"}`. A transparent codec (`opaque = False`) returns JSON
bytes, stored as they are. Shipped: `FernetCodec` (encryption, `pip install 'daybook-runtime[crypto]'`)
and `RedactingCodec` (named fields as keyed digests, everywhere in every payload).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, CorruptJournal
from ..records import JSON
from .keys import as_key, digest

ENVELOPE = "$codec"
# Kept in clear beside an opaque payload: the decision an intent links to (the store indexes it).
# `fork_of`: the run a fork shares rows with, which retention must see to keep it.
SPINE = ("decision", "fork_of")
ENV = "DAYBOOK_CODEC_KEY"
_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode


@runtime_checkable
class PayloadCodec(Protocol):
    """What a payload codec is: a name, and bytes -> bytes both ways."""

    name: str
    # False when `encode` returns JSON bytes that may be stored as they are.
    opaque: bool

    def encode(self, data: bytes) -> bytes: ...

    def decode(self, data: bytes) -> bytes: ...


class FernetCodec:
    """Encrypts every payload with Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`).

    `keys`: one or more Fernet keys (`FernetCodec.new_key()` makes one); the first encrypts, all
    decrypt, so a key is rotated by putting the new one first. Without the key the journal's
    payloads cannot be read, by anyone, including daybook: keep the key safe and backed up."""

    name = "fernet"
    opaque = True

    def __init__(self, *keys: str | bytes) -> None:
        try:
            from cryptography.fernet import Fernet, MultiFernet
        except ImportError:  # pragma: no cover - exercised only without the extra
            raise ConfigError(
                "FernetCodec needs the cryptography package: pip install 'daybook-runtime[crypto]' "
                "(or pip install 'cryptography>=41')"
            ) from None
        if not keys:
            raise ConfigError("FernetCodec needs at least one key (FernetCodec.new_key())")
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])
            self._prints = tuple(key_fingerprint(k) for k in keys)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"FernetCodec: a key is not a Fernet key ({exc}); make one with "
                "FernetCodec.new_key() (32 url-safe base64-encoded bytes)"
            ) from None

    def fingerprints(self) -> tuple[str, ...]:
        """Each key's fingerprint, the writing key first (what the store records; see
        `key_fingerprint`)."""
        return self._prints

    @staticmethod
    def new_key() -> str:
        from cryptography.fernet import Fernet

        return Fernet.generate_key().decode()

    def encode(self, data: bytes) -> bytes:
        return self._fernet.encrypt(data)

    def decode(self, data: bytes) -> bytes:
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(data)
        except InvalidToken:
            raise ConfigError(
                "a payload encrypted by FernetCodec does not decrypt with the keys given: the "
                "store was written under another key; give that key (first, or among the keys)"
            ) from None


class RedactingCodec:
    """Writes the value of every field named in `fields`, at any depth of any payload, as a
    keyed digest (`{"$secret": "hmac-sha256:..."}`): a store-wide policy such as "no field called
    password, ever". Nothing comes back: replay reads the mark (`{"$secret": ...}`) in its place.
    The step's fingerprint is taken before any codec; to have it taken over the digest, mark
    the argument on the tool (`secrets=`)."""

    name = "redact"
    opaque = False

    def __init__(self, fields: tuple[str, ...] | list[str], key: str | bytes | None = None) -> None:
        if isinstance(fields, str) or not fields:
            raise ConfigError("RedactingCodec(fields=...) takes a tuple of field names to redact")
        self.fields = frozenset(fields)
        given = key or os.environ.get("DAYBOOK_SECRET_KEY")
        # Without an operator key the digest is a plain one (still never the value).
        self._key = as_key(given, "RedactingCodec key") if given else b"daybook-redact"

    def encode(self, data: bytes) -> bytes:
        return _ENCODE(self._redact(json.loads(data))).encode()

    def decode(self, data: bytes) -> bytes:
        return data

    def _redact(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: (
                    {"$secret": digest(self._key, v)}
                    if k in self.fields and not _marked(v)
                    else self._redact(v)
                )
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._redact(v) for v in value]
        return value


def _marked(value: Any) -> bool:
    return isinstance(value, dict) and "$secret" in value


def key_fingerprint(key: str | bytes) -> str:
    """A non-reversible name for a codec key: a domain-separated SHA-256 of it, 16 hex digits.
    The store records it (never the key) to refuse a handle with another key at open."""
    raw = key.encode() if isinstance(key, str) else bytes(key)
    return "sha256:" + hashlib.sha256(b"daybook codec key\0" + raw.strip()).hexdigest()[:16]


def from_env() -> PayloadCodec | None:
    """The codec `$DAYBOOK_CODEC_KEY` names: a FernetCodec with those keys (comma-separated),
    so workers and the CLI read an encrypted store without code. None when unset."""
    raw = os.environ.get(ENV, "").strip()
    return FernetCodec(*[k.strip() for k in raw.split(",") if k.strip()]) if raw else None


def encode_payload(codec: PayloadCodec, value: JSON, spine: bool = False) -> JSON:
    """`value` as the store keeps it under `codec` (`spine`: keep SPINE fields in clear)."""
    if value is None:
        return None
    out = codec.encode(_ENCODE(value).encode())
    if not codec.opaque:
        return json.loads(out)
    sealed: dict[str, JSON] = {ENVELOPE: codec.name, "data": base64.b64encode(out).decode("ascii")}
    if spine and isinstance(value, dict):
        sealed.update({k: value[k] for k in SPINE if k in value})
    return sealed


def decode_payload(codec: PayloadCodec | None, value: JSON) -> JSON:
    """A stored payload as the runtime reads it: an envelope opened with `codec`."""
    if not (isinstance(value, dict) and ENVELOPE in value):
        return value
    name = value[ENVELOPE]
    if codec is None or codec.name != name:
        raise ConfigError(
            f"a payload is encoded by the {name!r} payload codec, and this handle has "
            f"{'none' if codec is None else repr(codec.name)}: open the store with that codec "
            f"(Daybook(codec=...), or ${ENV} for Fernet)"
        )
    try:
        opened: JSON = json.loads(codec.decode(base64.b64decode(value["data"])))
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptJournal(f"a {name!r} payload does not decode ({exc})") from None
    # What the store set beside the envelope in clear (a transaction's epoch, the spine).
    beside = {k: v for k, v in value.items() if k not in (ENVELOPE, "data")}
    return {**opened, **beside} if beside and isinstance(opened, dict) else opened
