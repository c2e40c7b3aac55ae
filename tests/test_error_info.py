"""How an exception is journaled (`error_info`): one never raised (a speculation's `BranchLost`
for each loser, made only to be journaled) is written exactly as the traceback module writes
it, whatever its type, module or message; a raised one keeps its frames."""

from __future__ import annotations

import traceback

import pytest

from daybook.errors import DaybookError
from daybook.journal.failure import error_info
from daybook.records import safe_text
from daybook.tx.speculate import BranchLost


class _Local(Exception):
    pass


_Local.__module__ = "__main__"


def _expected(exc: BaseException) -> dict[str, str]:
    lines = traceback.format_exception(exc)
    return {
        "type": type(exc).__name__,
        "message": safe_text(str(exc)),
        "where": safe_text("".join(lines[-3:])[-2000:]),
        "traceback": safe_text("".join(lines)),
    }


@pytest.mark.parametrize(
    "exc",
    [
        BranchLost("branch 'b1' lost to 'b0'"),
        ValueError(""),
        KeyError("k"),
        DaybookError("it failed"),
        _Local("made in __main__"),
        OSError(2, "No such file"),
        ValueError("é ☃ multi\nline"),
    ],
)
def test_an_exception_never_raised_is_journaled_as_the_traceback_module_writes_it(exc: Exception) -> None:
    got = error_info(exc, full=True)
    want = _expected(exc)
    assert got == want


def test_a_raised_one_and_one_with_a_note_keep_the_traceback_modules_lines() -> None:
    try:
        raise BranchLost("raised")
    except BranchLost as exc:
        raised = exc
    where = error_info(raised, full=True)
    assert where["traceback"].startswith("Traceback (most recent call last):")
    assert "test_error_info.py" in where["traceback"]
    with_note = ValueError("noted")
    with_note.add_note("a note")
    assert error_info(with_note)["where"] == "".join(traceback.format_exception(with_note))
