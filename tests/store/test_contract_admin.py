"""Store contract, admin part and the read-only handle: settings, integrity, retention, and a
handle opened read-only that reads every part and refuses every write, on every backend."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable

import pytest

from daybook.errors import ConfigError
from daybook.store import WRITES, ReadStore, Store, open_store
from daybook.store.parts import methods

from .contract import NOW, row


def test_a_setting_is_set_once_and_listed_by_prefix(store: Store) -> None:
    assert store.meta_value("x.key", "first") == "first"
    assert store.meta_value("x.key", "second") == "first"
    store.meta_value("x.other", "2")
    assert store.meta_items("x.") == {"x.key": "first", "x.other": "2"}


def test_raw_rows_show_payloads_exactly_as_stored(store: Store, new_run: Callable[..., str]) -> None:
    new_run("r1")
    store.append(row("r1", 2, data={"z": 1, "a": "é"}))
    events = store.raw_rows("events", "r1")
    assert [r[1] for r in events] == [1, 2]
    assert isinstance(events[1][9], str) and list(json.loads(events[1][9])) == ["z", "a"]
    assert isinstance(store.raw_rows("runs")[0][4], str)  # the input, as JSON text
    assert store.journal_run_ids() == ["r1"]


def test_a_sound_store_passes_the_engines_own_check(store: Store) -> None:
    assert store.quick_check() == []


def test_gc_erases_a_finished_runs_payloads_keeps_the_spine_and_logs_the_pass(
    store: Store, new_run: Callable[..., str]
) -> None:
    new_run("old", status="completed", updated_at=NOW)
    new_run("live", status="running", updated_at=NOW)
    store.append(row("old", 2, data={"secret": "x"}))
    counted = store.gc(NOW + 1, NOW + 2, "ops", "gc-1", b"k" * 32, dry_run=True)
    assert counted["runs"] == 1 and store.gc_log() == []
    done = store.gc(NOW + 1, NOW + 2, "ops", "gc-2", b"k" * 32, dry_run=False)
    assert (done["runs"], done["rows"]) == (1, 2)
    erased = store.load("old")
    assert [e.seq for e in erased] == [1, 2] and all(e.data["$erased"] == "gc-2" for e in erased)
    info = store.get_run("old")
    assert info is not None and info.input == {"$erased": "gc-2"}
    assert store.load("live")[0].data == {"input": 1}
    assert [(g["gc_id"], g["who"], g["runs"]) for g in store.gc_log()] == [("gc-2", "ops", 1)]


def test_the_role_is_the_databases_or_none_for_a_file(db_url: str, store: Store) -> None:
    role = store.current_role()
    assert role is None if db_url.startswith("sqlite") else isinstance(role, str) and role


def test_a_read_only_handle_reads_every_part_and_refuses_every_write(
    db_url: str, store: Store, new_run: Callable[..., str]
) -> None:
    new_run("r1")
    reader = open_store(db_url, read_only=True)
    try:
        assert reader.read_only and [e.seq for e in reader.load("r1")] == [1]
        assert set(WRITES) == methods(Store) - methods(ReadStore) and "append" in WRITES
        for name in methods(ReadStore):
            assert callable(getattr(reader, name)), name
        for name in WRITES:
            arity = len(inspect.signature(getattr(Store, name)).parameters) - 1
            with pytest.raises(ConfigError, match="read-only"):
                getattr(reader, name)(*[None] * arity)
        assert reader.meta_value("never.set", "d") == "d"  # read only: never set
    finally:
        reader.close()
    assert store.meta_items("never.") == {} and [e.seq for e in store.load("r1")] == [1]
