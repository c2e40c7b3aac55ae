"""The MCP proxy (`daybook-runtime[mcp]`, CLI `daybook proxy`): journals any MCP client's tool calls.

    from daybook.integrations.mcp import open_proxy, serve_stdio, load_policy

`naming.py` says how a call is named (its key), `policy.py` what the proxy may do with each tool,
`proxy.py` the journaled call, `serve.py` the connections, `upstream.py` the upstream's
restarts, `concealment.py` secret arguments, `schema.py` the policy file's schema.
"""

from .naming import KEY_META
from .policy import Policy, StatusQuery, ToolPolicy, load_policy, policy_from
from .proxy import McpProxy, ProxyNotRunning, mcp_call
from .serve import open_proxy, serve_http, serve_stdio, upstream_session

__all__ = [
    "KEY_META",
    "McpProxy",
    "Policy",
    "ProxyNotRunning",
    "StatusQuery",
    "ToolPolicy",
    "load_policy",
    "mcp_call",
    "open_proxy",
    "policy_from",
    "serve_http",
    "serve_stdio",
    "upstream_session",
]
