"""What the proxy answers the client: a journaled run's outcome as an MCP tool result, a status
query's answer read as a reconcile result, tool errors, and the requests passed through as is
(resources and prompts, read-only, answered by whichever upstream session is live)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from daybook import Confirmed, NotFound, ReconcileResult, StillUnknown

from .upstream import Upstream


def pass_through(server: Server[Any, Any], upstream: Upstream) -> None:
    """Resources and prompts: read-only, answered by the upstream as is."""

    async def resources(req: types.ListResourcesRequest) -> types.ServerResult:
        up = await upstream.session()
        return types.ServerResult(await up.list_resources(params=req.params))

    async def read(req: types.ReadResourceRequest) -> types.ServerResult:
        up = await upstream.session()
        return types.ServerResult(await up.read_resource(req.params.uri))

    async def prompts(req: types.ListPromptsRequest) -> types.ServerResult:
        up = await upstream.session()
        return types.ServerResult(await up.list_prompts(params=req.params))

    async def prompt(req: types.GetPromptRequest) -> types.ServerResult:
        up = await upstream.session()
        return types.ServerResult(await up.get_prompt(req.params.name, req.params.arguments))

    handlers: dict[type, Any] = {
        types.ListResourcesRequest: resources,
        types.ReadResourceRequest: read,
        types.ListPromptsRequest: prompts,
        types.GetPromptRequest: prompt,
    }
    server.request_handlers.update(handlers)


def status_answer(answer: types.CallToolResult) -> ReconcileResult:
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
        # Answered as the upstream's own reply would have been: a string as its text, and
        # structured content wrapped as the SDKs wrap a non-object result ({"result": ...}), so
        # a client whose tool declares an output schema accepts the answer after a crash too.
        text = result if isinstance(result, str) else json.dumps(result, default=str)
        content = [{"type": "text", "text": text}]
        structured = result if isinstance(result, dict) else {"result": result}
        return Confirmed({"content": content, "isError": False, "structuredContent": structured})
    if state == "absent":
        return NotFound()
    return StillUnknown()


def answer(run_id: str, out: Any) -> types.CallToolResult:
    """The client's answer from the run's result."""
    if isinstance(out, dict) and "result" in out:
        return tool_result(out["result"])
    if isinstance(out, dict) and "gate" in out:
        who = f" by {out['approver']}" if out.get("approver") else ""
        why = f": {out['reason']}" if out.get("reason") else ""
        return error(f"daybook: call {run_id!r} was not approved ({out['gate']}{who}{why}); it was not sent")
    if isinstance(out, dict) and "failed" in out:
        return error(f"daybook: call {run_id!r} failed: {out['failed']}")
    return error(f"daybook: call {run_id!r} ended without a result: {out!r}")


def tool_result(result: Any) -> types.CallToolResult:
    """The upstream's result as journaled; or, when a person resolved the call by hand
    (`daybook resolve KEY --confirmed JSON`), that JSON as the tool's content."""
    if isinstance(result, dict) and "content" in result:
        with contextlib.suppress(ValueError):
            return types.CallToolResult.model_validate(result)
    content = [types.TextContent(type="text", text=json.dumps(result, default=str))]
    structured = result if isinstance(result, dict) else None
    return types.CallToolResult(content=list(content), structuredContent=structured, isError=False)


def error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)
