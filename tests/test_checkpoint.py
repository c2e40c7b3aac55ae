"""The checkpoint as a document (S1) and a paused workspace kept (S3): three parts, metadata,
valid against the published JSON Schema; a paused run's environment is stopped, not destroyed."""

from __future__ import annotations

import json
from pathlib import Path

import agents
import jsonschema
import pytest
from conftest import cli_in_process

import daybook
from daybook import Daybook
from daybook.demo.bank import Bank

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "checkpoint.schema.json").read_text())


@daybook.workflow
def drafted(ctx: daybook.Context, workdir: str, bank: str) -> str:
    where = ctx.environment(workdir)
    Path(where, "draft.txt").write_text("first draft")
    plan = ctx.decide("plan", lambda: {"parts": 2}).value
    paid = ctx.effect(agents.book_leg, bank=bank, n=plan["parts"], fail_inverse_of=-1)
    ctx.wait_for("go", timeout=3600)
    return str(paid["id"])


def test_a_paused_run_checkpoint_has_three_parts_validates_and_keeps_its_workspace(
    book: Daybook, bank: Bank, tmp_path: Path
) -> None:
    book.inline_wait = 0
    with pytest.raises(daybook.Suspended):
        book.run(drafted, str(tmp_path), bank.url, run_id="cp")
    assert book.pause("cp") == "paused"
    doc = book.checkpoint("cp")
    jsonschema.validate(doc, SCHEMA)
    assert doc["schema_version"] == 1 and str(doc["saved_at"]).startswith("20")
    log = doc["environment"].pop("log")  # type: ignore[union-attr]
    assert doc["environment"] == {
        "kind": "directory",
        "handle": str(tmp_path),
        "remove_on_expiry": False,
        "status": "stopped",
    }
    assert [e["action"] for e in log] == ["declared"]  # no hooks: declared, never started by daybook
    assert (tmp_path / "draft.txt").read_text() == "first draft"  # stopped, never destroyed
    progress = doc["progress"]
    assert progress["step_status"] == {"1": "committed", "2": "committed", "3": "committed", "4": "pending"}  # type: ignore[index]
    assert progress["committed_boundary"] == 3 and progress["current_step_id"] == 4  # type: ignore[index]
    assert doc["executor"]["scratchpad"] == {"plan": {"parts": 2}}  # type: ignore[index]
    names = [entry["name"] for entry in doc["executor"]["trace"]]  # type: ignore[index,union-attr]
    assert names == ["environment", "plan", "book_leg", "book_leg"]
    shown = cli_in_process("export", "cp", "--checkpoint", db=book.url)
    assert shown.returncode == 0, shown.stderr
    jsonschema.validate(json.loads(shown.stdout), SCHEMA)


def test_an_act_without_its_outcome_is_running_in_the_checkpoint(book: Daybook, bank: Bank) -> None:
    # The reply never arrives and the status service is down: the outcome stays unknown.
    bank.faults.drop_after_execute = 99
    bank.faults.status_down = 99
    with pytest.raises(daybook.DaybookError):
        book.run(agents.payments, bank.url, 1, run_id="open")
    doc = book.checkpoint("open")
    jsonschema.validate(doc, SCHEMA)
    assert doc["progress"]["step_status"]["2"] == "running"  # type: ignore[index]
    assert doc["progress"]["committed_boundary"] == 1  # type: ignore[index]
    with pytest.raises(daybook.RunNotFound):
        book.checkpoint("nope")
