"""The payload guard: a store handle that keeps secrets out of what it writes and applies the
payload codec, wrapped around any backend (`guard(store, codec)`; `Daybook` always uses one).

On the way in, every payload (journal row data, a run's input, result and error, a deferral's
error) has each `Secret` replaced by its keyed digest and the text of every live secret scrubbed
(an error message that quotes a password), then is encoded by the codec, if any. On the way out
the codec decodes it. Everything else passes through to the backend unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from ..errors import ConfigError, NotSerializable
from ..records import JSON, Event, RunInfo
from . import Store
from .codec import ENVELOPE, PayloadCodec, decode_payload, encode_payload
from .secrets import concealer_for


class GuardedStore:
    """A `Store` whose payloads are concealed, scrubbed and encoded (see the module docstring)."""

    def __init__(self, inner: Store, codec: PayloadCodec | None) -> None:
        self.inner = inner
        self.codec = codec

    def __getattr__(self, name: str) -> Any:
        # Everything not about payloads is the backend's own (leases, entities, transactions).
        return getattr(self.inner, name)

    # -- in ---------------------------------------------------------------------------------

    def _in(self, value: JSON, spine: bool = False, conceal: bool = False) -> JSON:
        cover = concealer_for(self)
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

    def _event_in(self, ev: Event | None, conceal: bool = False) -> Event | None:
        if ev is None:
            return None
        data = self._in(ev.data, spine=True, conceal=conceal)
        # The hot path (no codec, no live secret): the same row, not a copy.
        return ev if data is ev.data else dataclasses.replace(ev, data=cast(dict[str, JSON], data))

    def create_run(self, info: RunInfo, first: Event) -> bool:
        sealed = dataclasses.replace(info, input=self._in(info.input))
        return self.inner.create_run(sealed, cast(Event, self._event_in(first)))

    def append(self, event: Event) -> None:
        self.inner.append(cast(Event, self._event_in(event)))

    def finish(
        self,
        run_id: str,
        owner: str,
        status: str,
        result: object,
        error: object,
        event: Event | None,
        now: float,
    ) -> None:
        sealed, row = self._in(result, conceal=True), self._event_in(event, conceal=True)
        self.inner.finish(run_id, owner, status, sealed, self._in(error), row, now)

    def defer(self, run_id: str, owner: str, wake_at: float, error: str, now: float) -> None:
        cover = concealer_for(self)
        self.inner.defer(run_id, owner, wake_at, cast(str, cover.scrub(error)), now)

    def set_attributes(self, event: Event, attributes: dict[str, JSON]) -> None:
        self.inner.set_attributes(cast(Event, self._event_in(event)), attributes)

    # -- out --------------------------------------------------------------------------------

    def _event_out(self, ev: Event) -> Event:
        data = decode_payload(self.codec, ev.data)
        return ev if data is ev.data else dataclasses.replace(ev, data=data)

    def _run_out(self, info: RunInfo, strict: bool = True) -> RunInfo:
        try:
            fields = {k: decode_payload(self.codec, getattr(info, k)) for k in ("input", "result", "error")}
        except ConfigError:
            if strict:
                raise
            return info  # a listing shows the envelope rather than failing on it
        return dataclasses.replace(info, **fields)

    def load(self, run_id: str) -> list[Event]:
        # Decoded even with no codec: a handle without the key must refuse an encoded journal
        # (ConfigError) rather than replay it as if its payloads were empty.
        return [self._event_out(e) for e in self.inner.load(run_id)]

    def get_run(self, run_id: str) -> RunInfo | None:
        info = self.inner.get_run(run_id)
        return info if info is None else self._run_out(info)

    def list_runs(self, status: str | None = None, limit: int = 100) -> list[RunInfo]:
        runs = self.inner.list_runs(status, limit)
        return [self._run_out(r, strict=False) for r in runs]

    def search_runs(
        self, filters: dict[str, Any], limit: int, after: tuple[float, str] | None = None
    ) -> list[RunInfo]:
        return [self._run_out(r, strict=False) for r in self.inner.search_runs(filters, limit, after)]

    def open_effects(self, skip_damaged: bool = False) -> list[Event]:
        return self._events(self.inner.open_effects(skip_damaged))

    def events_of_kind(self, kind: str) -> list[Event]:
        return self._events(self.inner.events_of_kind(kind))

    def find_intent(self, key: str) -> Event | None:
        ev = self.inner.find_intent(key)
        return ev if ev is None else self._event_out(ev)

    def _events(self, events: list[Event]) -> list[Event]:
        return [self._event_out(e) for e in events]


def guard(store: Store, codec: PayloadCodec | None) -> Store:
    """`store` behind a payload guard (see the module docstring)."""
    if codec is not None and not (
        callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))
    ):
        raise ConfigError(f"codec={codec!r}: a payload codec needs encode(bytes) and decode(bytes)")
    return cast(Store, GuardedStore(store, codec))
