"""The MCP proxy: an MCP server to the client, an MCP client to the upstream server, and a journal
in between. Every `tools/call` of a tool that is not read-only is a daybook run of its own whose
id is the call's key (`naming.py`): a gate when the tool is irreversible, then one `ctx.effect`
(intent committed before the call is forwarded, outcome after), the key carried upstream in
`_meta` and, when the tool takes one, as its idempotency-key argument. Listing tools, resources
and prompts, reading resources and getting prompts pass through.

What the client sees: the upstream result, first time and every time after (a confirmed call
answers from the journal); or a tool error (`isError`) that says `pending approval` (with the
`daybook approve` command), `declined`, `unknown` (with the `daybook resolve` command) or what else
went wrong. The proxy itself never dies of a bad call.

A call whose connection to the upstream broke (the server died, the pipe closed) is unknown, never
failed: the server may have acted. It is settled by the tool's status query, by an idempotent
re-send under its key, or by a person; the upstream is restarted meanwhile (`upstream.py`).

Secret arguments (`concealment.py`) go to the journal as keyed digests: the run's input, the
gate's `about` and the effect's intent hold digests, the upstream gets the values.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, cast

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED

import daybook
from daybook import (
    Context,
    Daybook,
    DaybookError,
    EffectFailed,
    NeedsAttention,
    OutcomeUnknown,
    ReconcileResult,
    RunConflict,
    RunLeased,
    Secret,
    StillUnknown,
    Suspended,
)

from . import naming
from .answers import answer, error, pass_through, status_answer
from .policy import Policy, ToolPolicy
from .upstream import Upstream, UpstreamDown

_PROXY: ContextVar[McpProxy] = ContextVar("daybook_mcp_proxy")
# The call's arguments as the upstream gets them (secret ones as `Secret`): the run's input holds
# them concealed, so the run's body takes the live ones from here.
_LIVE: ContextVar[dict[str, Any]] = ContextVar("daybook_mcp_live_arguments")
MAX_ARGUMENTS = 256 * 1024  # bytes of JSON; larger calls are refused before anything is journaled

# Upstream failures that say the request may have arrived but no answer came back.
_LOST = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
)
_REQUEST_TIMEOUT = 408  # the SDK's McpError code when its own read timeout passes
_UNCERTAIN_CODES = (CONNECTION_CLOSED, _REQUEST_TIMEOUT)


# The gate request fields a pending call's answer carries (`daybook approvals` shows the same).
REQUEST_FIELDS = (
    "run_id",
    "gate_id",
    "action",
    "about",
    "approvers",
    "approvals",
    "given",
    "approved_by",
    "deadline",
    "expiry",
    "escalate_to",
    "level",
    "overdue",
    "on_expiry",
    "facts",
    "ask",
)


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


class ProxyNotRunning(DaybookError):
    """An MCP call run was resumed outside the proxy that owns its upstream connection."""


@daybook.workflow(name="daybook.mcp.call")
async def mcp_call(ctx: Context, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One MCP tool call: a gate when the tool is gated, then the call as an effect."""
    proxy = _PROXY.get(None)
    live = _LIVE.get(None)
    if proxy is None or live is None:
        raise ProxyNotRunning(
            f"run {ctx.run_id!r} is an MCP call: it continues when the client calls again through "
            "`daybook proxy` (which holds the upstream connection), not from `daybook resume`"
        )
    return await proxy.journaled(ctx, tool, arguments, live)


# Its body is one act and ends with it: a new call's run is created with its first row (the
# effect's intent, or its gate's request) and the confirmed outcome is written with the run's
# end, two commits per call instead of four (docs/stores.md, "A proxied MCP call in two commits").
# Not a public workflow option (a body that did more after its act would widen the window in
# which a crash leaves its outcome unknown), so set here, on the one workflow it fits.
object.__setattr__(mcp_call, "one_act", True)


class McpProxy:
    """Forwards one client's MCP traffic to `upstream`, journaling tool calls in `book`."""

    def __init__(
        self, book: Daybook, upstream: Upstream, tools: list[types.Tool], policy: Policy, session: str
    ) -> None:
        self.book = book
        self.upstream = upstream
        self.session = session
        self.tools = {t.name: t for t in tools}
        policy.check(self.tools)
        self.policies = {t.name: policy.for_tool(t.name, t.annotations, t.inputSchema) for t in tools}
        Policy.check_prechecks(self.policies)
        # Per identical positional call (tool, argument digest): how many have settled.
        self._ordinals: dict[tuple[str, str], int] = {}
        self._inflight: dict[object, asyncio.Task[types.CallToolResult]] = {}
        self._made: dict[str, tuple[Callable[..., Awaitable[dict[str, Any]]], Any]] = {}
        book.inline_wait = 0.0  # a gate answers "pending" at once; the client calls again later

    # -- the client's side ---------------------------------------------------------------------

    async def call(
        self, name: str, arguments: dict[str, Any] | None, meta: Any = None
    ) -> types.CallToolResult:
        """Answer one `tools/call`: passed through (reads), or journaled under its key."""
        arguments = dict(arguments or {})
        try:
            policy = self.policies.get(name)
            if policy is None:
                return error(
                    f"no tool {name!r} at the upstream server (tools: {', '.join(sorted(self.tools))})"
                )
            # Nothing is journaled while the upstream is down: wait for its restart first.
            up = await self.upstream.session()
            if policy.read:
                return await up.call_tool(name, arguments)
            size = len(json.dumps(arguments, default=str))
            if size > MAX_ARGUMENTS:
                return error(
                    f"the arguments of {name!r} are {size} bytes; the proxy takes at most {MAX_ARGUMENTS}"
                )
            return await self._journaled_call(name, arguments, meta, policy)
        except UpstreamDown as exc:
            return error(f"daybook proxy: {exc}; nothing was sent, try again shortly")
        except Exception as exc:  # a bad call gives an MCP error, never a dead proxy
            return error(f"daybook proxy: {type(exc).__name__}: {exc}")

    async def _journaled_call(
        self, name: str, arguments: dict[str, Any], meta: Any, policy: ToolPolicy
    ) -> types.CallToolResult:
        given = naming.client_key(meta, arguments, policy.key_argument)
        live = policy.secret.wrap(arguments)
        stored = self.book.conceal(live)  # the digest never sees a secret in clear
        digest = naming.digest(stored)
        identity: object = naming.keyed_call(name, given) if given else (name, digest)
        running = self._inflight.get(identity)
        if running is not None:  # the same call again while it is in flight: join it
            return await asyncio.shield(running)
        task = asyncio.ensure_future(self._settle(name, stored, live, given, digest))
        self._inflight[identity] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(identity, None)
            else:
                task.add_done_callback(lambda _t: self._inflight.pop(identity, None))

    async def _settle(
        self, name: str, stored: dict[str, Any], live: dict[str, Any], given: str | None, digest: str
    ) -> types.CallToolResult:
        """Run the call under its name. A positional call counts as made only once it settled:
        one pending approval, unknown or in flight elsewhere is the same call when made again."""
        if given:
            reply, _ = await self._run(naming.keyed_call(name, given), name, stored, live)
            return reply
        slot = (name, digest)
        n = self._ordinals.get(slot, 0)
        run_id = naming.positional_call(self.session, name, digest, n)
        reply, settled = await self._run(run_id, name, stored, live)
        if settled:
            self._ordinals[slot] = max(self._ordinals.get(slot, 0), n + 1)
        return reply

    async def _run(
        self, run_id: str, name: str, stored: dict[str, Any], live: dict[str, Any]
    ) -> tuple[types.CallToolResult, bool]:
        """The call's run: its answer, and whether the call settled (an outcome the client got)."""
        token, live_token = _PROXY.set(self), _LIVE.set(live)
        try:
            out = await self.book.run_async(mcp_call, name, stored, run_id=run_id)
        except Suspended:
            return self._pending(run_id, name), False
        except NeedsAttention as exc:
            # Only the proxy continues an MCP call's run (`daybook resume` would park it).
            # The hint may carry the store's `--db` (`daybook.hints`): drop it whole.
            said = re.sub(rf", then `daybook resume {re.escape(run_id)}[^`]*`", "", str(exc))
            return error(
                f"daybook: call {run_id!r} ({name}) has an unknown outcome: {said}. "
                "Once resolved, make the same call again to get its outcome."
            ), False
        except RunConflict as exc:
            return error(f"daybook: key {run_id!r} was already used for another call: {exc}"), False
        except RunLeased as exc:
            return error(
                f"daybook: call {run_id!r} is in flight in another process; try again later ({exc})"
            ), False
        finally:
            _LIVE.reset(live_token)
            _PROXY.reset(token)
        return answer(run_id, out), True

    def _pending(self, run_id: str, name: str) -> types.CallToolResult:
        """The approval request a gated call answers with: what to run to decide it, in words,
        and the gate's request as structured content (who may decide now, approvals needed and
        given, the deadline and what happens then, the facts shown to the approvers)."""
        gates = [g for g in self.book.approvals() if g.get("run_id") == run_id]
        if not gates:
            return error(
                f"daybook: pending approval: {name} is gated (call {run_id!r}); its verdict is on "
                "its way: make the same call again."
            )
        g = gates[0]
        request = {k: g.get(k) for k in REQUEST_FIELDS}
        given = g.get("approved_by") or []
        approvers = g.get("approvers")
        deadline = g.get("deadline")
        due = "no deadline" if not isinstance(deadline, int | float) else _utc(deadline)
        text = (
            f"daybook: pending approval: {name} is gated (call {run_id!r}, gate {g['gate_id']}). "
            f"Approvals: {len(given)} of {g.get('approvals') or 1} distinct approvers"
            f"{' (' + ', '.join(map(str, given)) + ')' if given else ''}; may decide: "
            f"{', '.join(map(str, approvers)) if isinstance(approvers, list) else 'any approver'}; "
            f"deadline {due}{' (overdue)' if g.get('overdue') else ''}, then: {g.get('on_expiry')}"
            f"{'; facts: ' + json.dumps(g['facts'], sort_keys=True) if g.get('facts') is not None else ''}. "
            f"Approve it with `daybook approve {run_id} {g['gate_id']} --as NAME` (or `daybook deny`), "
            "then make the same call again."
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structuredContent={"daybook_pending_approval": request},
            isError=True,
        )

    async def drain(self, timeout: float) -> int:
        """Wait up to `timeout` seconds for the calls in flight (the client hung up): their
        outcomes are journaled, not abandoned. The number still running after it."""
        tasks = list(self._inflight.values())
        if not tasks:
            return 0
        print(
            f"daybook proxy: the client is gone with {len(tasks)} call(s) in flight; waiting up to "
            f"{timeout:g} s for their outcomes to be journaled",
            file=sys.stderr,
            flush=True,
        )
        _done, pending = await asyncio.wait(tasks, timeout=timeout)
        return len(pending)

    # -- inside the run -----------------------------------------------------------------------

    async def journaled(
        self, ctx: Context, name: str, arguments: dict[str, Any], live: dict[str, Any]
    ) -> dict[str, Any]:
        """The run's body: gate (bound to this exact call), then the effect under the run's key.
        `arguments` are as journaled (secrets as digests), `live` as the upstream gets them."""
        policy = self.policies[name]
        if policy.gate:
            # The gate is synchronous and the upstream is not: the facts are read here, now (in
            # this execution, so after any approval it replays), and the gate takes them when it
            # asks its precheck: before the first request, and after an approval, where facts
            # other than those the approvers saw ask again.
            facts = await self._facts(policy, live) if policy.precheck is not None else None
            verdict = ctx.gate(
                f"mcp:{name}",
                approvers=policy.approvers,
                timeout=policy.timeout,
                on_timeout=policy.on_timeout,
                escalate_to=[list(level) for level in policy.escalate_to] or None,
                approvals=policy.approvals,
                precheck=(lambda: facts) if policy.precheck is not None else None,
                about={"tool": name, "arguments": arguments, "key": ctx.run_id},
            )
            if not verdict.approved:
                return {
                    "gate": verdict.outcome,
                    "approver": verdict.approver,
                    "approvers": list(verdict.approvers),
                    "reason": verdict.reason,
                    **({"facts": verdict.facts} if verdict.outcome == "stale" else {}),
                }
        sender, asker = self._acts(name, policy)
        try:
            result = await daybook.journaled_call(
                ctx,
                f"mcp:{name}",
                ctx.run_id,
                sender,
                args={"arguments": live},
                idempotent=policy.idempotent,
                status=asker,
                effect_class=policy.tool_class,
                # The server answered with an error: it did not act. A lost connection is no
                # answer (the sender turns it into OutcomeUnknown).
                certain=(McpError,),
            )
        except EffectFailed as exc:
            return {"failed": str(exc)}
        return {"result": result}

    async def _facts(self, policy: ToolPolicy, live: dict[str, Any]) -> Any:
        """What the policy's precheck tool answers now for this call: its structured content,
        else its first text block (as JSON when it is JSON). An upstream that cannot answer
        gives facts saying so, which no approval given on real facts matches: the call is
        asked again, never released on facts nobody could read."""
        query = policy.precheck
        assert query is not None
        arguments = {k: v.reveal() if isinstance(v, Secret) else v for k, v in query.given(live).items()}
        try:
            up = await self.upstream.session()
            reply = await up.call_tool(query.tool, arguments)
        except (McpError, UpstreamDown, TimeoutError, *_LOST) as exc:
            return {"unavailable": f"{query.tool}: {type(exc).__name__}: {exc}"}
        if reply.isError:
            said = " ".join(c.text for c in reply.content if isinstance(c, types.TextContent))
            return {"unavailable": f"{query.tool} answered an error: {said}"}
        if reply.structuredContent is not None:
            return reply.structuredContent
        first = reply.content[0] if reply.content else None
        if not isinstance(first, types.TextContent):
            return None
        try:
            return json.loads(first.text)
        except ValueError:
            return first.text

    def _acts(self, name: str, policy: ToolPolicy) -> tuple[Callable[..., Awaitable[dict[str, Any]]], Any]:
        """The sender and status query of tool `name`, made once: the same functions each call,
        so `journaled_call` builds its tool once (`seam.py`)."""
        acts = self._made.get(name)
        if acts is None:
            # The async driver awaits what a status query returns (see journal/driver.py).
            asker = cast(Any, self._asker(policy)) if policy.status is not None else None
            acts = self._made[name] = (self._sender(name, policy), asker)
        return acts

    def _sender(self, name: str, policy: ToolPolicy) -> Callable[..., Awaitable[dict[str, Any]]]:
        upstream = self.upstream

        async def send(arguments: dict[str, Any]) -> dict[str, Any]:
            idempotency_key = daybook.idempotency_key()
            args = dict(arguments)
            if policy.key_argument is not None and not args.get(policy.key_argument):
                args[policy.key_argument] = idempotency_key
            try:
                up = await upstream.session()
            except (
                UpstreamDown
            ) as exc:  # never sent; unknown all the same (a re-send may follow one that was)
                raise OutcomeUnknown(f"{exc}; {name!r} was not sent this time") from exc
            try:
                result = await up.call_tool(name, args, meta={naming.KEY_META: idempotency_key})
            except McpError as exc:
                if exc.error.code not in _UNCERTAIN_CODES:
                    raise
                if exc.error.code == CONNECTION_CLOSED:
                    upstream.lost(up)
                raise OutcomeUnknown(f"no answer from the upstream for {name!r}: {exc}") from exc
            except TimeoutError as exc:
                raise OutcomeUnknown(f"no answer from the upstream for {name!r} in time") from exc
            except _LOST as exc:
                upstream.lost(up)
                raise OutcomeUnknown(f"the upstream connection broke during {name!r}: {exc!r}") from exc
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)

        return send

    def _asker(self, policy: ToolPolicy) -> Callable[[str, dict[str, Any]], Awaitable[ReconcileResult]]:
        query = policy.status
        assert query is not None
        upstream = self.upstream

        async def ask(key: str, _args: dict[str, Any]) -> ReconcileResult:
            try:
                up = await upstream.session()  # a restarted upstream, after a lost connection
                reply = await up.call_tool(query.tool, {query.argument: key})
            except (McpError, UpstreamDown, *_LOST):
                return StillUnknown()
            return status_answer(reply)

        return ask

    # -- the MCP server the client talks to ---------------------------------------------------

    def server(self) -> Server[Any, Any]:
        """A low-level MCP server that answers the client through this proxy."""
        server: Server[Any, Any] = Server("daybook-proxy")

        @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return list(self.tools.values())

        @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
        async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            meta = server.request_context.meta
            raw = meta.model_dump(by_alias=True) if meta is not None else None
            return await self.call(name, arguments, raw)

        pass_through(server, self.upstream)
        return server
