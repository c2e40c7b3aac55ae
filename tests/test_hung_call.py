"""A call with no timeout runs in the workflow's thread; the lease heartbeat knows it runs and
logs one that hangs past `hung_after`, once (nothing else would say why the run waits)."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest

import daybook
from daybook.journal.driver import call_inline
from daybook.runtime.lease import Heartbeat


def test_a_call_running_past_hung_after_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    beat = Heartbeat(lambda: True, 0.01, hung_after=0.05)
    try:
        with caplog.at_level(logging.WARNING, logger="daybook"):
            beat.calling = ("send_wire", "r1", "r1/1", time.monotonic())
            deadline = time.monotonic() + 5
            while "has run for" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.1)  # more beats: no second line for the same call
    finally:
        beat.stop()
    lines = [r.getMessage() for r in caplog.records if "has run for" in r.getMessage()]
    assert len(lines) == 1
    assert "send_wire" in lines[0] and "r1/1" in lines[0] and "Retry(timeout=" in lines[0]


def test_the_hot_path_tells_the_heartbeat_while_the_call_runs() -> None:
    seen: list[Any] = []
    beat = SimpleNamespace(calling=None)
    exe: Any = SimpleNamespace(heartbeat=beat, run_id="r1")

    @daybook.tool
    def act(*, idempotency_key: str) -> int:
        seen.append(beat.calling)
        return 1

    assert call_inline(exe, act, "r1/1", {}) == ("ok", 1)
    assert seen[0][:3] == ("act", "r1", "r1/1")
    assert beat.calling is None  # cleared once the call returned
