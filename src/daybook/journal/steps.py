"""`Steps`: the recorded primitives every other part of `ctx` is built from.

Decisions, effects and durable waits, in one class. The facets that higher layers own (gates,
obligations, budget, compensation, updates, the barrier) are mixins over it, and `Context`
(`daybook.context`) puts them together.
"""

from __future__ import annotations

from .decision import Decisions
from .effect import Effects
from .wait import Waits


class Steps(Effects, Decisions, Waits):
    """`ctx.decide`, `ctx.effect`, `ctx.sleep`, `ctx.wait_for` and the reads built on them."""
