"""Store contract, the guard: no side door. Every row a feature writes through the store, the
transaction and attribute rows included, reaches the backend concealed and encoded."""

from __future__ import annotations

from collections.abc import Callable

from daybook import FernetCodec
from daybook.store import Store
from daybook.store.guarded import guard

from .contract import NOW, row


def test_transaction_and_attribute_rows_are_encoded_like_every_other_row(
    store: Store, new_run: Callable[..., str]
) -> None:
    guarded = guard(store, FernetCodec(FernetCodec.new_key()))
    new_run("r1")
    clear = "CLEAR-TEXT-IN-A-ROW"
    guarded.append(row("r1", 2, data={"value": clear}))
    epoch = guarded.tx_begin(
        "t1", "r1", "[]", 1, 0, row("r1", 3, name="tx:begin", data={"value": clear}), NOW
    )
    guarded.tx_mark("t1", "aborted", row("r1", 4, name="tx:abort", data={"value": {"error": clear}}), NOW)
    guarded.set_attributes(row("r1", 5, name="attributes", data={"value": clear}), {"team": "ops"})
    raw = [r[9] for r in store.raw_rows("events", "r1")][1:]
    assert len(raw) == 4 and all(clear not in text and "$codec" in text for text in raw)
    back = guarded.load("r1")
    assert [e.data.get("value") for e in back[1:]] == [clear, clear, {"error": clear}, clear]
    assert back[2].data["epoch"] == epoch
