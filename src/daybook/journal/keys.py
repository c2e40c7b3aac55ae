"""The key grammar: every decorated idempotency key (and the MCP proxy's call names) is built
here, and only here, so the stored formats stay one thing.

    <run id>/<step>              an effect's default key (a decision's id)
    <decision id>/<kind>/<i>     a key derived from a decision (`ctx.key`)
    <key>~r<branch>              the same step run again on a journal branch (recovery)
    <key>#attempt<n>             the act of a transaction's n-th attempt (n > 1): a new act
    comp/<key>                   the undo of the act under <key> (an inverse, a proposed undo)

(The MCP proxy's call names, `mcp/key/...` and `mcp/<session>/...`, are its own, in
`integrations/mcp/naming.py`: integrations import public `daybook` names only.)

The formats are stored in journals: changing one breaks the replay of existing runs.
"""

from __future__ import annotations

import re

COMP = "comp/"
_BRANCH = re.compile(r"(?:~|%7[Ee])r[0-9]+(?=/|$)")


def step_key(owner: str, step: int) -> str:
    """The default key of the effect (the id of the decision) at `step` of `owner` (a run)."""
    return f"{owner}/{step}"


def decision_key(decision_id: str, kind: str, i: int = 0) -> str:
    """`<decision id>/<kind>/<i>`: names the decision, not its inputs."""
    return f"{decision_id}/{kind}/{i}"


def branched(key: str, branch: int) -> str:
    """The key of a step run again on journal branch `branch`."""
    return f"{key}~r{branch}"


def unbranched(key: str | None) -> str:
    """A key without journal-branch suffixes (also URL-encoded, as in a Message-ID): the same
    act asked for on a later branch."""
    return _BRANCH.sub("", key or "")


def attempt_key(key: str, attempt: int) -> str:
    """The key of an act of a transaction's `attempt` (the first attempt keeps the key)."""
    return key if attempt <= 1 else f"{key}#attempt{attempt}"


def compensation_key(key: str) -> str:
    """The key of the undo of the act under `key`."""
    return f"{COMP}{key}"


def is_compensation(key: str | None) -> bool:
    return (key or "").startswith(COMP)


def compensated(key: str) -> str:
    """The key of the act an undo under `key` (`comp/<key>`) undoes."""
    return key[len(COMP) :]
