"""What the proxy may do with each upstream tool: its effect class, whether it is gated, who may
approve it, and how to ask the server what happened to a call (a status query).

Read from the tool's MCP annotations, the conservative way round, then overridden per tool by a
policy file (JSON, or TOML when the name ends in `.toml`):

    readOnlyHint                       -> read: passed through, not journaled as an effect
    destructiveHint (or unannotated)   -> irreversible: gated until `daybook approve`
    idempotentHint, not destructive    -> idempotent: re-sent under the same key when unknown
    destructiveHint false, otherwise   -> reversible: sent once; unknown stays unknown

    {"tools": {"send": {"class": "reversible", "gate": false, "approvers": ["alice"],
                        "timeout": 3600, "status": {"tool": "sent", "argument": "key"}}},
     "default": {"gate": true}}

A status query is an upstream tool called with the call's key as `argument`; it answers
`{"status": "confirmed", "result": ...}`, `{"status": "absent"}` or `{"status": "pending"}`
(as structured content, or as the JSON text of its first content block).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...errors import ConfigError

CLASSES = ("read", "idempotent", "reversible", "irreversible")
# Input-schema properties that mean "the server takes an idempotency key": the proxy fills the
# first one it finds with the call's key when the client left it empty.
KEY_ARGUMENTS = ("idempotency_key", "idempotencyKey", "request_id")


@dataclass(frozen=True)
class StatusQuery:
    """An upstream tool that answers what happened to the call with key `argument`."""

    tool: str
    argument: str = "key"


@dataclass(frozen=True)
class ToolPolicy:
    """The proxy's profile of one upstream tool."""

    name: str
    effect_class: str = "irreversible"
    gate: bool = True
    approvers: tuple[str, ...] | None = None
    timeout: float = 8 * 3600
    status: StatusQuery | None = None
    key_argument: str | None = None

    @property
    def read(self) -> bool:
        return self.effect_class == "read"

    @property
    def idempotent(self) -> bool:
        return self.effect_class == "idempotent"


@dataclass(frozen=True)
class Policy:
    """Per-tool overrides (`tools`) and overrides for every tool (`default`), from a policy file."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    default: dict[str, Any] = field(default_factory=dict)

    def for_tool(self, name: str, annotations: Any, input_schema: Any) -> ToolPolicy:
        """The tool's profile: from its annotations, then the file's default, then its own entry."""
        base = from_annotations(name, annotations, input_schema)
        for override in (self.default, self.tools.get(name, {})):
            base = _apply(base, override)
        return base


def from_annotations(name: str, annotations: Any, input_schema: Any) -> ToolPolicy:
    """The conservative reading of MCP tool annotations (see the module docstring)."""

    def hint(attr: str) -> Any:
        return getattr(annotations, attr, None) if annotations is not None else None

    props = input_schema.get("properties", {}) if isinstance(input_schema, dict) else {}
    key_arg = next((k for k in KEY_ARGUMENTS if k in props), None)
    if hint("readOnlyHint") is True:
        return ToolPolicy(name, "read", gate=False, key_argument=key_arg)
    if hint("destructiveHint") is not False:  # unannotated, or destructive: the spec's default
        return ToolPolicy(name, "irreversible", gate=True, key_argument=key_arg)
    cls = "idempotent" if hint("idempotentHint") is True else "reversible"
    return ToolPolicy(name, cls, gate=False, key_argument=key_arg)


def _apply(base: ToolPolicy, raw: dict[str, Any]) -> ToolPolicy:
    where = f"policy for tool {base.name!r}"
    cls = raw.get("class", base.effect_class)
    if cls not in CLASSES:
        raise ConfigError(f"{where}: class {cls!r} is not one of {', '.join(CLASSES)}")
    gate = raw.get("gate", base.gate if "class" not in raw else cls == "irreversible")
    approvers = raw.get("approvers", base.approvers)
    timeout = raw.get("timeout", base.timeout)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= 86_400 * 30:
        raise ConfigError(f"{where}: timeout must be seconds between 0 and 30 days, not {timeout!r}")
    status = base.status
    if "status" in raw:
        status = _status(raw["status"], where)
    return replace(
        base,
        effect_class=cls,
        gate=bool(gate),
        approvers=tuple(str(a) for a in approvers) if approvers else None,
        timeout=float(timeout),
        status=status,
        key_argument=raw.get("key_argument", base.key_argument),
    )


def _status(raw: Any, where: str) -> StatusQuery | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return StatusQuery(raw)
    if isinstance(raw, dict) and isinstance(raw.get("tool"), str):
        return StatusQuery(raw["tool"], str(raw.get("argument", "key")))
    raise ConfigError(f'{where}: status must be a tool name or {{"tool": NAME, "argument": "key"}}')


def load_policy(path: str | Path | None) -> Policy:
    """Read a policy file (JSON, or TOML by extension); None gives the annotations alone."""
    if path is None:
        return Policy()
    p = Path(path)
    try:
        text = p.read_text()
        raw = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the tools policy {str(p)!r}: {exc}; give a JSON or TOML file"
        ) from None
    if not isinstance(raw, dict) or not isinstance(raw.get("tools", {}), dict):
        raise ConfigError(
            f'tools policy {str(p)!r}: expected {{"tools": {{NAME: {{...}}}}, "default": {{...}}}}'
        )
    tools = raw.get("tools", {})
    for name, entry in tools.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"tools policy {str(p)!r}: the entry for {name!r} must be a table/object")
    return Policy(tools=dict(tools), default=dict(raw.get("default", {})))
