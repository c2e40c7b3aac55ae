"""Integrations with agent frameworks and protocols, each an optional extra through the
framework's own extension points: `mcp/` (the MCP proxy, `daybook-runtime[mcp]`),
`openai_agents.py` (`[openai-agents]`), `langgraph.py` (`[langgraph]`) and `pydantic_ai.py`
(`[pydantic-ai]`). Importing `daybook` never imports them.

Each keeps only its framework's glue: the run is `daybook.current()`, a framework's tool call is
journaled by `daybook.journaled_call(...)` (the tool built by `daybook.tool`, so its checks and
effect-class inference apply), and inside it the key is `daybook.idempotency_key()`.

May import: public `daybook` names only (`from daybook import ...`; an import-linter contract in
pyproject.toml), never daybook's rooms. Not each other.
"""
