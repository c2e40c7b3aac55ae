"""How the proxy names the decision behind an MCP `tools/call` (its key, which is also its run id).

An MCP client sends no idempotency information of its own, so the proxy names each call by what
it can see, in this order:

1. A key the client gives: `_meta["daybook/idempotency_key"]` on the request, or the tool's own
   idempotency-key argument (when its input schema has one) filled in by the client. The call is
   `mcp/key/<tool>/<key>`: the same key is the same decision, in any session, after any restart;
   the same key with other arguments is refused.
2. Otherwise its position in the session: `mcp/<session>/<tool>/<digest>/<n>`, where `digest` is a
   canonical digest of the arguments (as journaled: secret ones as their keyed digests) and `n`
   counts the identical calls (same tool, same arguments) this proxy process has settled in the
   session: one pending approval or unknown is the same call when made again. A proxy restarted with the same
   `--run` counts from 0 again, so a client that repeats its calls after a crash meets the
   journal: confirmed calls answer from it, an unknown one is resolved, never re-sent blindly.
   An identical call that arrives while the first is still in flight joins it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

KEY_META = "daybook/idempotency_key"
MAX_KEY = 120


def digest(arguments: Any) -> str:
    """A canonical digest of a call's arguments (key order and whitespace do not matter)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _part(text: str) -> str:
    """A tool name or client key as a run-id segment: kept when short, else shortened with a hash."""
    if len(text) <= 60 and "/" not in text:
        return text
    return f"{text[:24].replace('/', '_')}~{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def client_key(meta: Any, arguments: dict[str, Any], key_argument: str | None) -> str | None:
    """The idempotency key the client gave, if any (in `_meta`, or the tool's key argument)."""
    found = meta.get(KEY_META) if isinstance(meta, dict) else None
    if found is None and key_argument is not None:
        found = arguments.get(key_argument)
    if found is None or found == "":
        return None
    return str(found)


def keyed_call(tool: str, key: str) -> str:
    return f"mcp/key/{_part(tool)}/{_part(key)}"


def positional_call(session: str, tool: str, args_digest: str, n: int) -> str:
    return f"mcp/{_part(session)}/{_part(tool)}/{args_digest}/{n}"
