"""The base of every facet of `ctx`: the execution cursor it records into.

`Context` (`daybook.context`) is one class whose methods delegate to facet objects: decisions,
effects and waits here; gates, obligations, budget, compensation, updates and transactions in
the packages that own those nouns. Each facet is built with the cursor and, explicitly, the
other facets it calls; none reaches into another's state.
"""

from __future__ import annotations

from .execution import Execution


class Facet:
    """Holds the execution cursor; a facet reads `_exe` and the facets it was given, no others."""

    def __init__(self, exe: Execution) -> None:
        self._exe = exe

    @property
    def run_id(self) -> str:
        return self._exe.run_id
