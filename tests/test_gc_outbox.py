"""Retention of the approval outbox (issue 31): `book.gc` / `daybook gc` erases the payloads of a
finished run's approval requests (the gated act's `about`, approvers, facts) with the run's
journal, keeps each request's delivery key and where its delivery stands, gives up a request
still pending rather than send it after its payload is gone, and leaves a live run's requests
alone; the entity log stays append-only for everything else. Asserted in the store's bytes and
at the webhook receiver, on both stores."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from conftest import HERE, PG_URL, cli_in_process, killed
from store_bytes import store_text
from test_outbox import Receiver, hook

import daybook
from daybook import ConfigError, Daybook, Secret, Suspended
from daybook.gates import outbox
from daybook.gates.delivery import Deliverer
from daybook.store import retention
from daybook.telemetry.cursor import Cursor, entity_name

AMOUNT = 731_946_285_017  # a plain detail of the gated act, unique in the store's bytes


@daybook.workflow(name="gc_outbox_refund")
def refund(ctx: daybook.Context, amount: int, note: str) -> str:
    about = {"amount": amount, "note": note, "card": Secret(f"card-{note}")}
    return ctx.gate("refund", about=about, timeout=3600).outcome


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _open(book: Daybook, run_id: str, i: int) -> dict[str, str]:
    """Run `run_id` to its gate; the plants of its request: its note, its amount, the digest
    its secret card became (a marked detail)."""
    note = f"NOTE-{run_id}-{uuid.uuid4().hex}"
    with pytest.raises(Suspended):
        book.run(refund, AMOUNT + i, note, run_id=run_id)
    [req] = [e.request for e in outbox.entries(book.store) if e.request and e.request["run_id"] == run_id]
    card = req["about"]["card"]
    assert isinstance(card, dict) and "$secret" in card  # the secret itself never got here
    return {"key": req["key"], "note": note, "amount": str(AMOUNT + i), "card": str(card["$secret"])}


def _plants(p: dict[str, str]) -> list[str]:
    return [p["note"], p["amount"], p["card"]]


def _three_runs(db_url: str, receiver: Receiver) -> dict[str, dict[str, str]]:
    """`sent`: its request delivered, then cancelled; `pending`: never delivered, cancelled;
    `live`: waits at its gate."""
    with Daybook(db_url, inline_wait=0) as book:
        plants = {"sent": _open(book, "sent", 0)}
        Deliverer(book.store, [hook(receiver.url)]).run_once()
        plants["pending"] = _open(book, "pending", 1)
        plants["live"] = _open(book, "live", 2)
        book.cancel("sent")
        book.cancel("pending")
    assert receiver.once() == {plants["sent"]["key"]: 1}
    return plants


def _states(book: Daybook) -> dict[str, str]:
    return {str(r["key"]): str(r["state"]) for r in outbox.outbox(book.store)}


def test_gc_erases_a_finished_runs_approval_requests_and_keeps_their_key_and_state(
    db_url: str, receiver: Receiver
) -> None:
    plants = _three_runs(db_url, receiver)
    keys = {run: p["key"] for run, p in plants.items()}
    text = store_text(db_url)
    assert all(p in text for run in plants.values() for p in _plants(run))  # looking in the right place
    with Daybook(db_url) as book:
        dry = book.gc(0, dry_run=True)
        assert (dry["requests"], dry["given_up"]) == (2, 1)
        assert _states(book) == {keys["sent"]: "delivered", keys["pending"]: "queued", keys["live"]: "queued"}
        assert all(p in store_text(db_url) for p in _plants(plants["pending"]))  # a dry run erases nothing

        done = book.gc(0, by="auditor")
        assert sorted(done["run_ids"]) == ["pending", "sent"]
        assert (done["requests"], done["given_up"]) == (2, 1)
        text = store_text(db_url)
        for run in ("sent", "pending"):
            assert not [p for p in _plants(plants[run]) if p in text], run
        assert all(p in text for p in _plants(plants["live"]))  # a live run's request is untouched
        # The audit keeps each key and where its delivery stands; the pending one was given up.
        assert _states(book) == {
            keys["sent"]: "delivered",
            keys["pending"]: "undelivered",
            keys["live"]: "queued",
        }
        [pending] = [e for e in outbox.entries(book.store) if e.key == keys["pending"]]
        assert pending.erased == done["gc_id"] and "erased by gc" in pending.gave_up["*"]
        assert pending.request is not None and pending.request["run_id"] == "pending"
        assert pending.request["gate_id"] == keys["pending"].rpartition("/")[0]
        assert pending.request["action"] == "refund" and "about" not in pending.request
        assert str(pending.request["digest"]).startswith("hmac-sha256:")
        [sent] = [e for e in outbox.entries(book.store) if e.key == keys["sent"]]
        assert list(sent.delivered) == [hook(receiver.url).name] and sent.tries == {sent_sink(receiver): 1}
        # A deliverer sends the live request and never the erased one.
        Deliverer(book.store, [hook(receiver.url)]).run_once()
        assert book.gc(0)["requests"] == 0  # erased once
        assert book.check() == []  # an erased request is a sound entity log row
    assert receiver.once() == {keys["sent"]: 1, keys["live"]: 1}
    listed = cli_in_process("outbox", "list", db=db_url)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if keys["pending"] in ln)
    assert "undelivered" in line
    as_json = json.loads(cli_in_process("outbox", "list", "--json", db=db_url).stdout)
    assert {r["key"]: r["erased"] is not None for r in as_json} == {
        keys["sent"]: True,
        keys["pending"]: True,
        keys["live"]: False,
    }


def sent_sink(receiver: Receiver) -> str:
    return hook(receiver.url).name


def test_daybook_gc_counts_and_erases_outbox_requests_on_the_command_line(
    db_url: str, receiver: Receiver
) -> None:
    plants = _three_runs(db_url, receiver)
    dry = cli_in_process("gc", "--older-than", "0s", "--dry-run", db=db_url)
    assert dry.returncode == 0, dry.stderr
    assert "would erase the payloads of 2 approval request(s) in the outbox, 1 of them given up" in dry.stdout
    bad = cli_in_process("gc", "--older-than", "-3d", db=db_url)
    assert bad.returncode == 2 and "not an age" in bad.stderr
    with Daybook(db_url) as book, pytest.raises(ConfigError, match="older_than"):
        book.gc(float("nan"))
    assert all(p in store_text(db_url) for p in _plants(plants["pending"]))  # bad input erased nothing
    done = cli_in_process("gc", "--older-than", "0", "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requests"] == 2
    text = store_text(db_url)
    assert not [p for run in ("sent", "pending") for p in _plants(plants[run]) if p in text]


def test_a_gc_killed_while_erasing_requests_erases_nothing_and_the_next_gc_erases_all(
    db_url: str, receiver: Receiver
) -> None:
    plants = _three_runs(db_url, receiver)
    child = subprocess.run(
        [sys.executable, str(HERE / "gc_child.py"), db_url, "--kill-at-request", "2"],
        capture_output=True, text=True, timeout=120, cwd=HERE,
    )  # fmt: skip
    assert killed(child), child.stderr
    text = store_text(db_url)
    # One transaction: the first request's erasure (and the journal's) did not survive the kill.
    assert all(p in text for run in plants.values() for p in _plants(run))
    with Daybook(db_url) as book:
        assert book.gc_log() == [] and _states(book)[plants["pending"]["key"]] == "queued"
        assert book.gc(0)["requests"] == 2
        assert _states(book)[plants["pending"]["key"]] == "undelivered"
    text = store_text(db_url)
    assert not [p for run in ("sent", "pending") for p in _plants(plants[run]) if p in text]


class _Raw:
    """A connection around daybook to the test's store: statements with `?` placeholders."""

    def __init__(self, db_url: str) -> None:
        self.sqlite = db_url.startswith("sqlite")
        if self.sqlite:
            self.conn: Any = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        else:
            self.conn = psycopg.connect(PG_URL, autocommit=True)
            schema = parse_qs(urlsplit(db_url).query)["schema"][0]
            self.conn.execute(f'SET search_path TO "{schema}"')

    def run(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        if not self.sqlite:
            sql = sql.replace("?", "%s")
        cur = self.conn.execute(sql, params)
        return list(cur.fetchall()) if sql.startswith("SELECT") else []

    def refused(self, sql: str, *params: object) -> None:
        error = sqlite3.DatabaseError if self.sqlite else psycopg.Error
        with pytest.raises(error, match="append-only"):
            if not self.sqlite:
                sql = sql.replace("?", "%s")
            self.conn.execute(sql, params)


def test_the_entity_log_stays_append_only_outside_gc(db_url: str, receiver: Receiver) -> None:
    plants = _three_runs(db_url, receiver)
    raw = _Raw(db_url)
    try:
        name = {run: outbox.PREFIX + p["key"] for run, p in plants.items()}
        request = "SELECT id FROM daybook_entity_log WHERE name = ? AND action = 'request'"
        [(req,)] = raw.run(request, name["pending"])
        [(claim,)] = raw.run("SELECT MIN(id) FROM daybook_entity_log WHERE name = ?", name["pending"])
        [(live,)] = raw.run(request, name["live"])

        def mark(run: str | None) -> str:
            return json.dumps({"$erased": "forged"} | ({} if run is None else {"run_id": run}))

        cast = "" if raw.sqlite else "::json"
        update = f"UPDATE daybook_entity_log SET data = ?{cast} WHERE id = ?"
        raw.refused(update, mark("pending"), req)  # gc never erased the run
        forged = (
            "INSERT INTO daybook_gc (gc_id, run_id, who, at, cutoff, runs, rows) "
            "VALUES ('g', ?, 'x', 0, 0, 1, 1)"
        )
        raw.run(forged, "live")
        raw.run(forged, "pending")
        raw.refused(update, mark("live"), live)  # the run is not finished
        raw.refused(update, mark("pending"), live)  # the mark's run does not own the entry
        raw.refused(update, mark(None), req)  # a mark that names no run
        raw.refused(update, mark("pending"), claim)  # only the request row, never the delivery record
        raw.refused(
            f"UPDATE daybook_entity_log SET data = ?{cast}, agent = 'x' WHERE id = ?", mark("pending"), req
        )
        raw.refused(f"UPDATE daybook_entity_log SET data = '{{\"value\": 1}}'{cast} WHERE id = ?", req)
        raw.refused("DELETE FROM daybook_entity_log WHERE id = ?", req)
        raw.run(update, mark("pending"), req)  # what gc does: allowed, so the refusals above are the rules'
        [(data,)] = raw.run("SELECT data FROM daybook_entity_log WHERE id = ?", req)
        assert plants["pending"]["note"] not in str(data)
    finally:
        raw.conn.close()


def test_gc_keeps_a_runs_otel_export_cursor_which_holds_no_payload(db_url: str, receiver: Receiver) -> None:
    plants = _three_runs(db_url, receiver)
    with Daybook(db_url) as book:
        cursor = Cursor(book.store, exporter="exporter-test")
        assert cursor.claim("sent") == 0
        assert cursor.advance("sent", 4, 3)
        book.gc(0)
        # Kept where it was: a later exporter does not send the erased run's steps again.
        assert Cursor(book.store).read("sent") == 4
        view = book.store.entity_view(entity_name("sent"))
        assert view is not None
        fields = {k for _id, _at, _agent, _action, data in view[2] for k in json.loads(data) or {}}
        assert fields <= {
            "ttl",
            "deadline",
            "upto",
            "spans",
        }  # seqs and counts (a release: null): nothing to erase
    text = store_text(db_url)
    assert not [p for p in _plants(plants["sent"]) if p in text]


def test_a_request_of_a_run_an_earlier_gc_erased_is_erased_by_the_next_pass(
    db_url: str, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    plants = _three_runs(db_url, receiver)
    with Daybook(db_url) as book:
        # A pass by a daybook that did not know the outbox: the runs erased, their requests not.
        monkeypatch.setattr(retention, "erase_requests", lambda *args, **kwargs: {})
        assert book.gc(0)["runs"] == 2
        assert all(p in store_text(db_url) for p in _plants(plants["pending"]))
        monkeypatch.undo()
        done = book.gc(0)
        assert (done["runs"], done["requests"], done["given_up"]) == (0, 2, 1)
    text = store_text(db_url)
    assert not [p for run in ("sent", "pending") for p in _plants(plants[run]) if p in text]
    assert all(p in text for p in _plants(plants["live"]))


def test_gc_of_run_a_leaves_the_requests_of_a_live_run_named_a_slash_b(db_url: str) -> None:
    with Daybook(db_url, inline_wait=0) as book:
        finished, live = _open(book, "a", 0), _open(book, "a/b", 1)
        book.cancel("a")
        assert live["key"].startswith("a/b/") and book.gc(0)["requests"] == 1
        assert {e.key: e.erased is not None for e in outbox.entries(book.store)} == {
            finished["key"]: True,
            live["key"]: False,
        }
    text = store_text(db_url)
    assert all(p in text for p in _plants(live)) and not [p for p in _plants(finished) if p in text]
