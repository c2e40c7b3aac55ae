"""Typed journal records and their JSON encoding: the shapes the store reads and writes.

The journal is a list of `Event` rows per run, append-only, ordered by `seq`. A step (decision or
effect) owns one or more events that share its `step` position: a decision is one row; an effect
is an `intent`, then any number of `attempt` / `outcome` rows. The run header (`RunInfo`) is an
index over the journal (status, lease) kept for listing and leasing; the journal stays the truth.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .errors import ConfigError, CorruptJournal, NotSerializable, RunErased

SCHEMA_VERSION = 16

JSON = Any


class Kind(StrEnum):
    RUN_STARTED = "run_started"
    DECISION = "decision"
    INTENT = "intent"
    ATTEMPT = "attempt"
    OUTCOME = "outcome"
    RUN_COMPLETED = "run_completed"
    RUN_FAILED = "run_failed"
    RUN_ATTENTION = "run_attention"
    RUN_RETRIED = "run_retried"  # data: by, from (the status it left), error (what it had)
    RUN_CANCELLED = "run_cancelled"  # data: by, from, compensate, from_step (where an unwind starts)
    RUN_EXPIRED = "run_expired"  # data: by, cutoff, environment (what gc removed, if anything)
    RUN_PAUSED = "run_paused"  # data: by, from, inbox_id (the pause request it answers, if any)
    TIMER = "timer"  # status `set` (data: fire_at), then `fired`
    SIGNAL = "signal"  # status `waiting` (data: name, deadline), then `received` or `timeout`
    OBLIGATION = "obligation"  # status `open` (data: kind, owner, due, ...), `fulfilled`, `cancelled`
    # No step (schema v12): the run stopped on purpose (suspended, paused, parked) inside an open
    # transaction (data: tx_id). The next execution goes on with it; one that finds the run's
    # steps ending inside an open transaction without this row aborts it (its owner died).
    TX_LEFT = "tx_left"
    # No step: an open transaction attempt was released (data: tx_id, by, reason, from): an
    # operator (`daybook tx release`) or the end of its run (completed, failed, cancelled,
    # expired). Its header is `aborted` in the same database transaction; the run's next
    # execution, if any, aborts the attempt (its inverses run) and retries under a fresh epoch.
    TX_RELEASED = "tx_released"
    # No step (schema v14): an execution replayed recorded model calls, not paying for them again
    # (data: calls, usd, tokens); written before its first new row or at its exit (`books.cost`).
    RUN_REPLAYED = "run_replayed"


class Status(StrEnum):
    """Outcome of a step. `unknown` is a normal, stored state: the act may or may not have happened."""

    RECORDED = "recorded"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    UNKNOWN = "unknown"


class RunStatus(StrEnum):
    PENDING = "pending"  # submitted for a worker, not started yet
    RUNNING = "running"
    SUSPENDED = "suspended"  # waiting for a timer or a signal; holds no process
    NEEDS_ATTENTION = "needs_attention"
    PAUSED = "paused"  # a person paused it (`daybook pause`); `daybook resume` goes on, any time
    STUCK = "stuck"  # a compensation could not be completed; a person must finish it
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # an operator ended it (`daybook cancel`); never runs again
    EXPIRED = "expired"  # paused past retention (`daybook gc`); never runs again


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.EXPIRED})
STEPPED = frozenset(
    k.value
    for k in (
        Kind.DECISION,
        Kind.INTENT,
        Kind.ATTEMPT,
        Kind.OUTCOME,
        Kind.TIMER,
        Kind.SIGNAL,
        Kind.OBLIGATION,
    )
)
_KINDS = frozenset(k.value for k in Kind)


@dataclass(slots=True)
class Event:
    """One journal row. `step` is the deterministic position of the step in the run (call order).

    Treat it as immutable (it is not frozen only because resume builds thousands per run)."""

    run_id: str
    seq: int
    kind: str
    step: int | None = None
    name: str = ""
    key: str | None = None
    status: str | None = None
    attempt: int = 0
    fp: str | None = None
    data: dict[str, JSON] = field(default_factory=dict)
    at: float = 0.0

    def as_dict(self) -> dict[str, JSON]:
        return {
            "seq": self.seq,
            "step": self.step,
            "kind": self.kind,
            "name": self.name,
            "key": self.key,
            "status": self.status,
            "attempt": self.attempt,
            "fp": self.fp,
            "at": self.at,
            "data": self.data,
        }


def settles(ev: Event) -> bool:
    """True for an outcome row that ends its effect: confirmed, or failed for good (a failure
    marked `final: false` waits for a retry)."""
    return ev.kind == Kind.OUTCOME and (
        ev.status == Status.CONFIRMED or (ev.status == Status.FAILED and ev.data.get("final", True))
    )


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run header: what `daybook runs` lists and what a lease is taken on."""

    run_id: str
    workflow: str
    ref: str
    status: str
    input: JSON
    result: JSON
    error: JSON
    created_at: float
    updated_at: float
    lease_owner: str | None
    lease_expires: float | None
    schema_version: int
    wake_at: float | None = None
    code_version: str = ""
    # Queues and run search (`daybook.dispatch`): the queue a run waits in, its priority there
    # (lower first), its partition key (one run per key at a time), and the run it belongs to.
    queue: str | None = None
    priority: int = 0
    partition: str | None = None
    parent_run: str | None = None

    def as_dict(self) -> dict[str, JSON]:
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "ref": self.ref,
            "status": self.status,
            "input": self.input,
            "result": self.result,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "lease_owner": self.lease_owner,
            "lease_expires": self.lease_expires,
            "schema_version": self.schema_version,
            "wake_at": self.wake_at,
            "code_version": self.code_version,
            "queue": self.queue,
            "priority": self.priority,
            "partition": self.partition,
            "parent_run": self.parent_run,
        }


@dataclass(frozen=True)
class Why:
    """The decision ledger's reasons for a decision (L1), recorded in the decision's own row.

    `policy`/`version`: the rule set and its version that allowed the choice; `observation`: what
    it acted on (a snapshot id, or the data itself); `alternatives`: the options not taken;
    `model`, `tokens`, `cost`: for a model's decision (filled in by `ctx.llm`)."""

    policy: str | None = None
    version: str | None = None
    observation: JSON = None
    alternatives: Sequence[JSON] = ()
    model: str | None = None
    tokens: int | None = None
    cost: float | None = None
    note: str = ""

    def as_dict(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "policy": self.policy,
            "version": self.version,
            "observation": self.observation,
            "alternatives": list(self.alternatives),
            "model": self.model,
            "tokens": self.tokens,
            "cost": self.cost,
            "note": self.note,
        }
        return {k: v for k, v in out.items() if v not in (None, "", [])}


def _chunker(sort_keys: bool, allow_nan: bool) -> Callable[[Any, int], Sequence[str]]:
    """A compact JSON encoder (no ASCII escaping), built once, as the pieces its text is joined
    from (`"".join(chunks(value, 0))`: no Python frame on the hot paths that join them
    themselves). `JSONEncoder.encode` builds its C encoder anew on every call, which showed on
    the hot path (three encodings per effect step); this reuses one. Without the
    circular-reference marks: a value that contains itself recurses until `RecursionError`,
    which every caller turns into `NotSerializable` as for a value nested too deep (what such a
    value is to the journal)."""
    spec = json.JSONEncoder(
        separators=(",", ":"), sort_keys=sort_keys, allow_nan=allow_nan, ensure_ascii=False
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return lambda value, _level: (spec.encode(value),)

    def default(value: Any) -> Any:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    chunks: Callable[[Any, int], Sequence[str]] = make(
        None, default, json.encoder.encode_basestring, None, ":", ",", sort_keys, False, allow_nan
    )
    return chunks


# Built once: json.dumps with options constructs an encoder per call, which shows on the hot path.
_ENCODE_CHUNKS = _chunker(sort_keys=False, allow_nan=False)
_CANONICAL_CHUNKS = _chunker(sort_keys=True, allow_nan=True)


def _ENCODE(value: Any) -> str:
    return "".join(_ENCODE_CHUNKS(value, 0))


def _CANONICAL(value: Any) -> str:
    return "".join(_CANONICAL_CHUNKS(value, 0))


# What one journal payload may be (a value, a tool's arguments or result, a run's input or
# result): nested at most MAX_DEPTH deep, and at most MAX_PAYLOAD characters of JSON. Past these
# a value is refused at the step that produced it, with NotSerializable.
MAX_DEPTH = 200
MAX_PAYLOAD = 16 * 1024 * 1024

_PLAIN = (
    "daybook journals JSON only (no pickle): use dicts with string keys, lists, str, int, float, bool or None"
)


def dumps(value: JSON, what: str) -> str:
    """Encode for the journal; `what` names the step so the error says where the bad value came from.

    The one gate every payload passes on its way to the store: what JSON cannot hold, what
    UTF-8 cannot encode (a lone surrogate) and what is over the size limit are refused here."""
    try:
        text = _ENCODE(value)
    except (TypeError, ValueError, RecursionError) as exc:
        problem = _not_plain(value) or _brief(exc)
        advice = _FIX_TEXT if "surrogate" in problem else _PLAIN
        raise NotSerializable(f"{what} is not JSON-serialisable ({problem}); {advice}") from None
    if len(text) > MAX_PAYLOAD:
        raise NotSerializable(
            f"{what} is {len(text):,} characters of JSON, over daybook's limit of {MAX_PAYLOAD:,} "
            "per journal payload; keep large data elsewhere (a file, an object store) and "
            "journal its reference"
        )
    if not text.isascii():
        problem = _bad_text(text)
        if problem:
            raise NotSerializable(f"{what} cannot be stored: {problem}; {_FIX_TEXT}")
    return text


def row_text(value: JSON, run_id: str, seq: int) -> str:
    """`dumps` of a journal row's payload, its label (`run '<id>' seq <n>`) made only when the
    value is refused: made for every row, it cost as much as the encoding itself."""
    try:
        text = "".join(_ENCODE_CHUNKS(value, 0))  # `_ENCODE`, inline: this runs for every row
    except (TypeError, ValueError, RecursionError):
        return dumps(value, f"run {run_id!r} seq {seq}")  # raises, naming the row
    if len(text) > MAX_PAYLOAD or (not text.isascii() and _bad_text(text)):
        return dumps(value, f"run {run_id!r} seq {seq}")  # raises, naming the row
    return text


def check_json(value: JSON, what: str) -> None:
    """Refuse what JSON would change silently (tuples, non-string keys, NaN), what no store can
    encode (a lone surrogate, nesting deeper than MAX_DEPTH), so that replay returns exactly
    what the live run saw. One walk, no encoding: this is on the hot path."""
    problem = _not_plain(value)
    if problem:
        advice = _FIX_TEXT if "surrogate" in problem else _PLAIN
        raise NotSerializable(f"{what} is not plain JSON ({problem}); {advice}")


def text_ok(value: str) -> bool:
    """True for text every store can hold in a column (the fast path of `check_text`)."""
    return value.isascii() and "\x00" not in value


def check_text(value: str, what: str) -> None:
    """Refuse text no store can hold in a column (a name, an id, a key, a sender): a NUL
    character (PostgreSQL refuses it, so SQLite does too, to keep journals portable) or a lone
    surrogate (not encodable as UTF-8)."""
    if text_ok(value):
        return
    problem = _bad_text(value) or ("a NUL character (\\x00)" if "\x00" in value else "")
    if problem:
        raise NotSerializable(f"{what} {_brief(value)} cannot be stored: {problem}; {_FIX_TEXT}")


_FIX_TEXT = (
    "text daybook stores must be valid Unicode (a lone surrogate such as '\\ud83d' is often "
    "half of an emoji cut by a truncation), and names, ids, keys and senders may not hold NUL; "
    "clean the value where it is produced (e.g. s.encode('utf-8', 'replace').decode())"
)


def _bad_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {text[exc.start]!r} at position {exc.start}"
    return ""


def _brief(value: object) -> str:
    text = _repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def shown(value: object) -> str:
    """`value` as a message shows a bad argument: its repr, cut short, safe for any value."""
    return _shown(value)


def _repr(value: object) -> str:
    """`repr(value)` for a message; a value too deep to print (a recursive list) is named."""
    try:
        return repr(value)
    except RecursionError:
        return f"<a {type(value).__name__} nested too deep to print>"


def safe_text(text: str) -> str:
    """`text` with anything UTF-8 cannot encode escaped (for messages made of foreign text:
    an exception's message, a traceback), so recording a failure never fails in turn."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def is_plain(value: Any) -> bool:
    """True if `check_json` would accept `value`: plain JSON, which also means it holds no
    `Secret` (the hot path of an act: one walk both checks its arguments and finds none)."""
    if type(value) is dict:  # an act's arguments, a tool's result: one call less
        return not _not_plain_in(value, 0)
    return not _not_plain(value)


def _not_plain(value: JSON, depth: int = 0) -> str:
    kind = type(value)  # the exact types first: the common case, cheaper than isinstance
    if kind is str:
        return "" if value.isascii() else _bad_text(value)
    if kind is int or value is None:
        return ""
    if (kind is dict or kind is list) and depth < MAX_DEPTH:
        return _not_plain_in(value, depth)
    if value is None or isinstance(value, int):
        return ""
    if isinstance(value, str):
        return "" if value.isascii() else _bad_text(value)
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"non-finite float {value}"
    if isinstance(value, list | dict):
        return _not_plain_in(value, depth) if depth < MAX_DEPTH else f"nested deeper than {MAX_DEPTH} levels"
    return f"a {type(value).__name__} does not survive a JSON round trip"


def _not_plain_in(value: list[JSON] | dict[Any, JSON], depth: int) -> str:
    if isinstance(value, list):
        for item in value:
            problem = _not_plain(item, depth + 1)
            if problem:
                return problem
        return ""
    for key, item in value.items():
        if not isinstance(key, str):
            return f"non-string key {key!r}"
        kind = type(item)
        if (
            kind is int or kind is bool or item is None or (kind is str and item.isascii())
        ) and key.isascii():
            continue  # a leaf the common case holds (a count, an id, a flag, a name): no call for it
        problem = (_bad_text(key) if not key.isascii() else "") or _not_plain(item, depth + 1)
        if problem:
            return problem
    return ""


def fingerprint(value: JSON, what: str, check: bool = True) -> str:
    """A short digest of the arguments' JSON: compared on replay, never used as a key.

    `check=False` skips the plain-JSON walk: on replay the journal already holds the value's
    fingerprint, and any difference (a tuple where a list was) is caught by the comparison."""
    if check:
        check_json(value, what)
    try:
        text = "".join(_CANONICAL_CHUNKS(value, 0))  # `_CANONICAL`, inline: once per step
    except (TypeError, ValueError, RecursionError):
        check_json(value, what)  # raises, naming what is wrong
        raise
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


# The longest wait or lease in seconds any call takes (a day).
MAX_SECONDS = 86_400.0


def bounded(value: object, what: str, *, low: float, high: float, above: bool = False) -> float:
    """`value` as a float if it is a finite number in [low, high] ((low, high] with `above`);
    else a ConfigError naming `what` and the range. NaN and infinity are refused: a NaN lease
    or poll compares false with everything and would stall a run or a worker for good."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a number, got {_shown(value)}")
    number = float(value) if abs(value) < 1e300 else math.inf
    if not math.isfinite(number) or number > high or number < low or (above and number == low):
        lowest = f"> {low:g}" if above else f">= {low:g}"
        raise ConfigError(f"{what} must be a finite number {lowest} and <= {high:g}, got {_shown(value)}")
    return number


def whole(value: object, what: str, *, low: int, high: int) -> int:
    """`value` if it is an int in [low, high]; else a ConfigError naming `what` and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{what} must be a whole number from {low} to {high}, got {_shown(value)}")
    return value


def _shown(value: object) -> str:
    text = _repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def loads(text: str | bytes | None, run_id: str, seq: int) -> JSON:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CorruptJournal(
            f"run {run_id!r} seq {seq}: payload is not valid JSON ({exc}); the row was changed "
            f"outside daybook. Restore it from a backup (`daybook export {run_id} --raw` salvages "
            "what is readable), then resume"
        ) from None


def validate(ev: Event) -> Event:
    if ev.kind not in _KINDS:
        raise CorruptJournal(
            f"run {ev.run_id!r} seq {ev.seq}: unknown record kind {ev.kind!r}; it was written by a "
            "newer daybook or changed by hand. Upgrade daybook or restore the row"
        )
    if ev.kind in STEPPED and ev.step is None:
        raise CorruptJournal(f"run {ev.run_id!r} seq {ev.seq}: {ev.kind} row has no step position")
    if not isinstance(ev.data, dict):
        raise CorruptJournal(f"run {ev.run_id!r} seq {ev.seq}: payload is not a JSON object")
    return ev


def canonical(value: JSON) -> str:
    """The value's canonical JSON (sorted keys, no spaces): what a keyed digest is taken over."""
    return _CANONICAL(value)


ERASED = "$erased"  # the mark retention (`daybook gc`) leaves where a payload was


def erased_by(value: JSON) -> str | None:
    """The gc pass that erased `value` when it is an erasure mark, else None."""
    if isinstance(value, dict) and ERASED in value:
        return str(value[ERASED])
    return None


def readable(run_id: str, value: JSON, what: str) -> JSON:
    """`value` as code may use it: an erasure mark raises `RunErased` instead of passing as data."""
    gc_id = erased_by(value)
    if gc_id is not None:
        raise RunErased(run_id, gc_id, what)
    return value


def check_unerased(run_id: str, events: Sequence[Event]) -> None:
    """Refuse to replay a journal that holds an erased row (`RunErased`, naming the gc pass)."""
    for ev in events:
        gc_id = erased_by(ev.data)
        if gc_id is not None:
            raise RunErased(run_id, gc_id, f"journal rows it replays (of run {ev.run_id!r})")
