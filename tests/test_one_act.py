"""A one-act run's store (`runtime/start.py` `OneAct`, the MCP proxy's runs): the look its end
takes for the run's open transactions answers without a read while the run wrote nothing but
journal rows through it, and reads the store once anything else went through it (a transaction
begun by such a run is found, and released at its end)."""

from __future__ import annotations

from typing import Any

import pytest
from store.contract import NOW, row

import daybook
from daybook import Context, Daybook
from daybook.runtime.start import OneAct, new_run


@daybook.workflow(name="one_act.body")
def body(ctx: Context) -> None:
    return None


def _journal(book: Daybook, run_id: str, reads: list[Any], monkeypatch: pytest.MonkeyPatch) -> OneAct:
    store = book.store
    real = store.tx_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(kwargs.get("run_id"))
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "tx_rows", counted)
    info, first = new_run(body, run_id, (), {}, owner="me", lease_ttl=5.0)
    return OneAct(store, info, first)


def test_a_one_act_run_with_only_journal_rows_has_no_transaction_to_look_for(
    book: Daybook, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Any] = []
    journal = _journal(book, "oa-1", reads, monkeypatch)
    journal.append(row("oa-1", 2, name="note", data={"n": 1}))  # the header goes with it
    assert journal.tx_rows(run_id="oa-1", open_only=True) == [] and reads == []
    assert book.store.get_run("oa-1") is not None  # born: the header and the row were written
    journal.tx_rows(run_id="other", open_only=True)  # another run's: always read
    assert reads == ["other"]


def test_a_one_act_run_that_began_a_transaction_finds_it(
    book: Daybook, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[Any] = []
    journal = _journal(book, "oa-2", reads, monkeypatch)
    begin = row("oa-2", 2, name="tx:begin", data={"value": {"tx_id": "t-oa"}})
    journal.tx_begin("t-oa", "oa-2", '["a/**"]', 1, 0, begin, NOW)  # through the store's other methods
    found = journal.tx_rows(run_id="oa-2", open_only=True)
    assert [r[0] for r in found] == ["t-oa"] and reads == ["oa-2"]
