"""Retention (issue 11 part 2, H9): `book.gc` / `daybook gc --older-than` erases the payloads of
finished runs past an age and keeps the audit spine; the pass is logged, and the journal stays
append-only for everything else."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from conftest import PG_URL, cli_in_process
from store_bytes import store_text

import daybook
from daybook import ConfigError, Daybook, Suspended

PLANT = f"PAYLOAD-{uuid.uuid4().hex}"
FORGED_LOG = (
    "INSERT INTO daybook_gc (gc_id, run_id, who, at, cutoff, runs, rows) VALUES ('g', 'r', 'x', 0, 0, 1, 1)"
)


@daybook.tool(idempotent=True)
def send(to: str, body: str, idempotency_key: str) -> dict[str, str]:
    return {"sent": body}


@daybook.workflow(name="gc_mail")
def mail(ctx: daybook.Context, to: str) -> str:
    body = ctx.decide("draft", lambda: f"{PLANT} for {to}").value
    ctx.effect(send, to=to, body=body)
    return body


@daybook.workflow(name="gc_waits")
def waits(ctx: daybook.Context) -> None:
    ctx.decide("draft", lambda: PLANT)
    ctx.wait_for("go", timeout=3600)


def _spine(book: Daybook, run_id: str) -> list[tuple[object, ...]]:
    return [
        (e.seq, e.step, e.kind, e.name, e.key, e.status, e.attempt, e.fp, e.at) for e in book.journal(run_id)
    ]


def test_gc_erases_old_finished_payloads_and_keeps_the_spine(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        book.run(mail, "ann", run_id="old")
        with pytest.raises(Suspended):
            book.run(waits, run_id="live")  # not finished: never erased, however old
        before = _spine(book, "old")
        assert PLANT in store_text(db_url)

        dry = book.gc(0, dry_run=True)
        assert dry["runs"] == 1 and dry["run_ids"] == ["old"] and PLANT in store_text(db_url)
        assert book.gc(3600)["runs"] == 0  # nothing is an hour old yet

        done = book.gc(0, by="auditor")
        assert done["run_ids"] == ["old"] and done["rows"] == len(before) and done["who"] == "auditor"
        assert _spine(book, "old") == before
        for ev in book.journal("old"):
            assert ev.data["$erased"] == done["gc_id"] and ev.data["digest"].startswith("hmac-sha256:")
        info = book.get_run("old")
        assert info.status == "completed" and info.input == {"$erased": done["gc_id"]}
        # The live run keeps its payloads; the old one's are gone from the rows and the export.
        assert any(ev.data.get("value") == PLANT for ev in book.journal("live"))
        assert PLANT not in json.dumps(book.export("old"))
        logged = book.gc_log()  # every pass, even one that erased nothing
        assert [(p["who"], p["runs"], p["rows"]) for p in logged][-1] == ("auditor", 1, len(before))
        assert len(logged) == 2 and logged[-1]["gc_id"] == done["gc_id"]
        assert book.gc(0)["runs"] == 0  # erased once
        assert book.check() == []  # an erased run is a sound journal
        assert [r["state"] for r in book.replay_check(["old"])] == ["erased"]
        with pytest.raises(ConfigError, match="erased by `daybook gc"):
            book.replay("old")
        with pytest.raises(ConfigError, match="erased by `daybook gc"):
            book.retry("old")
        book.signal("live", "go")
        book.resume("live")
        book.gc(0)
        assert PLANT not in store_text(db_url)  # raw file bytes (and -wal) or every row


def test_the_journal_stays_append_only_outside_gc(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(mail, "bob", run_id="r")
    erase = '{"$erased": "forged"}'
    if db_url.startswith("sqlite"):
        db = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE daybook_events SET data = ? WHERE run_id = 'r'", (erase,))
        db.execute(FORGED_LOG)
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):  # an erasure mark only
            db.execute("UPDATE daybook_events SET data = '{\"value\": 1}' WHERE run_id = 'r'")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):  # the spine never
            db.execute(
                "UPDATE daybook_events SET data = ?, key = 'k2' WHERE run_id = 'r' AND seq = 3", (erase,)
            )
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("DELETE FROM daybook_gc")
        db.close()
        return
    schema = parse_qs(urlsplit(db_url).query)["schema"][0]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("UPDATE daybook_events SET data = %s::json WHERE run_id = 'r'", (erase,))
        conn.execute(FORGED_LOG)
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("UPDATE daybook_events SET data = '{\"value\": 1}'::json WHERE run_id = 'r'")
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute(
                "UPDATE daybook_events SET data = %s::json, key = 'k2' WHERE run_id = 'r' AND seq = 3",
                (erase,),
            )
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("DELETE FROM daybook_gc")
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("TRUNCATE daybook_gc")


def test_daybook_gc_on_the_command_line(db_url: str) -> None:
    with Daybook(db_url) as book:
        book.run(mail, "cy", run_id="c1")
    time.sleep(0.05)
    dry = cli_in_process("gc", "--older-than", "0s", "--dry-run", db=db_url)
    assert dry.returncode == 0 and "would erase the payloads of 1 finished run(s)" in dry.stdout, dry.stderr
    young = cli_in_process("gc", "--older-than", "30d", db=db_url)
    assert young.stdout.startswith("erased the payloads of 0")
    done = cli_in_process("gc", "--older-than", "0", "--by", "ops", "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["run_ids"] == ["c1"]
    bad = cli_in_process("gc", "--older-than", "soon", db=db_url)
    assert bad.returncode == 2 and "not an age" in bad.stderr
    with Daybook(db_url) as book:
        assert PLANT not in json.dumps(book.export("c1"))
        assert [(p["who"], p["runs"]) for p in book.gc_log()][-1] == ("ops", 1)  # every pass is logged
        with pytest.raises(ConfigError, match="older_than"):
            book.gc(float("nan"))
