"""Store contract, commits part: staged records made visible by one commit, on every backend."""

from __future__ import annotations

import json

from daybook.store import Store

from .contract import NOW


def test_staged_records_are_invisible_until_the_commit_makes_them_visible_with_an_audit_row(
    store: Store,
) -> None:
    store.stage("t1", "notes", "n1", json.dumps({"text": "a"}), NOW)
    store.stage("t1", "notes", "n1", json.dumps({"text": "b"}), NOW)  # restaged: the last wins
    store.stage("t1", "notes", "n2", json.dumps({"z": 1, "a": 2}), NOW)
    assert store.get_record("notes", "n1") is None
    assert [(t, c, r) for t, c, r, _ in store.staging()] == [("t1", "notes", "n1"), ("t1", "notes", "n2")]
    commit_id, records = store.commit_tx("t1", "c1", "key-1", "save notes", "alice", NOW + 1)
    assert (commit_id, records) == ("c1", [["notes", "n1"], ["notes", "n2"]])
    found = store.get_record("notes", "n1")
    assert found is not None and json.loads(found[0]) == {"text": "b"} and found[1] == "c1"
    kept = store.get_record("notes", "n2")
    assert kept is not None and list(json.loads(kept[0])) == ["z", "a"]
    assert store.staging() == []
    (audit,) = store.commits()
    assert audit[:5] == ("c1", "key-1", "save notes", "alice", NOW + 1)
    assert json.loads(audit[5]) == [["notes", "n1"], ["notes", "n2"]]


def test_a_commit_key_seen_again_returns_the_first_commit_and_changes_nothing(store: Store) -> None:
    store.stage("t1", "notes", "n1", '{"v": 1}', NOW)
    store.commit_tx("t1", "c1", "key-1", "first", "alice", NOW)
    store.stage("t2", "notes", "n1", '{"v": 2}', NOW)
    assert store.commit_tx("t2", "c2", "key-1", "again", "alice", NOW + 1) == ("c1", [["notes", "n1"]])
    found = store.get_record("notes", "n1")
    assert found is not None and json.loads(found[0]) == {"v": 1}
    assert [c[0] for c in store.commits()] == ["c1"] and store.staging() == []


def test_an_abandoned_transaction_leaves_nothing_visible(store: Store) -> None:
    store.stage("t1", "notes", "n1", '{"v": 1}', NOW)
    store.abandon_tx("t1")
    assert store.staging() == [] and store.get_record("notes", "n1") is None
    assert store.commits() == []
