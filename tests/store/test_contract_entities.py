"""Store contract, entities part: coordination leases with a log, on every backend."""

from __future__ import annotations

import json

from daybook.store import Store

from .contract import NOW


def test_an_entity_is_held_by_one_agent_at_a_time_and_its_log_says_so(store: Store, other: Store) -> None:
    assert store.entity_claim("desk", "a", 10, NOW)
    assert not other.entity_claim("desk", "b", 10, NOW + 1)
    assert store.entity_claim("desk", "a", 10, NOW + 2)  # a renewal
    assert store.entity_record("desk", "a", "note", json.dumps({"z": 1, "a": 2}), NOW + 3)
    assert not other.entity_release("desk", "b", NOW + 4)
    assert store.entity_release("desk", "a", NOW + 4)
    assert other.entity_claim("desk", "b", 10, NOW + 5)
    view = store.entity_view("desk")
    assert view is not None
    holder, deadline, log = view
    assert (holder, deadline) == ("b", NOW + 15)
    assert [(at, agent, action) for _, at, agent, action, _ in log] == [
        (NOW, "a", "claim"), (NOW + 2, "a", "claim"), (NOW + 3, "a", "note"),
        (NOW + 4, "a", "release"), (NOW + 5, "b", "claim"),
    ]  # fmt: skip
    assert list(json.loads(log[2][4])) == ["z", "a"]
    assert json.loads(log[0][4]) == {"ttl": 10, "deadline": NOW + 10}
    assert store.entity_list() == [("desk", "b", NOW + 15)]
    assert store.entity_view("nothing") is None


def test_a_lapsed_lease_is_lost_and_its_holder_records_nothing(store: Store) -> None:
    assert store.entity_claim("desk", "a", 10, NOW)
    assert not store.entity_record("desk", "a", "late", "{}", NOW + 11)
    assert store.entity_claim("desk", "b", 10, NOW + 11)
    assert not store.entity_record("desk", "a", "late", "{}", NOW + 12)
    view = store.entity_view("desk")
    assert view is not None and [e[3] for e in view[2]] == ["claim", "claim"]


def test_the_log_never_goes_back_in_time(store: Store) -> None:
    assert store.entity_claim("desk", "a", 10, NOW + 5)
    assert store.entity_record("desk", "a", "note", "{}", NOW)  # a call that waited behind it
    view = store.entity_view("desk")
    assert view is not None and [e[1] for e in view[2]] == [NOW + 5, NOW + 5]


def test_a_claims_logged_deadline_is_the_leases_to_the_last_bit(store: Store) -> None:
    # A deadline needing 17 digits: written with 15 it rounds up past a claim made just after it,
    # and the log would show two holders at once (a failure of the two-process claim race).
    now, ttl = 1795725829.7944186, 0.01
    assert store.entity_claim("desk", "a", ttl, now)
    view = store.entity_view("desk")
    assert view is not None
    _, deadline, log = view
    assert deadline == now + ttl
    assert json.loads(log[0][4])["deadline"] == deadline
