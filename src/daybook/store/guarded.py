"""The payload guard: a store handle that keeps secrets out of what it writes and applies the
payload codec, wrapped around any backend (`guard(store, codec)`; `Daybook` always uses one).

On the way in, every payload has each `Secret` replaced by its keyed digest and the text of
every live secret scrubbed (an error message that quotes a password), then is encoded by the
codec, if any. On the way out the codec decodes it. A payload is whatever a run, a person or a
tool gave: journal row data (every kind, transaction rows included), a stream's chunks, a
run's input, result and error, a deferral's error, a signal's payload, a staged record, an entity log entry, a
schedule's input.

There is no side door: every method of every part of the `Store` protocol (`parts`) is either
guarded here or named in `PASSTHROUGH` (methods that carry no payload: leases, queues, headers'
spine, the raw rows of `export --raw`). The guard has no `__getattr__`; a method added to the
protocol and to neither list is missing from the guard, and `tests/test_every_payload_guarded.py`
says so. A transaction's rows (`tx_begin`, `tx_mark`) and the attributes row (`set_attributes`)
are store methods that take the `Event`, guarded like `append`: no write reaches a backend
around the guard.
At open, `codec_check.verify` holds the handle's codec against the one the store recorded.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..errors import ConfigError, NotSerializable
from ..records import JSON, Event, RunInfo, dumps
from . import Store, read_scope
from .chunks import Chunk
from .codec import ENVELOPE, PayloadCodec, decode_payload, encode_payload
from .codec_check import verify
from .secrets import Concealer, concealer_for

# Store methods with no payload in or out, by protocol part (`parts`): the backend's own,
# called through unchanged. The payload-carrying methods of every part are guarded below.
PASSTHROUGH = (
    # Leases
    "claim", "hold", "claim_next", "renew", "release", "suspend",
    # Inbox: the approvers' token hashes
    "set_approver", "approvers",
    # Commits: the staged records' payloads are guarded (`stage`, `get_record`)
    "commit_tx", "abandon_tx", "staging", "commits",
    # Entities: the log entries are guarded (`entity_record`, `entity_view`)
    "entity_claim", "entity_release", "entity_list",
    # Epochs: the journal rows are guarded (`tx_begin`, `tx_mark`)
    "tx_rows", "tx_signal", "tx_seen",
    # Dispatch: the attribute index stays in clear (it is what `find` searches)
    "ensure_queue", "declare_queue", "queue_rows", "queue_names", "claim_queued", "attributes",
    "drop_schedule", "pause_schedule", "advance_schedule",
    # Admin
    "close", "gc", "gc_log", "meta_value", "meta_items", "raw_rows", "journal_run_ids",
    "quick_check", "current_role",
)  # fmt: skip
_EVERY = 2**62  # a LIMIT that takes every row
_TAG = f'"{ENVELOPE}"'  # an encoded payload's text holds it; a plain one (almost never) does


class GuardedStore:
    """A `Store` whose payloads are concealed, scrubbed and encoded (see the module docstring)."""

    def __init__(self, inner: Store, codec: PayloadCodec | None) -> None:
        self.inner = inner
        self.codec = codec
        self._cover: Concealer | None = None  # `concealer_for(self)`, looked up once

    def _concealer(self) -> Concealer:
        cover = self._cover
        if cover is None:
            cover = self._cover = concealer_for(self)
        return cover

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def read_only(self) -> bool:
        return self.inner.read_only

    @property
    def damage(self) -> dict[str, str]:
        return self.inner.damage

    @property
    def dsn(self) -> str:
        """The URL that connects (`url` may have its password masked)."""
        return str(getattr(self.inner, "dsn", self.inner.url))

    def twin(self, inner: Store) -> Store:
        """Another connection to the same store behind the same guard (a heartbeat's own)."""
        return cast(Store, GuardedStore(inner, self.codec))

    # -- in ---------------------------------------------------------------------------------

    def _in(self, value: JSON, spine: bool = False, conceal: bool = False) -> JSON:
        cover = self._concealer()
        if conceal:  # a workflow's result: the journal layer concealed everything else already
            value = cover.conceal(value)[0]
        if cover.live:
            value = cover.scrub(value)
        if isinstance(value, dict) and ENVELOPE in value:
            # It would read back as an encoded payload, and nothing could read the run again.
            raise NotSerializable(
                f"a value whose top-level key is {ENVELOPE!r} cannot be stored: the key marks a "
                "payload codec's envelope; rename the key"
            )
        return value if self.codec is None else encode_payload(self.codec, value, spine)

    def _text_in(self, text: str, what: str) -> str:
        """A payload given as JSON text (a signal, a record, an entity entry), guarded."""
        if self.codec is None and not self._concealer().live:
            return text  # the hot path: nothing to conceal, nothing to encode
        return dumps(self._in(json.loads(text)), what)

    def _event_in(self, ev: Event, conceal: bool = False) -> Event:
        data = self._in(ev.data, spine=True, conceal=conceal)
        # The hot path (no codec, no live secret): the same row, not a copy.
        return ev if data is ev.data else dataclasses.replace(ev, data=cast(dict[str, JSON], data))

    def create_run(self, info: RunInfo, first: Event, more: Sequence[Event] = ()) -> bool:
        sealed_input = self._in(info.input)
        # The hot path (no codec, no live secret): the same header, not a copy.
        sealed = info if sealed_input is info.input else dataclasses.replace(info, input=sealed_input)
        if more:
            return self.inner.create_run(sealed, self._event_in(first), [self._event_in(e) for e in more])
        return self.inner.create_run(sealed, self._event_in(first))

    def append(self, event: Event) -> None:
        cover = self._cover
        data = event.data
        if self.codec is None and cover is not None and not cover.live and ENVELOPE not in data:
            self.inner.append(event)  # the hot path: nothing to scrub or encode (`_in`)
            return
        self.inner.append(self._event_in(event))

    def append_batch(self, events: list[Event]) -> None:
        cover = self._cover
        if (
            self.codec is None
            and cover is not None
            and not cover.live
            and not any(ENVELOPE in e.data for e in events)
        ):
            self.inner.append_batch(events)  # the hot path, as `append`'s
            return
        self.inner.append_batch([self._event_in(e) for e in events])

    def finish(
        self,
        run_id: str,
        owner: str,
        status: str,
        result: object,
        error: object,
        event: Event | None,
        now: float,
        held: Sequence[Event] = (),
    ) -> None:
        sealed = self._in(cast(JSON, result), conceal=True)
        row = None if event is None else self._event_in(event, conceal=True)
        error_in = self._in(cast(JSON, error))
        if held:
            rows = [self._event_in(e) for e in held]
            self.inner.finish(run_id, owner, status, sealed, error_in, row, now, rows)
            return
        self.inner.finish(run_id, owner, status, sealed, error_in, row, now)

    def transition(
        self, run_id: str, allowed: tuple[str, ...], status: str, error: object, event: Event, now: float
    ) -> bool:
        sealed = self._in(cast(JSON, error))
        return self.inner.transition(run_id, allowed, status, sealed, self._event_in(event), now)

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        self.inner.defer(run_id, owner, wake_at, self._text_in(error, "a deferral's error"), now)

    def set_attributes(self, event: Event, attributes: dict[str, JSON]) -> None:
        # The attribute index itself stays in clear: it is what `find` searches (README).
        self.inner.set_attributes(self._event_in(event), attributes)

    def tx_begin(
        self,
        tx_id: str,
        run_id: str,
        scopes: str,
        attempt: int,
        retries: int,
        event: Event,
        now: float,
        siblings: str = "",
    ) -> int:
        sealed = self._event_in(event)
        epoch = self.inner.tx_begin(tx_id, run_id, scopes, attempt, retries, sealed, now, siblings)
        event.data["epoch"] = epoch  # the caller's row (the backend set it on the sealed copy)
        return epoch

    def tx_mark(self, tx_id: str, status: str, event: Event, now: float, before: Event | None = None) -> bool:
        sealed = None if before is None else self._event_in(before)
        return self.inner.tx_mark(tx_id, status, self._event_in(event), now, sealed)

    def signal(
        self,
        run_id: str,
        name: str,
        payload: str,
        sender: str,
        now: float,
        any_status: bool = False,
        wake: bool = True,
    ) -> int | None:
        sealed = self._text_in(payload, f"signal {name!r} payload")
        return self.inner.signal(run_id, name, sealed, sender, now, any_status, wake)

    def stage(self, txid: str, collection: str, record_id: str, data: str, now: float) -> None:
        self.inner.stage(txid, collection, record_id, self._text_in(data, "a record"), now)

    def entity_record(self, name: str, agent: str, action: str, data_json: str, now: float) -> bool:
        sealed = self._text_in(data_json, f"entity {name!r} entry")
        return self.inner.entity_record(name, agent, action, sealed, now)

    def put_schedule(self, row: dict[str, Any]) -> None:
        self.inner.put_schedule({**row, "input": self._text_in(row["input"], "a schedule's input")})

    def write_chunks(self, run_id: str, chunks: list[Chunk]) -> list[Chunk]:
        sealed = [dataclasses.replace(c, data=cast(dict[str, JSON], self._in(c.data))) for c in chunks]
        written = self.inner.write_chunks(run_id, sealed)
        return [dataclasses.replace(c, cursor=w.cursor) for c, w in zip(chunks, written, strict=True)]

    # -- out --------------------------------------------------------------------------------

    def _event_out(self, ev: Event) -> Event:
        data = decode_payload(self.codec, ev.data)
        return ev if data is ev.data else dataclasses.replace(ev, data=cast(dict[str, JSON], data))

    def _text_out(self, text: str) -> str:
        if _TAG not in text:
            return text
        return dumps(decode_payload(self.codec, json.loads(text)), "a decoded payload")

    def _run_out(self, info: RunInfo, strict: bool = True) -> RunInfo:
        try:
            fields = {k: decode_payload(self.codec, getattr(info, k)) for k in ("input", "result", "error")}
        except ConfigError:
            if strict:
                raise
            return info  # a listing shows the envelope rather than failing on it
        return dataclasses.replace(info, **fields)

    def load(self, run_id: str, after: int = 0, until: int | None = None) -> list[Event]:
        # Decoded even with no codec: a handle without the key must refuse an encoded journal
        # (ConfigError) rather than replay it as if its payloads were empty.
        def read() -> list[Event]:
            return [self._event_out(e) for e in self.inner.load(run_id, after, until)]

        if after <= 0 and until is None:  # a whole journal: read once in a read scope (a web page)
            return read_scope.journal(self, run_id, read)
        return read()

    def get_run(self, run_id: str) -> RunInfo | None:
        info = self.inner.get_run(run_id)
        return info if info is None else self._run_out(info)

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        runs = self.inner.list_runs(status, limit)
        return [self._run_out(r, strict=False) for r in runs]

    def runs_page(self, filters: dict[str, Any], limit: int, offset: int = 0) -> list[RunInfo]:
        if self.codec is None or not filters.get("text"):
            return [self._run_out(r, strict=False) for r in self.inner.runs_page(filters, limit, offset)]
        return self._searched(filters)[offset : offset + limit]

    def run_counts(self, filters: dict[str, Any]) -> dict[str, int]:
        if self.codec is None or not filters.get("text"):
            return self.inner.run_counts(filters)
        return dict(Counter(r.status for r in self._searched(filters)))

    def _searched(self, filters: dict[str, Any]) -> list[RunInfo]:
        """The runs list's text search with a codec: the stored inputs are encoded, so the text
        is looked for in the decoded ones here, over every header the other filters let by."""
        text, keyed = str(filters["text"]), filters.get("run")
        rest = {k: v for k, v in filters.items() if k not in ("text", "run")}
        found = [
            r
            for r in self.runs_page(rest, _EVERY)
            if text in r.run_id or text in dumps(r.input, "a run's input") or r.run_id == keyed
        ]
        if keyed and all(r.run_id != keyed for r in found):
            extra = self.get_run(str(keyed))
            if extra is not None:
                found.append(extra)
                found.sort(key=lambda r: (-r.created_at, r.run_id))
        return found

    def search_runs(
        self, filters: dict[str, Any], limit: int, after: tuple[float, str] | None = None
    ) -> list[RunInfo]:
        return [self._run_out(r, strict=False) for r in self.inner.search_runs(filters, limit, after)]

    def open_effects(self, skip_damaged: bool = False) -> list[Event]:
        return [self._event_out(e) for e in self.inner.open_effects(skip_damaged)]

    def load_named(self, run_id: str, kinds: tuple[str, ...], prefixes: tuple[str, ...]) -> list[Event]:
        return [self._event_out(e) for e in self.inner.load_named(run_id, kinds, prefixes)]

    def events_of_kind(self, kind: str) -> list[Event]:
        return [self._event_out(e) for e in self.inner.events_of_kind(kind)]

    def find_intent(self, key: str) -> Event | None:
        ev = self.inner.find_intent(key)
        return ev if ev is None else self._event_out(ev)

    def inbox(self, run_id: str) -> list[tuple[int, str, str, str, float]]:
        return [(i, n, self._text_out(p), s, at) for i, n, p, s, at in self.inner.inbox(run_id)]

    def get_record(self, collection: str, record_id: str) -> tuple[str, str] | None:
        found = self.inner.get_record(collection, record_id)
        return found if found is None else (self._text_out(found[0]), found[1])

    def entity_view(
        self, name: str
    ) -> tuple[str | None, float | None, list[tuple[int, float, str, str, str]]] | None:
        found = self.inner.entity_view(name)
        if found is None:
            return None
        holder, deadline, log = found
        return holder, deadline, [(i, at, a, act, self._text_out(d)) for i, at, a, act, d in log]

    def chunks(
        self,
        run_id: str,
        after: int = 0,
        stream: str | None = None,
        limit: int = 1000,
        act: str | None = None,
        divergent: bool = False,
    ) -> list[Chunk]:
        found = self.inner.chunks(run_id, after, stream, limit, act, divergent)
        return [dataclasses.replace(c, data=decode_payload(self.codec, c.data)) for c in found]

    def schedule_rows(self) -> list[dict[str, Any]]:
        return [{**r, "input": self._text_out(r["input"])} for r in self.inner.schedule_rows()]


def _passthrough(name: str) -> Callable[..., Any]:
    def call(self: GuardedStore, *args: Any, **kwargs: Any) -> Any:
        # Looked up at each call: a read-only handle's refusals replace the backend's writes.
        return getattr(self.inner, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"The backend's own `{name}`: it carries no payload."
    return call


for _name in PASSTHROUGH:
    setattr(GuardedStore, _name, _passthrough(_name))


def guard(store: Store, codec: PayloadCodec | None) -> Store:
    """`store` behind a payload guard (see the module docstring), after checking that `codec`
    is the one the store records (a wrong key or none on an encrypted store: ConfigError)."""
    if codec is not None and not (
        callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))
    ):
        raise ConfigError(f"codec={codec!r}: a payload codec needs encode(bytes) and decode(bytes)")
    verify(store, codec)
    return cast(Store, GuardedStore(store, codec))
