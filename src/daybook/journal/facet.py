"""The base of every part of `ctx`: the execution cursor it records into.

`Context` is assembled from facets (decisions, effects, waits here; gates, obligations, budget,
compensation, updates in the packages that own those nouns). Each facet is a mixin over this
base, so `ctx.*` stays one flat object for the user while each noun lives in its own module.
"""

from __future__ import annotations

from .execution import Execution


class Facet:
    """Holds the execution; every facet reads `_exe` and nothing else of the others' state."""

    def __init__(self, exe: Execution) -> None:
        self._exe = exe

    @property
    def run_id(self) -> str:
        return self._exe.run_id
