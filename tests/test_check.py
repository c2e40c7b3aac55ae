"""The store as an auditor reads it: `daybook check` finds every damaged row (and nothing in a
sound store), one damaged run does not block the commands that list every run, and
`daybook export RUN --raw` salvages what of a damaged run is readable."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import agents
import pytest
from conftest import cli, cli_in_process
from test_append_only import _sql

import daybook
from daybook import CorruptJournal, Daybook, NeedsAttention, RunStuck, Suspended


def _runs_of_every_kind(book: Daybook, bank: str) -> None:
    """Decisions, effects with retries and status queries, a compensation that gets stuck, a
    budget, an agent loop, a gate and a signal wait left open, a transaction and an entity."""
    book.run(agents.payments, bank, 3, run_id="pay")
    book.run(agents.spender, 4, run_id="spend")
    book.run(agents.looped, bank, "ok", run_id="loop")
    book.add_approver("oncall")
    with pytest.raises(RunStuck):
        book.run(agents.saga, bank, 3, 1, "irreversible", run_id="stuck")
    for run_id, workflow, args in (
        ("gate", agents.restart, (bank, 3600.0)),
        ("wait", agents.approval, (bank,)),
    ):
        with pytest.raises((Suspended, NeedsAttention)):
            book.run(workflow, *args, run_id=run_id)
    book.signal("wait", "approve", {"ok": True}, sender="carol")
    book.transaction("one", lambda tx: tx.put("c", "1", {"v": 1}), key="tx-1")
    book.entity("desk").claim("agent-a", 60)


@pytest.mark.slow
def test_check_finds_nothing_in_a_sound_store(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    with Daybook(db_url, inline_wait=0.1) as book:
        _runs_of_every_kind(book, bank.url)
        assert book.check() == []
    proc = cli_in_process("check", db=db_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no findings" in proc.stderr
    as_json = cli_in_process("check", "--json", db=db_url)
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == {"ok": True, "findings": []}


def _insert(
    db_url: str, run_id: str, seq: int, kind: str, step: int | None, data: str, status: str = ""
) -> None:
    _sql(
        db_url,
        "INSERT INTO daybook_events (run_id, seq, step, kind, name, status, attempt, data, at) VALUES "
        f"('{run_id}', {seq}, {'NULL' if step is None else step}, '{kind}', 'x', "
        f"{repr(status) if status else 'NULL'}, 0, '{data}', 0)",
    )


@daybook.workflow
def two_steps(ctx: daybook.Context) -> int:
    return int(ctx.decide("a", lambda: 1).value) + int(ctx.decide("b", lambda: 2).value)


@pytest.mark.slow
def test_check_reports_each_kind_of_damage_and_exits_non_zero(db_url: str) -> None:
    with Daybook(db_url) as book:
        for run_id in ("sound", "gappy", "orphan-outcome", "not-object", "bad-kind", "zombie"):
            book.run(two_steps, run_id=run_id)  # seq 1..4: started, a, b, completed
    _insert(db_url, "gappy", 7, "decision", 3, "{}")  # seq 5 and 6 are missing
    _insert(db_url, "orphan-outcome", 5, "outcome", 9, "{}", status="confirmed")  # step 9 has no intent
    _insert(db_url, "not-object", 5, "decision", 3, "[1]")
    _insert(db_url, "bad-kind", 5, "teleport", 3, "{}")
    _insert(db_url, "ghost", 1, "run_started", None, "{}")  # rows with no header
    _sql(db_url, "UPDATE daybook_runs SET status = 'zombie' WHERE run_id = 'zombie'")
    expected = {
        ("gappy", 5): "seq 5 to 6 are missing",
        ("orphan-outcome", 5): "outcome of step 9 has no intent before it",
        ("not-object", 5): "payload is not a JSON object",
        ("bad-kind", 5): "unknown record kind 'teleport'",
        ("ghost", None): "journal rows with no run header",
        ("zombie", None): "status 'zombie' is not a run status",
    }
    if db_url.startswith("sqlite"):  # PostgreSQL's json columns refuse text that is not JSON
        _insert(db_url, "sound", 5, "decision", 3, "{not json")
        _sql(
            db_url,
            "INSERT INTO daybook_inbox (run_id, name, payload, sender, at) "
            "VALUES ('sound', 'n', '{x', 's', 0)",
        )
        expected[("sound", 5)] = "payload is not valid JSON"
        expected[(None, None)] = "in daybook_inbox: its payload is not valid JSON"
    with Daybook(db_url, read_only=True) as book:
        findings = book.check()
    assert len(findings) == len(expected), findings
    for (run_id, seq), problem in expected.items():
        assert any(
            f["run_id"] == run_id and (seq is None or f["seq"] == seq) and problem in str(f["problem"])
            for f in findings
        ), (run_id, seq, problem, findings)
    proc = cli_in_process("check", db=db_url)
    assert proc.returncode == 1 and f"{len(expected)} finding(s)" in proc.stderr
    assert "run gappy seq 5: seq 5 to 6 are missing" in proc.stdout
    as_json = cli_in_process("check", "--json", db=db_url)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["ok"] is False


def test_check_does_not_take_an_empty_file_for_a_fresh_store(tmp_path: Path) -> None:
    empty = tmp_path / "daybook.db"
    empty.touch()
    proc = cli_in_process("check", db=f"sqlite:///{empty}")
    assert proc.returncode == 1 and "empty file" in proc.stdout and "Traceback" not in proc.stderr
    assert empty.stat().st_size == 0


def test_check_runs_the_databases_own_check_on_a_damaged_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    with Daybook(f"sqlite:///{path}") as book:
        for i in range(40):
            book.run(two_steps, run_id=f"run-{i:03}-" + "x" * 150)  # several pages of index
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 6 * page
    data[3 * page + 200 : 5 * page] = b"\xa5" * (2 * page - 200)  # scribble over two pages
    path.write_bytes(bytes(data))
    proc = cli_in_process("check", db=f"sqlite:///{path}")
    assert proc.returncode == 1, proc.stdout
    assert "Traceback" not in proc.stderr
    assert "quick_check" in proc.stdout or "malformed" in proc.stdout


# -- one damaged run does not block the others --------------------------------------------------


def _damage(db_url: str, bank: str) -> None:
    """Run `good` waits at a gate; run `bad-row` too, plus a journal row that does not decode (an
    obligation whose payload is not an object); on SQLite, run `bad-header`'s input is not JSON."""
    with Daybook(db_url, inline_wait=0.1) as book:
        book.add_approver("oncall")
        for run_id in ("good", "bad-row", "bad-header"):
            with pytest.raises(Suspended):
                book.run(agents.restart, bank, 3600.0, run_id=run_id)
    _insert(db_url, "bad-row", 50, "obligation", 50, "[1]", status="open")
    if db_url.startswith("sqlite"):
        _sql(db_url, "UPDATE daybook_runs SET input = '{broken' WHERE run_id = 'bad-header'")


LISTINGS: list[tuple[list[str], str | None]] = [
    (["runs"], "good"),
    (["approvals"], "good"),
    (["versions"], "restart"),
    (["obligations"], None),
    (["effects"], None),
    (["unknowns"], None),
    (["reconcile"], None),
]


@pytest.mark.slow
def test_a_damaged_run_is_skipped_and_flagged_by_every_listing(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    _damage(db_url, bank.url)
    damaged = ["bad-row", "bad-header"] if db_url.startswith("sqlite") else ["bad-row"]
    flagged: set[str] = set()
    for i, (args, shown) in enumerate(LISTINGS):  # the first in a real process, the rest in this one
        proc = (cli if i == 0 else cli_in_process)(*args, db=db_url)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        if shown is not None:
            assert shown in proc.stdout, (args, proc.stdout)
        for run_id in damaged:
            if f"warning: skipped run {run_id!r}" in proc.stderr:
                flagged.add(run_id)
                assert f"daybook export {run_id} --raw" in proc.stderr and "daybook check" in proc.stderr
    assert flagged == set(damaged)
    with Daybook(db_url, read_only=True) as book:
        sound = {"good"} if db_url.startswith("sqlite") else {"good", "bad-header"}
        assert {g["run_id"] for g in book.approvals()} == sound
        assert set(book.damaged()) == set(damaged)
        assert "not a JSON object" in book.damaged()["bad-row"]


@pytest.mark.slow
def test_export_raw_salvages_what_of_a_damaged_run_is_readable(db_url: str, bank) -> None:  # type: ignore[no-untyped-def]
    _damage(db_url, bank.url)
    plain = cli_in_process("export", "bad-row", db=db_url)
    assert plain.returncode == 1 and "bad-row" in plain.stderr and "--raw" in plain.stderr
    raw = cli_in_process("export", "bad-row", "--raw", db=db_url)
    assert raw.returncode == 0, raw.stderr
    doc: dict[str, Any] = json.loads(raw.stdout)
    assert doc["raw"] is True and doc["run_error"] is None and doc["damaged_rows"] == 1
    assert doc["run"]["run_id"] == "bad-row"
    readable = [e for e in doc["events"] if "error" not in e]
    assert [e["kind"] for e in readable][:2] == ["run_started", "decision"]
    (bad,) = [e for e in doc["events"] if "error" in e]
    assert bad["seq"] == 50 and bad["kind"] == "obligation" and json.loads(bad["raw"]) == [1]
    assert "not a JSON object" in bad["error"]
    assert "1 row(s) do not decode" in raw.stderr
    if db_url.startswith("sqlite"):
        header = json.loads(cli_in_process("export", "bad-header", "--raw", db=db_url).stdout)
        assert header["run"]["input"] == "{broken" and "input" in header["run_error"]
        assert header["events"][0]["kind"] == "run_started" and header["damaged_rows"] == 0
    with Daybook(db_url, read_only=True) as book:
        with pytest.raises(CorruptJournal, match="bad-row"):
            book.export("bad-row")
        assert book.export("bad-row", raw=True)["damaged_rows"] == 1


def test_a_damaged_header_is_reported_as_the_header_not_as_a_row(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    with Daybook(url) as book:
        book.run(two_steps, run_id="h")
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    conn.execute("UPDATE daybook_runs SET input = '{broken' WHERE run_id = 'h'")
    conn.commit()
    conn.close()
    proc = cli_in_process("show", "h", db=url)
    assert proc.returncode == 1
    assert "the input in its header is not valid JSON" in proc.stderr and "seq 0" not in proc.stderr
    assert "daybook export h --raw" in proc.stderr
