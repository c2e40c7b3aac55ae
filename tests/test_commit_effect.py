"""The multi-record commit as an effect (T9), with the invoice example (examples/invoice.py):
the tool that makes an atomic 4-record commit is one effect with one key and the commit id as its
counterparty reference; a second call under the key returns the same commit; a SIGKILL at each
point of the run leaves exactly one invoice. Asserted at the store's records and commit log."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import HERE, killed, last_json

import daybook
from daybook import Daybook

EXAMPLE = HERE.parent / "examples" / "invoice.py"
LINES = [{"description": "seats", "qty": 10, "unit_price": 150}, {"description": "setup", "unit_price": 350}]


def _env(db_url: str) -> dict[str, str]:
    return {**os.environ, "DAYBOOK_DB": db_url}


def _child(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(HERE / "invoice_child.py"), db_url, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _invoice(tx: daybook.Transaction, number: str, lines: list[dict[str, float]]) -> float:
    total = 0.0
    for i, line in enumerate(lines, 1):
        total += line.get("qty", 1) * line["unit_price"]
        tx.put("lines", f"{number}/{i}", line)
    tx.put("invoices", number, {"total": total})
    return total


def test_the_invoice_example_runs_and_its_commit_is_the_effects_reference(db_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "INV-9"], capture_output=True, text=True, timeout=120, env=_env(db_url)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with Daybook(db_url) as book:
        [commit] = book.commits()
        assert commit["message"] == "Create invoice INV-9" and len(commit["records"]) == 4  # type: ignore[arg-type]
        [effect] = book.effects("bill-INV-9")
        assert effect["ref"] == commit["commit_id"] and effect["key"] == commit["key"]
        assert book.record("invoices", "INV-9") == {"total": 1750.0, "lines": 3}
    assert f"reference {commit['commit_id']}" in proc.stdout


def test_calling_the_commit_tool_twice_with_one_key_makes_one_commit_and_returns_it(book: Daybook) -> None:
    create = book.commit_tool(_invoice, message="Create invoice {number}", name="create_test_invoice")
    first = create(number="INV-2", lines=LINES, idempotency_key="run-1/3")
    second = create(number="INV-2", lines=LINES, idempotency_key="run-1/3")
    assert first["commit_id"] == second["commit_id"] and first["result"] == second["result"] == 1850
    assert len(book.commits()) == 1 and book.orphans() == []
    other = create(number="INV-3", lines=LINES, idempotency_key="run-1/4")
    assert other["commit_id"] != first["commit_id"] and len(book.commits()) == 2


def test_without_the_key_a_retry_after_a_crash_commits_the_invoice_twice(book: Daybook) -> None:
    """The control: the same two calls as a plain script makes them (no key) leave two commits."""
    for _ in range(2):
        book.transaction("Create invoice INV-4", lambda tx: _invoice(tx, "INV-4", LINES))
    assert len(book.commits()) == 2


@pytest.mark.parametrize(
    "kill", ["--kill-after=intent:1", "--kill-before=outcome:1", "--kill-after=outcome:1"]
)
def test_a_kill_at_each_point_of_the_billing_run_leaves_one_invoice_and_one_commit(
    db_url: str, kill: str
) -> None:
    flag, at = kill.split("=")
    dead = _child(db_url, "start", "bill-k", "INV-5", flag, at)
    assert killed(dead), dead.stdout + dead.stderr
    resumed = _child(db_url, "resume", "bill-k", "INV-5")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    result = last_json(resumed.stdout)["result"]  # type: ignore[index]
    with Daybook(db_url) as book:
        [commit] = book.commits()  # one invoice, whatever the crash point
        assert result["commit_id"] == commit["commit_id"] and result["records"] == 4
        assert book.record("invoices", "INV-5") == {"total": 1750.0, "lines": 3}
        [effect] = book.effects("bill-k")
        assert effect["ref"] == commit["commit_id"] and effect["status"] == "confirmed"
        assert book.orphans() == []


@pytest.mark.parametrize(
    ("write", "message", "says"),
    [
        ("not a function", "x", "stages the records"),
        (_invoice, "", "audit text"),
        (lambda: None, "x", "transaction first"),
    ],
)
def test_a_commit_tool_made_wrong_is_refused_with_what_to_write(
    book: Daybook, write: object, message: str, says: str
) -> None:
    with pytest.raises(daybook.DaybookError, match=says):
        book.commit_tool(write, message=message)  # type: ignore[arg-type]


def test_a_message_naming_an_argument_the_call_lacks_says_which(book: Daybook) -> None:
    create = book.commit_tool(_invoice, message="Invoice {customer}", name="create_named_invoice")
    with pytest.raises(daybook.DaybookError, match="customer"):
        create(number="INV-6", lines=LINES, idempotency_key="k")
    assert book.commits() == []
