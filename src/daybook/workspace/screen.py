"""Screen: a UI (a browser page, a desktop window) a run acts on, checked by the hash of its view.

This module owns `Screen`. `look` records the hash of the view the agent decides on. `act`
performs a tool (a click, a keystroke) as a journaled effect, guarded on both sides: before
the act, taken live (on the first execution and on a resume alike), the view must still hash as
the last look or act left it, else `ReplayDiverged` (the screen changed under the run: a
navigation, a modal, a person at the keyboard); after it, the view must have changed, else
`ActionHadNoEffect` (the act missed). Both hashes are recorded, so a replay raises the same.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ..context import Context
from ..errors import ActionHadNoEffect, ConfigError, ReplayDiverged
from ..journal.tool import Tool

POLICIES = ("park", "redecide")


def view_hash(view: Any) -> str:
    """A stable hash of a view: bytes and text as they are, anything else as sorted JSON."""
    if isinstance(view, bytes):
        data = view
    elif isinstance(view, str):
        data = view.encode()
    else:
        data = json.dumps(view, sort_keys=True, default=str).encode()
    return hashlib.sha256(data).hexdigest()


class Screen:
    """A UI seen through `view()` (a page's HTML or accessibility tree, a screenshot's bytes;
    whatever is hashed must change exactly when the screen does). `on_drift`: "park" (raise
    `ReplayDiverged`) or "redecide" (`act` returns None after looking again, so the workflow
    decides on the new view)."""

    def __init__(self, view: Callable[[], Any], *, name: str = "screen", on_drift: str = "park") -> None:
        if on_drift not in POLICIES:
            raise ConfigError(f"Screen(on_drift={on_drift!r}): choose one of {', '.join(POLICIES)}")
        self.view = view
        self.name = name
        self.on_drift = on_drift

    def __repr__(self) -> str:
        return f"Screen({self.name!r})"

    def _seen(self, ctx: Context) -> list[str]:
        return ctx.held(self)

    def look(self, ctx: Context) -> str:
        """Record the hash of the view now: what the next act assumes the screen shows."""
        seen: str = ctx.decide(f"{self.name}.look", lambda: view_hash(self.view())).value
        self._seen(ctx)[:] = [seen]
        return seen

    def act(self, ctx: Context, tool: Tool[Any], **args: Any) -> Any:
        """Perform `tool(**args)` on the screen (see the module). Returns the tool's result, or
        None when the view changed before the act and `on_drift="redecide"` (nothing was done;
        the new view is looked at and recorded)."""
        seen = self._seen(ctx)
        if not seen:
            self.look(ctx)
        assumed = seen[0]
        step = ctx._exe.next_step
        # Checked live right before a live act, on the first execution and on a resume alike;
        # recorded, so a replay of this step sees the same answer.
        replayed = ctx._exe.next_step in ctx._exe.steps
        before: str = ctx.decide(f"{self.name}.before", lambda: view_hash(self.view())).value
        if replayed and ctx._exe.next_step not in ctx._exe.steps:
            # Killed between the check and the act: the act runs now, so the screen is
            # checked now (unrecorded: a replay that gets this far has the act recorded).
            before = view_hash(self.view())
        if before != assumed:
            if self.on_drift == "redecide":
                seen[:] = [before]
                return None
            raise ReplayDiverged(
                f"run {ctx.run_id!r} step {step}: the {self.name} changed since the run looked at "
                f"it (view {assumed[:12]} assumed, {before[:12]} now); nothing was done. Decide "
                "again on the new view (Screen(on_drift='redecide')), or put the screen back and "
                f"`daybook retry {ctx.run_id}`",
                step=step,
                assumed={"view": assumed},
                live={"view": before},
            )
        result = ctx.effect(tool, **args)
        after: str = ctx.decide(f"{self.name}.after", lambda: view_hash(self.view())).value
        seen[:] = [after]
        if after == before:
            raise ActionHadNoEffect(
                f"run {ctx.run_id!r}: {tool.name} left the {self.name} unchanged (view {after[:12]}): "
                "the act missed (a disabled control, a stale element). Look again and decide anew",
                step=ctx._exe.next_step - 1,
            )
        return result
