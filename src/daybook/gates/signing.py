"""Approver keys and signatures: what makes a verdict (or an operator's act) unforgeable.

An approver's credential is an Ed25519 private key, handed over as text (the "token":
`dbk1_` and the key's 32-byte seed in URL-safe base64), printed once by `daybook approvers
add` or written to the key file the approver keeps. Only its public key is kept, in the
approvers file outside the store (`gates.roster`). A signature covers a small JSON document
(canonical: sorted keys, no spaces), e.g. a verdict's run, gate, act digest, outcome, reason
and approver, so a row written into the store by anyone without the private key (the agent's
own database role included) does not verify.

The `cryptography` package does the signing; it is imported when first needed, so a process
that never signs or checks pays nothing for it.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, NotAuthorized

PREFIX = "dbk1_"
PUBLIC = "ed25519:"


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:  # pragma: no cover - a core dependency; the message is for stripped installs
        raise ConfigError(
            "approver keys need the `cryptography` package: pip install 'daybook-runtime[crypto]'"
        ) from None
    return ed25519


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_token() -> str:
    """A fresh private key, as the token text an approver keeps."""
    return PREFIX + _b64(os.urandom(32))


def _private(token: str) -> Any:
    if not token.startswith(PREFIX):
        raise NotAuthorized(
            "this is not an approver key (it does not start with 'dbk1_'): tokens from before "
            "signed verdicts no longer work; re-register with `daybook approvers add NAME` and "
            "use the key it gives"
        )
    try:
        seed = _unb64(token[len(PREFIX) :].strip())
    except ValueError:
        seed = b""
    if len(seed) != 32:
        raise NotAuthorized("the approver key is damaged (not 32 bytes); use the key as it was given")
    return _crypto().Ed25519PrivateKey.from_private_bytes(seed)


def public_of(token: str) -> str:
    """The public key (`ed25519:<base64>`) of a token: what the approvers file keeps."""
    from cryptography.hazmat.primitives import serialization

    raw = (
        _private(token).public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    return PUBLIC + _b64(raw)


def _message(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(token: str, fields: dict[str, Any]) -> str:
    """The signature of `fields` (canonical JSON) with the token's private key."""
    return _b64(_private(token).sign(_message(fields)))


def verify(public: str, fields: dict[str, Any], signature: object) -> bool:
    """Whether `signature` is the holder of `public`'s over `fields` (False for anything
    malformed: a missing or damaged signature, a key that is not Ed25519)."""
    if not isinstance(signature, str) or not public.startswith(PUBLIC):
        return False
    ed25519 = _crypto()
    from cryptography.exceptions import InvalidSignature

    try:
        key = ed25519.Ed25519PublicKey.from_public_bytes(_unb64(public[len(PUBLIC) :]))
        key.verify(_unb64(signature), _message(fields))
    except (InvalidSignature, ValueError):
        return False
    return True


def read_key_file(path: str | os.PathLike[str]) -> str:
    """The token kept in a key file (`daybook approvers add NAME --key-file PATH`)."""
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the approver key file {os.fspath(path)!r}: {exc.strerror}") from None
    except ValueError as exc:  # not text, or a path with a NUL byte
        raise ConfigError(f"cannot read the approver key file {os.fspath(path)!r}: {exc}") from None


def write_key_file(path: str | os.PathLike[str], token: str) -> None:
    """Write a token to a new file only its owner can read (0600)."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.chmod(target, 0o600)
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        why = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"cannot write the approver key file {os.fspath(path)!r}: {why}") from None
