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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, cast

import anyio
from mcp import ClientSession, types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError

from ...book import Daybook
from ...context import Context
from ...errors import (
    DaybookError,
    EffectFailed,
    NeedsAttention,
    RunConflict,
    RunLeased,
    Suspended,
)
from ...journal.tool import Confirmed, NotFound, OutcomeUnknown, ReconcileResult, StillUnknown, Tool
from ...runtime.workflow import workflow
from . import naming
from .policy import Policy, ToolPolicy

_PROXY: ContextVar[McpProxy] = ContextVar("daybook_mcp_proxy")
MAX_ARGUMENTS = 256 * 1024  # bytes of JSON; larger calls are refused before anything is journaled

# Upstream failures that say the request may have arrived but no answer came back.
_LOST = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,
    TimeoutError,
)


class ProxyNotRunning(DaybookError):
    """An MCP call run was resumed outside the proxy that owns its upstream connection."""


@workflow(name="daybook.mcp.call")
async def mcp_call(ctx: Context, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One MCP tool call: a gate when the tool is gated, then the call as an effect."""
    proxy = _PROXY.get(None)
    if proxy is None:
        raise ProxyNotRunning(
            f"run {ctx.run_id!r} is an MCP call: it continues when the client calls again through "
            "`daybook proxy` (which holds the upstream connection), not from `daybook resume`"
        )
    return await proxy.journaled(ctx, tool, arguments)


class McpProxy:
    """Forwards one client's MCP traffic to `upstream`, journaling tool calls in `book`."""

    def __init__(
        self, book: Daybook, upstream: ClientSession, tools: list[types.Tool], policy: Policy, session: str
    ) -> None:
        self.book = book
        self.upstream = upstream
        self.session = session
        self.tools = {t.name: t for t in tools}
        self.policies = {t.name: policy.for_tool(t.name, t.annotations, t.inputSchema) for t in tools}
        self._ordinals: dict[tuple[str, str], int] = {}
        self._inflight: dict[object, asyncio.Task[types.CallToolResult]] = {}
        self._effects: dict[str, Tool[Any]] = {}
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
                return _error(
                    f"no tool {name!r} at the upstream server (tools: {', '.join(sorted(self.tools))})"
                )
            if policy.read:
                return await self.upstream.call_tool(name, arguments)
            size = len(json.dumps(arguments, default=str))
            if size > MAX_ARGUMENTS:
                return _error(
                    f"the arguments of {name!r} are {size} bytes; the proxy takes at most {MAX_ARGUMENTS}"
                )
            return await self._journaled_call(name, arguments, meta, policy)
        except Exception as exc:  # a bad call gives an MCP error, never a dead proxy
            return _error(f"daybook proxy: {type(exc).__name__}: {exc}")

    async def _journaled_call(
        self, name: str, arguments: dict[str, Any], meta: Any, policy: ToolPolicy
    ) -> types.CallToolResult:
        given = naming.client_key(meta, arguments, policy.key_argument)
        digest = naming.digest(arguments)
        identity: object = naming.keyed_call(name, given) if given else (name, digest)
        running = self._inflight.get(identity)
        if running is not None:  # the same call again while it is in flight: join it
            return await asyncio.shield(running)
        if given:
            run_id = naming.keyed_call(name, given)
        else:
            n = self._ordinals.get((name, digest), 0)
            self._ordinals[(name, digest)] = n + 1
            run_id = naming.positional_call(self.session, name, digest, n)
        task = asyncio.ensure_future(self._run(run_id, name, arguments))
        self._inflight[identity] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(identity, None)
            else:
                task.add_done_callback(lambda _t: self._inflight.pop(identity, None))

    async def _run(self, run_id: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        token = _PROXY.set(self)
        try:
            out = await self.book.run_async(mcp_call, name, arguments, run_id=run_id)
        except Suspended:
            return _error(self._pending(run_id, name))
        except NeedsAttention as exc:
            return _error(
                f"daybook: call {run_id!r} ({name}) has an unknown outcome: {exc}. "
                "Once resolved, make the same call again to get its outcome."
            )
        except RunConflict as exc:
            return _error(f"daybook: key {run_id!r} was already used for another call: {exc}")
        except RunLeased as exc:
            return _error(
                f"daybook: call {run_id!r} is in flight in another process; try again later ({exc})"
            )
        finally:
            _PROXY.reset(token)
        return _answer(run_id, out)

    def _pending(self, run_id: str, name: str) -> str:
        gates = [g for g in self.book.approvals() if g.get("run_id") == run_id]
        gate = gates[0].get("gate_id") if gates else "GATE"
        return (
            f"daybook: pending approval: {name} is gated (call {run_id!r}). Approve it with "
            f"`daybook approve {run_id} {gate} --as NAME` (or `daybook deny`), then make "
            "the same call again."
        )

    # -- inside the run -----------------------------------------------------------------------

    async def journaled(self, ctx: Context, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The run's body: gate (bound to this exact call), then the effect under the run's key."""
        policy = self.policies[name]
        if policy.gate:
            verdict = ctx.gate(
                f"mcp:{name}",
                approvers=policy.approvers,
                timeout=policy.timeout,
                about={"tool": name, "arguments": arguments, "key": ctx.run_id},
            )
            if not verdict.approved:
                return {"gate": verdict.outcome, "approver": verdict.approver, "reason": verdict.reason}
        try:
            result = await ctx.effect(self._effect_tool(name), key=ctx.run_id, arguments=arguments)
        except EffectFailed as exc:
            return {"failed": str(exc)}
        return {"result": result}

    def _effect_tool(self, name: str) -> Tool[Any]:
        made = self._effects.get(name)
        if made is None:
            policy = self.policies[name]
            made = Tool(
                fn=self._sender(name, policy),
                name=f"mcp:{name}",
                idempotent=policy.idempotent,
                # The async driver awaits what a status query returns (see journal/driver.py).
                reconcile=cast(Any, self._asker(policy)) if policy.status is not None else None,
                irreversible=policy.effect_class == "irreversible",
                effect_class=policy.effect_class,
                certain=(McpError,),
            )
            self._effects[name] = made
        return made

    def _sender(self, name: str, policy: ToolPolicy) -> Callable[..., Awaitable[dict[str, Any]]]:
        upstream = self.upstream

        async def send(arguments: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
            args = dict(arguments)
            if policy.key_argument is not None and not args.get(policy.key_argument):
                args[policy.key_argument] = idempotency_key
            try:
                result = await upstream.call_tool(name, args, meta={naming.KEY_META: idempotency_key})
            except _LOST as exc:
                raise OutcomeUnknown(f"the upstream connection broke during {name!r}: {exc!r}") from exc
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)

        return send

    def _asker(self, policy: ToolPolicy) -> Callable[[str, dict[str, Any]], Awaitable[ReconcileResult]]:
        query = policy.status
        assert query is not None
        upstream = self.upstream

        async def ask(key: str, _args: dict[str, Any]) -> ReconcileResult:
            answer = await upstream.call_tool(query.tool, {query.argument: key})
            return _status_answer(answer)

        return ask

    # -- the MCP server the client talks to ---------------------------------------------------

    def server(self) -> Server[Any, Any]:
        """A low-level MCP server that answers the client through this proxy."""
        server: Server[Any, Any] = Server("daybook-proxy")
        up = self.upstream

        @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
        async def list_tools() -> list[types.Tool]:
            return list(self.tools.values())

        @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
        async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            meta = server.request_context.meta
            raw = meta.model_dump(by_alias=True) if meta is not None else None
            return await self.call(name, arguments, raw)

        _pass_through(server, up)
        return server


def _pass_through(server: Server[Any, Any], up: ClientSession) -> None:
    """Resources and prompts: read-only, answered by the upstream as is."""

    async def resources(req: types.ListResourcesRequest) -> types.ServerResult:
        return types.ServerResult(await up.list_resources(params=req.params))

    async def read(req: types.ReadResourceRequest) -> types.ServerResult:
        return types.ServerResult(await up.read_resource(req.params.uri))

    async def prompts(req: types.ListPromptsRequest) -> types.ServerResult:
        return types.ServerResult(await up.list_prompts(params=req.params))

    async def prompt(req: types.GetPromptRequest) -> types.ServerResult:
        return types.ServerResult(await up.get_prompt(req.params.name, req.params.arguments))

    handlers: dict[type, Any] = {
        types.ListResourcesRequest: resources,
        types.ReadResourceRequest: read,
        types.ListPromptsRequest: prompts,
        types.GetPromptRequest: prompt,
    }
    server.request_handlers.update(handlers)


def _status_answer(answer: types.CallToolResult) -> ReconcileResult:
    """Read a status query's answer: confirmed (with the result), absent, or pending."""
    body: Any = answer.structuredContent
    if body is None and answer.content and isinstance(answer.content[0], types.TextContent):
        try:
            body = json.loads(answer.content[0].text)
        except ValueError:
            body = None
    state = body.get("status") if isinstance(body, dict) and not answer.isError else None
    if state == "confirmed":
        result = body.get("result")
        text = json.dumps(result, default=str)
        content = [{"type": "text", "text": text}]
        structured = {"structuredContent": result} if isinstance(result, dict) else {}
        return Confirmed({"content": content, "isError": False, **structured})
    if state == "absent":
        return NotFound()
    return StillUnknown()


def _answer(run_id: str, out: Any) -> types.CallToolResult:
    """The client's answer from the run's result."""
    if isinstance(out, dict) and "result" in out:
        return _tool_result(out["result"])
    if isinstance(out, dict) and "gate" in out:
        who = f" by {out['approver']}" if out.get("approver") else ""
        why = f": {out['reason']}" if out.get("reason") else ""
        return _error(f"daybook: call {run_id!r} was not approved ({out['gate']}{who}{why}); it was not sent")
    if isinstance(out, dict) and "failed" in out:
        return _error(f"daybook: call {run_id!r} failed: {out['failed']}")
    return _error(f"daybook: call {run_id!r} ended without a result: {out!r}")


def _tool_result(result: Any) -> types.CallToolResult:
    """The upstream's result as journaled; or, when a person resolved the call by hand
    (`daybook resolve KEY --confirmed JSON`), that JSON as the tool's content."""
    if isinstance(result, dict) and "content" in result:
        with contextlib.suppress(ValueError):
            return types.CallToolResult.model_validate(result)
    content = [types.TextContent(type="text", text=json.dumps(result, default=str))]
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(content=list(content), structuredContent=structured, isError=False)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
