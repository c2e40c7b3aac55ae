"""Integrations with agent frameworks and protocols, each an optional extra through the
framework's own extension points: `mcp/` (the MCP proxy, `daybook-runtime[mcp]`) and `openai_agents.py`
(`daybook-runtime[openai-agents]`); next: LangGraph, Pydantic AI. Importing `daybook` never imports them.

May import: `daybook.book`, `daybook.context` and everything below them. Not the CLI or web; not
each other.
"""
