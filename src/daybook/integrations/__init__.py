"""Integrations with agent frameworks and protocols (coming: the MCP proxy, LangGraph, the OpenAI
Agents SDK, Pydantic AI), each an optional extra through the framework's own extension points.

May import: `daybook.book`, `daybook.context` and everything below them. Not the CLI or web.
"""
