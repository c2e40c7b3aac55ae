"""Coordination entities (P6): one lease and one append-only log per shared resource.

Two real processes race `claim` 1,000 times each and the log shows one live holder at a time;
a non-holder's `record` is refused and writes nothing; an expired lease goes to the next
claimer; `view` is a pure read; the CLI shows leases and logs; the README example runs.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import HERE, cli_in_process, release_together, wait_until

import daybook
from daybook import ConfigError, Daybook, DaybookError, EntityView, NotSerializable

ROOT = HERE.parent
TTL = 0.01  # short, so that the race hands the lease over many times


def check_protocol(view: EntityView) -> dict[str, int]:
    """Walk the log and assert that at no moment two agents held a live lease.

    A claim by another agent comes after the last holder's deadline (so at least its ttl after
    that holder's last claim) or after its release; a record or a release is made by the agent
    holding a live lease; the log is in time order. Returns counts per agent and of handovers."""
    holder: str | None = None
    deadline = -math.inf
    last_claim_at = last_ttl = -math.inf
    previous_at = -math.inf
    counts: dict[str, int] = {"handovers": 0}
    for e in view.log:
        assert e.at >= previous_at, f"entry {e.id} is out of time order"
        previous_at = e.at
        counts[f"{e.agent}:{e.action}"] = counts.get(f"{e.agent}:{e.action}", 0) + 1
        if e.action == "claim":
            if holder is not None and holder != e.agent:
                # Two live holders would need a claim at or before the holder's deadline.
                assert e.at > deadline, (
                    f"entry {e.id}: {e.agent} claimed at {e.at} while {holder} held the lease "
                    f"until {deadline}"
                )
                assert e.at - last_claim_at >= last_ttl
            if holder != e.agent:
                counts["handovers"] += 1
            holder, deadline, last_claim_at, last_ttl = e.agent, e.data["deadline"], e.at, e.data["ttl"]
            assert deadline == pytest.approx(e.at + e.data["ttl"])
        else:
            assert e.agent == holder and e.at <= deadline, (
                f"entry {e.id}: {e.agent} wrote {e.action!r} at {e.at} without a live lease "
                f"(holder {holder} until {deadline})"
            )
            if e.action == "release":
                holder, deadline = None, -math.inf
    return counts


@pytest.mark.slow
def test_two_processes_claiming_1000_times_each_never_hold_the_lease_together(db_url: str) -> None:
    with Daybook(db_url):
        pass  # create the schema before the race, so neither process waits on the migration
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "claimer.py"),
                db_url,
                "pool",
                agent,
                "1000",
                str(TTL),
                "stdin",  # start together once both are up, however long each took to start
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for agent in ("agent-a", "agent-b")
    ]
    release_together(procs)
    reports = {}
    for proc in procs:
        out, err = proc.communicate(timeout=110)
        assert proc.returncode == 0, err
        report = json.loads(out.strip().splitlines()[-1])
        reports[report["agent"]] = report
    a, b = reports["agent-a"], reports["agent-b"]
    assert max(a["first"], b["first"]) < min(a["last"], b["last"]), "the processes did not overlap"

    with Daybook(db_url) as book:
        view = book.entity("pool").view()
    counts = check_protocol(view)
    for agent, report in reports.items():
        wins = report["wins"]
        assert wins, f"{agent} never won"
        assert wins == sorted(wins)
        # Every True from claim is a claim entry, and nothing else is; likewise record, release.
        assert counts.get(f"{agent}:claim", 0) == len(wins)
        assert counts.get(f"{agent}:work", 0) == report["recorded"]
        assert counts.get(f"{agent}:release", 0) == report["released"]
    assert counts["handovers"] > 10  # the lease really changed hands under contention


def test_threads_of_one_process_take_turns_too(db_url: str) -> None:
    # On SQLite these claims share group commits: several compare-and-sets in one transaction.
    with Daybook(db_url) as book:
        entity = book.entity("shared")

        def contend(agent: str) -> None:
            for _ in range(100):
                if entity.claim(agent, TTL):
                    entity.record(agent, "work")
                    if not entity.release(agent):
                        time.sleep(TTL)

        threads = [threading.Thread(target=contend, args=(f"t{i}",)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counts = check_protocol(entity.view())
    assert counts["handovers"] > 6


def test_record_from_a_non_holder_returns_false_and_writes_nothing(book: Daybook) -> None:
    incident = book.entity("incident-7")
    assert incident.record("agent-a", "starting") is False  # nobody ever claimed it
    assert book.leases() == []  # a refused record does not even create the entity
    assert incident.view().log == []

    assert incident.claim("agent-a", 60) is True
    before = incident.view().log
    assert incident.record("agent-b", "starting", {"plan": "restart"}) is False
    assert incident.release("agent-b") is False
    assert incident.view().log == before
    assert incident.view().holder == "agent-a"

    assert incident.record("agent-a", "starting", {"plan": "restart"}) is True
    log = incident.view().log
    assert [(e.agent, e.action, e.data) for e in log[len(before) :]] == [
        ("agent-a", "starting", {"plan": "restart"})
    ]


def test_after_the_ttl_expires_another_agents_claim_succeeds(book: Daybook) -> None:
    prospect = book.entity("prospect:acme")
    assert prospect.claim("agent-a", 0.3) is True
    assert prospect.claim("agent-b", 0.3) is False  # held: the loser learns it from the answer
    assert prospect.view().state == "held"
    wait_until(lambda: prospect.view().state == "expired")
    assert prospect.view().state == "expired" and prospect.view().holder == "agent-a"
    assert prospect.claim("agent-b", 5) is True
    # The old holder has lost it: it can neither record nor release, nor take it back.
    assert prospect.record("agent-a", "completed") is False
    assert prospect.release("agent-a") is False
    assert prospect.claim("agent-a", 5) is False
    view = prospect.view()
    assert (view.holder, view.state) == ("agent-b", "held")
    assert [(e.agent, e.action) for e in view.log] == [("agent-a", "claim"), ("agent-b", "claim")]
    check_protocol(view)


def test_the_holder_renews_by_claiming_again_and_a_release_frees_it_at_once(book: Daybook) -> None:
    pool = book.entity("budget-pool")
    assert pool.claim("agent-a", 0.3)
    first = pool.view().deadline
    time.sleep(0.05)
    assert pool.claim("agent-a", 0.3)  # a renewal
    second = pool.view().deadline
    assert first is not None and second is not None and second > first
    assert pool.release("agent-a") is True
    assert pool.release("agent-a") is False  # nothing left to release
    view = pool.view()
    assert (view.holder, view.deadline, view.state) == (None, None, "free")
    assert pool.claim("agent-b", 0.3) is True  # no waiting for the old deadline
    assert [e.action for e in pool.view().log] == ["claim", "claim", "release", "claim"]


def test_the_view_is_a_pure_read(db_url: str, book: Daybook) -> None:
    entity = book.entity("incident-9")
    for _ in range(100):
        entity.view()
    assert book.leases() == []  # viewing an entity nobody claimed creates nothing

    entity.claim("agent-a", 60)
    entity.record("agent-a", "starting")
    view = entity.view()
    rows = _sql(db_url, "SELECT count(*) FROM daybook_entity_log")
    for _ in range(100):
        again = entity.view()
        assert (again.holder, again.deadline, again.log) == (view.holder, view.deadline, view.log)
    assert len(entity.view().log) == len(view.log) == 2
    assert _sql(db_url, "SELECT count(*) FROM daybook_entity_log") == rows
    assert [(lease.name, lease.holder, lease.state) for lease in book.leases()] == [
        ("incident-9", "agent-a", "held")
    ]


def test_the_entity_log_is_append_only(db_url: str, book: Daybook) -> None:
    entity = book.entity("audited")
    entity.claim("agent-a", 60)
    for sql in ("UPDATE daybook_entity_log SET agent = 'forged'", "DELETE FROM daybook_entity_log"):
        with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
            _sql(db_url, sql)
    assert [(e.agent, e.action) for e in entity.view().log] == [("agent-a", "claim")]


def test_bad_arguments_are_refused_with_what_to_do(book: Daybook) -> None:
    entity = book.entity("e")
    for ttl in (0, -1, math.nan, math.inf, "5", True):
        with pytest.raises(ConfigError, match="ttl must be a positive number of seconds"):
            entity.claim("agent-a", ttl)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="non-empty string"):
        entity.claim("", 5)
    with pytest.raises(ConfigError, match="non-empty string"):
        book.entity("")
    entity.claim("agent-a", 5)
    with pytest.raises(ConfigError, match=r"written by Entity\.claim"):
        entity.record("agent-a", "claim")
    with pytest.raises(NotSerializable):
        entity.record("agent-a", "starting", {"when": object()})
    with pytest.raises(DaybookError):
        entity.record("agent-a", "", None)
    assert [e.action for e in entity.view().log] == ["claim"]


def test_a_schema_v4_store_gets_the_entity_tables_on_open(db_url: str) -> None:
    with Daybook(db_url):
        pass
    _sql(db_url, "DROP TABLE daybook_entity_log")
    _sql(db_url, "DROP TABLE daybook_entities")
    _sql(db_url, "UPDATE daybook_meta SET value = '4' WHERE key = 'schema_version'")
    with Daybook(db_url) as book:
        assert book.entity("x").claim("agent-a", 5)
    assert _sql(db_url, "SELECT value FROM daybook_meta WHERE key = 'schema_version'") == str(
        daybook.SCHEMA_VERSION
    )
    with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
        _sql(db_url, "DELETE FROM daybook_entity_log")


@pytest.mark.slow
def test_the_leases_and_entity_commands(db_url: str) -> None:
    Daybook(db_url).close()  # an empty store (read commands never create one)
    empty = cli_in_process("leases", db=db_url)
    assert empty.returncode == 0 and "no entities" in empty.stdout
    with Daybook(db_url) as book:
        incident = book.entity("incident-42")
        incident.claim("sre-1", 600)
        incident.record("sre-1", "starting", {"runbook": "failover"})
        book.entity("prospect:acme").claim("sales-1", 0.01)
    time.sleep(0.05)

    listed = cli_in_process("leases", db=db_url)
    assert listed.returncode == 0, listed.stderr
    for word in ("entity", "holder", "deadline", "incident-42", "sre-1", "held", "prospect:acme", "expired"):
        assert word in listed.stdout
    as_json = json.loads(cli_in_process("leases", "--json", db=db_url).stdout)
    assert [(x["name"], x["holder"], x["state"]) for x in as_json] == [
        ("incident-42", "sre-1", "held"),
        ("prospect:acme", "sales-1", "expired"),
    ]

    shown = cli_in_process("entity", "incident-42", db=db_url)
    assert shown.returncode == 0, shown.stderr
    assert "lease held (sre-1 until" in shown.stdout
    for word in ("time", "agent", "action", "claim", "starting", "failover"):
        assert word in shown.stdout
    doc = json.loads(cli_in_process("entity", "incident-42", "--json", db=db_url).stdout)
    assert doc["holder"] == "sre-1" and doc["state"] == "held"
    assert [(e["agent"], e["action"]) for e in doc["log"]] == [("sre-1", "claim"), ("sre-1", "starting")]
    assert doc["log"][1]["data"] == {"runbook": "failover"}

    missing = cli_in_process("entity", "no-such-thing", db=db_url)
    assert missing.returncode == 1 and "daybook leases" in missing.stderr


def test_the_readme_entity_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Coordination entities", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S)
    assert example is not None
    script = tmp_path / "entity_example.py"
    script.write_text(example.group(1))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "True False",
        "free [('sre-agent-1', 'claim'), ('sre-agent-1', 'starting'), ('sre-agent-1', 'completed'), "
        "('sre-agent-1', 'release')]",
    ]


def _sql(db_url: str, sql: str) -> Any:
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        try:
            row = conn.execute(sql).fetchone()
            conn.commit()
        finally:
            conn.close()
        return row[0] if row else None
    base, schema = db_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{schema}"')
        cur = pg.execute(sql)
        row = cur.fetchone() if cur.description else None
        return row[0] if row else None
