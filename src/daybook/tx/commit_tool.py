"""A multi-record commit as one effect (T9): the tool that makes an atomic commit.

`book.commit_tool(write, message=...)` turns `write(tx, **args)` (which stages records with
`tx.put`, `tx/commit.py`) into a daybook tool: called through `ctx.effect`, it is one effect in
the effect ledger with one idempotency key, and the commit it makes is keyed by that same key. So
the tool is idempotent by construction: a second call under the key (a retry, a resume after a
SIGKILL between the commit and its journaled outcome) stages again, finds the key's commit and
returns it; nothing is committed twice. The commit id is the effect's counterparty reference
(`reference`), shown beside the key in the effect ledger.

The tool returns `{"commit_id", "result", "records"}`: `result` is what `write` returned (on a
repeat, what it returned this time, from the same arguments), `records` the `[collection, id]`
pairs the commit wrote.
"""

from __future__ import annotations

import getpass
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError
from ..journal.tool import Tool, tool
from ..records import JSON
from ..store import Store
from .commit import Records, Transaction, run_transaction


def commit_tool(
    write: Callable[..., Any],
    *,
    message: str,
    author: str | None = None,
    invariants: Sequence[Callable[[Records], None]] = (),
    name: str | None = None,
    store: Store,
) -> Tool[dict[str, JSON]]:
    """The tool (see the module docstring) committing `write(tx, **args)` to `store`; `message`
    is the audit entry's text, formatted with the call's arguments
    (`"Create invoice {number}"`); `author` the audit entry's author (default: the OS user)."""
    who = author or getpass.getuser()
    args = _arguments(write, message)

    called = name or str(getattr(write, "__name__", "commit"))

    def committed(idempotency_key: str, **kwargs: Any) -> dict[str, JSON]:
        try:
            text = message.format(**kwargs)
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"commit tool {called!r}: its message {message!r} names {exc} that the call's "
                f"arguments ({', '.join(sorted(kwargs))}) do not have"
            ) from None

        def staged(tx: Transaction) -> Any:
            return write(tx, **kwargs)

        done = run_transaction(store, text, staged, author=who, key=idempotency_key, invariants=invariants)
        return {
            "commit_id": done.commit_id,
            "result": done.result,
            "records": [[c, r] for c, r in done.records],
        }

    key = inspect.Parameter("idempotency_key", inspect.Parameter.KEYWORD_ONLY, annotation=str)
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in args]
    committed.__signature__ = inspect.Signature([*keyword, key])  # type: ignore[attr-defined]
    committed.__name__ = committed.__qualname__ = called
    committed.__module__ = getattr(write, "__module__", __name__)
    committed.__doc__ = getattr(write, "__doc__", None)
    made: Tool[dict[str, JSON]] = tool(idempotent=True, reference=_commit_id, name=name)(committed)
    return made


def _commit_id(result: Any) -> Any:
    return result.get("commit_id") if isinstance(result, dict) else None


def _arguments(write: Callable[..., Any], message: str) -> list[inspect.Parameter]:
    """The tool's arguments: `write`'s after the transaction; refused with what to write instead."""
    if not callable(write):
        raise ConfigError(
            f"commit_tool takes the function that stages the records, not {type(write).__name__}"
        )
    if not isinstance(message, str) or not message.strip():
        raise ConfigError(
            "commit_tool(message=...) is the commit's audit text, formatted with the call's "
            "arguments: a non-empty string such as 'Create invoice {number}'"
        )
    params = list(inspect.signature(write).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ConfigError(
            f"{getattr(write, '__name__', 'write')} must take the transaction first: def write(tx, ...)"
        )
    args = params[1:]
    if any(p.name == "idempotency_key" for p in args):
        raise ConfigError(
            "the commit tool's key is its own (the commit's key): write() must not take idempotency_key"
        )
    return args
