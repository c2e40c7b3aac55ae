"""Liveness of a run's environment with a startup grace (S7): "not yet" is not "no longer".

A sandbox or a mounted workspace can take seconds to come up after a run starts (or resumes).
A check that reads "not visible" as "dead" fails healthy runs a moment after they begin, as the
seed's own incident did (runs failed about 250 ms into a 10-30 s cold start). So the check waits:
within `grace` seconds of this execution's start, an environment that does not answer alive yet
is polled again (with a growing pause, never a hot loop); past the grace it is gone, and the run
fails with `EnvironmentLost`, its state kept for `daybook retry`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import ConfigError, EnvironmentLost
from ..journal.execution import Execution

# The seed's fix: 90 s covers a sandbox's cold start with room to spare.
DEFAULT_GRACE = 90.0
FIRST_PAUSE = 0.05
LONGEST_PAUSE = 1.0


def await_alive(exe: Execution, handle: str, alive: Callable[[str], bool], grace: float) -> float:
    """Return once `alive(handle)` says yes (the seconds waited); raise `EnvironmentLost` when
    it still says no `grace` seconds after the execution started."""
    if not grace >= 0:
        raise ConfigError(f"the startup grace is seconds >= 0, not {grace!r}")
    began = time.time()
    pause = FIRST_PAUSE
    while not alive(handle):
        waited = time.time() - exe.started_at
        if waited >= grace:
            raise EnvironmentLost(
                f"run {exe.run_id!r}: its environment {handle!r} is not alive {waited:.1f}s after "
                f"the run started (startup grace {grace:g}s). The run failed with its journal kept: "
                f"bring the environment back, then `daybook retry {exe.run_id}`"
            )
        exe.settings.sleep(min(pause, grace - waited))
        pause = min(pause * 2, LONGEST_PAUSE)
    return time.time() - began
