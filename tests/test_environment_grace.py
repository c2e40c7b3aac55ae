"""Liveness with a startup grace (S7): an environment that comes up within the grace is not read
as dead; one that never comes up fails the run once the grace is over, with its state kept, and
the run goes on by `retry` once the environment is back."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import daybook
from daybook import Daybook, RunStatus


@daybook.workflow
def build(ctx: daybook.Context, workdir: str, grace: float) -> str:
    where = ctx.environment(workdir, alive=os.path.isdir, grace=grace)
    Path(where, "out.txt").write_text("built")
    return Path(where, "out.txt").read_text()


def test_an_environment_that_comes_up_within_the_grace_is_not_marked_failed(
    book: Daybook, tmp_path: Path
) -> None:
    sandbox = tmp_path / "sandbox"
    later = threading.Timer(2.0, sandbox.mkdir)  # a cold start: visible only after 2 s
    later.start()
    try:
        assert book.run(build, str(sandbox), 5.0, run_id="cold") == "built"
    finally:
        later.cancel()
    assert book.get_run("cold").status == RunStatus.COMPLETED


def test_an_environment_that_never_comes_up_fails_the_run_after_the_grace_and_retry_goes_on(
    book: Daybook, tmp_path: Path
) -> None:
    sandbox = tmp_path / "never"
    with pytest.raises(daybook.RunFailed, match=r"not alive .* \(startup grace 1s\)"):
        book.run(build, str(sandbox), 1.0, run_id="gone")
    assert book.get_run("gone").status == RunStatus.FAILED
    sandbox.mkdir()  # the operator brings it back
    assert book.retry("gone") == "built"


def test_a_negative_grace_is_refused_with_a_clear_error(book: Daybook, tmp_path: Path) -> None:
    with pytest.raises(daybook.RunFailed, match="grace is seconds >= 0"):
        book.run(build, str(tmp_path), -1.0, run_id="bad")
