"""The boundary linter: which legal FSM edges a reviewed config does not certify as exits.

A legal transition is only controller reachability (DART Lemma 1): `WAITING_POI_SELECTION ->
STOP_READY` is legal, yet it leaves a branch open, so recovery must not treat it as a closed
boundary. Given the agent's legal transitions and each skeleton's reviewed exits, the linter lists
every legal edge out of a skeleton's states that is not a reviewed exit, each reviewed exit that
is not a legal edge (a typo, or a stale config), and the counts per skeleton (T24/T25).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .subtask import Skeleton, skeletons_of

Edge = tuple[str, str]


@dataclass(frozen=True)
class Finding:
    skeleton: str
    edge: Edge
    verdict: str  # exit boundary | legal, not a reviewed exit | reviewed exit, not legal


def lint(transitions: Iterable[Edge], skeletons: Iterable[Skeleton]) -> list[Finding]:
    """Every edge out of each skeleton's states, judged against its reviewed exits."""
    legal = {(str(a), str(b)) for a, b in transitions}
    found = []
    for skel in skeletons:
        inside = set(skel.states)
        exits = set(skel.exits)
        for edge in sorted(legal):
            leaves = edge[0] in inside and edge[1] not in inside
            if edge in exits:
                found.append(Finding(skel.name, edge, "exit boundary"))
            elif leaves:
                found.append(Finding(skel.name, edge, "legal, not a reviewed exit"))
        for edge in sorted(exits - legal):
            found.append(Finding(skel.name, edge, "reviewed exit, not legal"))
    return found


def summary(transitions: Iterable[Edge], skeletons: Iterable[Skeleton]) -> dict[str, Any]:
    """The config's size (T25): skeletons, commit and exit boundaries, states, legal edges."""
    skels = list(skeletons)
    legal = list(transitions)
    return {
        "skeletons": len(skels),
        "commit": sum(len(s.commits) for s in skels),
        "exit": sum(len(s.exits) for s in skels),
        "states": len({x for a, b in legal for x in (a, b)}),
        "legal_edges": len(legal),
    }


def load(path: str | Path) -> tuple[list[Edge], list[Skeleton]]:
    """A reviewed boundary config (JSON): {"transitions": [[from, to], ...], "skeletons": [...]}."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the boundary config: {exc}") from None
    edges = data.get("transitions") if isinstance(data, dict) else None
    if not isinstance(edges, list) or not all(isinstance(e, list) and len(e) == 2 for e in edges):
        raise ConfigError(f"{path}: 'transitions' must be a list of [from, to] state pairs")
    return [(str(a), str(b)) for a, b in edges], skeletons_of(data, str(path))
