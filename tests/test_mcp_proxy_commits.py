"""A proxied MCP call in two commits (issue 28 goal 5): a new call's run is created in the same
commit as its effect's intent, and the call's confirmed outcome is written in the same commit
as the run's end. A real `daybook proxy` process is SIGKILLed at each of these commits, before
and after, on both stores; the MCP server's own ledger is the judge (every call executed at
most once, never sent twice, and once settled the client gets the server's answer).

The points, for one `send` call:

- `before-start`: killed before the commit of the run with its intent: nothing is journaled and
  nothing was sent; the same call made again starts afresh and executes once;
- `after-start`: killed right after it (the intent durable, the call not sent): an unknown,
  settled by the tool's status query (absent: sent once) or by a person (never re-sent blindly);
- `before-end`: the server executed the call, killed before the commit of its outcome with the
  run's end: an unknown, exactly as a kill before the outcome's own commit leaves it today;
- `after-end`: killed right after it: the call is answered from the journal, not executed again.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp_support import HERE, body, ledger_of, proxy_process, run, text
from mcp_support import ledger as ledger  # a fixture

from daybook import Daybook, RunStatus

POINTS = {
    "before-start": ("--kill-before", "intent:1"),
    "after-start": ("--kill-after", "intent:1"),
    "before-end": ("--kill-before", "outcome:1"),
    "after-end": ("--kill-after", "outcome:1"),
}
SEND = {"to": "bob", "amount": 7}
SESSION = "commits"


async def _killed_mid_call(db_url: str, policy: Path | None, point: str) -> None:
    """One `send` through a proxy process that SIGKILLs itself at `point`."""
    args = [str(HERE / "mcp_proxy_child.py"), db_url, SESSION, *POINTS[point]]
    args += ["--tools-policy", str(policy)] if policy is not None else []
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    with suppress(Exception):  # the connection to the killed proxy breaks: expected
        async with stdio_client(params) as (r, w), ClientSession(r, w) as c:
            await c.initialize()
            with suppress(Exception):
                await asyncio.wait_for(c.call_tool("send", SEND), 60)


def _again(db_url: str, policy: Path | None) -> types.CallToolResult:
    async def call() -> types.CallToolResult:
        async with proxy_process(db_url, SESSION, policy) as c:  # restarted, same session
            return await c.call_tool("send", SEND)

    result: types.CallToolResult = run(call)
    return result


def _runs(db_url: str) -> list[Any]:
    with Daybook(db_url) as book:
        return [r for r in book.store.list_runs() if r.run_id.startswith(f"mcp/{SESSION}/")]


@pytest.mark.slow
@pytest.mark.parametrize("status", [False, True], ids=["no-profile", "status-query"])
@pytest.mark.parametrize("point", list(POINTS))
def test_a_proxy_killed_at_each_commit_of_a_call_never_sends_it_twice(
    db_url: str, ledger: Path, tmp_path: Path, point: str, status: bool
) -> None:
    policy = None
    if status:
        policy = tmp_path / "policy.json"
        policy.write_text(json.dumps({"tools": {"send": {"status": {"tool": "sent", "argument": "key"}}}}))
    run(lambda: _killed_mid_call(db_url, policy, point))

    sent = 1 if point in ("before-end", "after-end") else 0
    assert len(ledger_of(ledger)) == sent  # the server executed it iff the kill came after the call
    runs = _runs(db_url)
    if point == "before-start":
        assert runs == []  # the run's header and its intent are one commit: neither
    else:
        (header,) = runs
        ended = point == "after-end"
        assert header.status == (RunStatus.COMPLETED if ended else RunStatus.RUNNING)
        with Daybook(db_url) as book:
            kinds = [(e.kind, e.status) for e in book.journal(header.run_id) if e.step is not None]
        # The outcome and the run's end are one commit too: both or neither.
        assert kinds == ([("intent", None), ("outcome", "confirmed")] if ended else [("intent", None)])

    answer = _again(db_url, policy)
    settles = status or point in ("before-start", "after-end")
    if settles:  # started afresh, asked the server (absent: sent once), or read from the journal
        assert not answer.isError, text(answer)
        assert body(answer) == {"execution": 1, "tool": "send", **SEND}
        assert len(ledger_of(ledger)) == 1
        assert body(_again(db_url, policy)) == body(answer)  # and every time after
    else:  # no profile: a person settles it (`daybook resolve`); never re-sent blindly
        assert answer.isError and "unknown" in text(answer) and "daybook resolve" in text(answer)
        assert len(ledger_of(ledger)) == sent
    assert len(ledger_of(ledger)) == (1 if settles else sent)


def test_a_call_takes_two_commits_and_its_secret_arguments_stay_concealed(
    db_url: str, ledger: Path, tmp_path: Path
) -> None:
    """Two store commits per proxied call (its run with its intent; its outcome with its end),
    and the rows these commits write hold a secret argument and its echo only as digests."""
    from mcp_support import client
    from store_bytes import store_text

    pin = "pin-7Qz-commit-path-41"
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"tools": {"send": {"secrets": ["pin"]}}}))
    with Daybook(db_url) as book:
        dialect = book.store.inner.dialect  # type: ignore[attr-defined]
        counts: list[int] = []

        async def calls() -> list[Any]:
            async with client(book, session="two", policy=policy) as c:
                out = []
                for n in range(3):
                    before = dialect.group.commits
                    out.append(body(await c.call_tool("send", {**SEND, "amount": n + 1, "pin": pin})))
                    counts.append(dialect.group.commits - before)
                return out

        answers = run(calls)
    assert [a["execution"] for a in answers] == [1, 2, 3] and answers[0]["pin"] == pin
    # The first secret may also write the store's digest key (once per store: `store/keys.py`;
    # on SQLite through the same group of commits, counted here).
    assert counts[1:] == [2, 2] and counts[0] in (2, 3)
    assert pin not in store_text(db_url)


def test_a_call_whose_run_another_process_created_meanwhile_attaches_to_it(db_url: str, ledger: Path) -> None:
    """The look that finds no run, then another process's run of that id created before this
    one's first commit (its header with the intent): nothing is written here, and the call
    attaches to that run (here: answered from its journal), never executed twice."""
    from mcp_support import client

    put = {"name": "n", "value": "v", "idempotency_key": "k-race"}
    with Daybook(db_url) as book:
        real = book.store.get_run
        looks: list[str] = []

        def stale_once(run_id: str) -> Any:
            if not looks:  # the first look misses the run, as if made just before its creation
                looks.append(run_id)
                return None
            return real(run_id)

        created: list[bool] = []
        create = book.store.create_run

        def creating(*args: Any) -> bool:
            created.append(create(*args))
            return created[-1]

        async def calls() -> tuple[Any, Any]:
            async with client(book, session="race") as c:
                first = body(await c.call_tool("put", put))
                book.store.get_run = stale_once  # type: ignore[method-assign]
                book.store.create_run = creating  # type: ignore[method-assign]
                return first, body(await c.call_tool("put", put))

        first, second = run(calls)
        runs = [r for r in book.store.list_runs() if r.run_id.startswith("mcp/")]
    assert looks and created[0] is False  # its header with the intent was refused: nothing written
    assert second == first and first["execution"] == 1
    assert len(runs) == 1 and runs[0].status == RunStatus.COMPLETED
    assert len(ledger_of(ledger)) == 1
