"""The five scripted domains (spec §4.1): what each is made of and where its counterparty lives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cases import Shape
from dart_resources import Counterparty


@dataclass(frozen=True)
class Fsm:
    """A domain agent's FSM and its reviewed boundary config (T24/T25/T27): legal transitions,
    per skeleton its states, reviewed commit states and exit edges; `resolved` is the manifest's
    word for where each skeleton's work is settled (the config is re-derived from it)."""

    transitions: list[tuple[str, str]]
    skeletons: dict[str, dict[str, Any]]
    open_edges: list[tuple[str, str]] = field(default_factory=list)  # legal, leave a branch unresolved


@dataclass(frozen=True)
class Domain:
    name: str
    title: str
    shape: Shape
    setup: Callable[[str], Counterparty]
    effect_audit: bool  # durable effects are part of safe-equivalence (T20)
    prefix_audit: bool  # committed-prefix preservation is part of it (ETL, travel)
    llm: bool
    fsm: Fsm | None = None


def all_domains() -> list[Domain]:
    from . import diagnosis, etl, navigation, schedule, travel

    return [navigation.DOMAIN, schedule.DOMAIN, diagnosis.DOMAIN, etl.DOMAIN, travel.DOMAIN]
