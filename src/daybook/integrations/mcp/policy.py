"""What the proxy may do with each upstream tool: its effect class, whether it is gated, who may
approve it, how to ask the server what happened to a call (a status query), and which of its
arguments are secret.

Read from the tool's MCP annotations, the conservative way round (unless the policy says
`"trust_hints": false`: then every tool starts irreversible and gated), then overridden per tool
by a policy file (JSON, or TOML when the name ends in `.toml`; its schema is `schema.py`):

    readOnlyHint                       -> read: passed through, not journaled as an effect
    destructiveHint (or unannotated)   -> irreversible: gated until `daybook approve`
    idempotentHint, not destructive    -> idempotent: re-sent under the same key when unknown
    destructiveHint false, otherwise   -> reversible: sent once; unknown stays unknown

    {"tools": {"send": {"class": "reversible", "gate": false, "approvers": ["alice"],
                        "timeout": 3600, "status": {"tool": "sent", "argument": "key"},
                        "secrets": ["pin"], "approvals": 2, "on_timeout": "escalate",
                        "escalate_to": ["carol"], "precheck": {"tool": "quote", "arguments": ["to"]}}},
     "default": {"gate": true}, "trust_hints": true}

A status query is an upstream tool called with the call's key as `argument`; it answers
`{"status": "confirmed", "result": ...}`, `{"status": "absent"}` or `{"status": "pending"}`
(as structured content, or as the JSON text of its first content block).

A precheck is an upstream read-only tool whose answer is a gated call's facts (`ctx.gate`'s
`precheck=`): read before the approval request (shown with it, bound to the approval) and again
after the approval, before the call is sent; changed facts ask again.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from daybook import ConfigError

from .concealment import SecretArguments
from .schema import CLASSES, ToolEntry, overrides, parse

# Input-schema properties that mean "the server takes an idempotency key": the proxy fills the
# first one it finds with the call's key when the client left it empty.
KEY_ARGUMENTS = ("idempotency_key", "idempotencyKey", "request_id")


@dataclass(frozen=True)
class StatusQuery:
    """An upstream tool that answers what happened to the call with key `argument`."""

    tool: str
    argument: str = "key"


@dataclass(frozen=True)
class Precheck:
    """An upstream read-only tool whose answer is a gated call's facts: called with the call's
    arguments, or only those named in `arguments`."""

    tool: str
    arguments: tuple[str, ...] | None = None

    def given(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What the precheck tool is called with, from the gated call's arguments."""
        if self.arguments is None:
            return dict(arguments)
        return {k: arguments[k] for k in self.arguments if k in arguments}


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
    secrets: tuple[str, ...] = ()
    default_secrets: bool = True
    # The gate's terms (`ctx.gate`): distinct approvers needed, and what happens at the timeout.
    approvals: int = 1
    on_timeout: str = "deny"
    escalate_to: tuple[tuple[str, ...], ...] = ()
    precheck: Precheck | None = None

    @property
    def read(self) -> bool:
        return self.effect_class == "read"

    @property
    def idempotent(self) -> bool:
        return self.effect_class == "idempotent"

    @property
    def tool_class(self) -> str | None:
        """The policy's class in daybook's words (`daybook.tool(effect_class=)`, whose one mapping
        decides what that class does): MCP's `reversible` names a non-destructive tool with no
        inverse, daybook's `manual`; `read` is passed through, never journaled."""
        return {"read": None, "reversible": "manual"}.get(self.effect_class, self.effect_class)

    @property
    def secret(self) -> SecretArguments:
        """Which of its arguments are secret (journaled as digests, never in clear)."""
        return SecretArguments(self.secrets, self.default_secrets)


@dataclass(frozen=True)
class Policy:
    """Per-tool overrides (`tools`) and overrides for every tool (`default`), from a policy file;
    `trust_hints=False` reads no tool's annotations (a tool's own entry may say otherwise)."""

    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    default: dict[str, Any] = field(default_factory=dict)
    trust_hints: bool = True

    def __post_init__(self) -> None:
        # Built in Python as well as from a file: the same schema either way.
        parse({"tools": self.tools, "default": self.default, "trust_hints": self.trust_hints}, "(Policy)")

    def for_tool(self, name: str, annotations: Any, input_schema: Any) -> ToolPolicy:
        """The tool's profile: from its annotations, then the file's default, then its own entry."""
        own = self.tools.get(name, {})
        trust = own.get("trust_hints", self.default.get("trust_hints", self.trust_hints))
        base = from_annotations(name, annotations if trust else None, input_schema)
        for override in (self.default, own):
            base = _apply(base, override, input_schema)
        return base

    def check(self, tools: Iterable[str]) -> None:
        """Refuse entries for tools the upstream does not have (a typo would be ignored), and
        status queries naming one."""
        have = sorted(set(tools))
        listed = ", ".join(have) or "none"
        for name in self.tools:
            if name not in have:
                raise ConfigError(
                    f"tools policy: the upstream server has no tool {name!r} (its tools: {listed}); "
                    "fix the name (names are case-sensitive) or remove the entry"
                )
        for where, entry in [("default", self.default), *self.tools.items()]:
            status = _status(entry.get("status"), where)
            if status is not None and status.tool not in have:
                raise ConfigError(
                    f"tools policy {where!r}: status tool {status.tool!r} is not a tool of the "
                    f"upstream server (its tools: {listed})"
                )
            precheck = _precheck(entry.get("precheck"), where)
            if precheck is not None and precheck.tool not in have:
                raise ConfigError(
                    f"tools policy {where!r}: precheck tool {precheck.tool!r} is not a tool of the "
                    f"upstream server (its tools: {listed})"
                )

    @staticmethod
    def check_prechecks(policies: dict[str, ToolPolicy]) -> None:
        """Refuse a precheck whose tool is not read-only (the proxy calls it unjournaled, and
        again after every approval) or that sits on a tool that is not gated (nothing would
        read its facts)."""
        for name, policy in sorted(policies.items()):
            query = policy.precheck
            if query is None:
                continue
            if not policy.gate:
                raise ConfigError(
                    f"tools policy for tool {name!r}: a precheck needs a gated tool (its facts go "
                    'with the approval request); set "gate": true or remove the precheck'
                )
            used = policies.get(query.tool)
            if used is None or not used.read:
                raise ConfigError(
                    f"tools policy for tool {name!r}: precheck tool {query.tool!r} is not read-only "
                    "(the proxy calls it before the approval request and again after the approval, "
                    'unjournaled); give a read-only tool, or make it one with "class": "read" if it is'
                )


def from_annotations(name: str, annotations: Any, input_schema: Any) -> ToolPolicy:
    """The conservative reading of MCP tool annotations (see the module docstring)."""

    def hint(attr: str) -> Any:
        return getattr(annotations, attr, None) if annotations is not None else None

    key_arg = next((k for k in KEY_ARGUMENTS if k in _properties(input_schema)), None)
    if hint("readOnlyHint") is True:
        return ToolPolicy(name, "read", gate=False, key_argument=key_arg)
    if hint("destructiveHint") is not False:  # unannotated, or destructive: the spec's default
        return ToolPolicy(name, "irreversible", gate=True, key_argument=key_arg)
    cls = "idempotent" if hint("idempotentHint") is True else "reversible"
    return ToolPolicy(name, cls, gate=False, key_argument=key_arg)


def _properties(input_schema: Any) -> dict[str, Any]:
    props = input_schema.get("properties", {}) if isinstance(input_schema, dict) else {}
    return props if isinstance(props, dict) else {}


def _apply(base: ToolPolicy, raw: dict[str, Any], input_schema: Any) -> ToolPolicy:
    where = f"policy for tool {base.name!r}"
    cls = raw.get("class", base.effect_class)
    if cls not in CLASSES:
        raise ConfigError(f"{where}: class {cls!r} is not one of {', '.join(CLASSES)}")
    gate = raw.get("gate", base.gate if "class" not in raw else cls == "irreversible")
    approvers = raw.get("approvers")
    key_argument = raw.get("key_argument", base.key_argument)
    if "key_argument" in raw and key_argument not in _properties(input_schema):
        props = ", ".join(sorted(_properties(input_schema))) or "none"
        raise ConfigError(
            f"{where}: key_argument {key_argument!r} is not an argument of the tool's input "
            f"schema (its arguments: {props})"
        )
    on_timeout = str(raw.get("on_timeout", base.on_timeout))
    escalate_to = _levels(raw["escalate_to"]) if "escalate_to" in raw else base.escalate_to
    if (on_timeout == "escalate") != bool(escalate_to):
        raise ConfigError(
            f"{where}: on_timeout 'escalate' and escalate_to go together (escalate_to: the "
            "approvers the gate goes to when its time passes; one list, or a list per level)"
        )
    return replace(
        base,
        approvals=int(raw.get("approvals", base.approvals)),
        on_timeout=on_timeout,
        escalate_to=escalate_to,
        effect_class=cls,
        gate=bool(gate),
        approvers=tuple(approvers) if approvers is not None else base.approvers,
        timeout=float(raw.get("timeout", base.timeout)),
        status=_status(raw["status"], where) if "status" in raw else base.status,
        precheck=_precheck(raw["precheck"], where) if "precheck" in raw else base.precheck,
        key_argument=key_argument,
        secrets=base.secrets + tuple(raw.get("secrets", ())),
        default_secrets=bool(raw.get("default_secrets", base.default_secrets)),
    )


def _levels(raw: Any) -> tuple[tuple[str, ...], ...]:
    """`escalate_to` as levels: one list of names is one level."""
    if all(isinstance(n, str) for n in raw):
        return (tuple(raw),)
    return tuple(tuple(level) for level in raw)


def _status(raw: Any, where: str) -> StatusQuery | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return StatusQuery(raw)
    if isinstance(raw, dict) and isinstance(raw.get("tool"), str):
        return StatusQuery(raw["tool"], str(raw.get("argument", "key")))
    raise ConfigError(f'{where}: status must be a tool name or {{"tool": NAME, "argument": "key"}}')


def _precheck(raw: Any, where: str) -> Precheck | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return Precheck(raw)
    if isinstance(raw, dict) and isinstance(raw.get("tool"), str):
        names = raw.get("arguments")
        return Precheck(raw["tool"], tuple(str(n) for n in names) if names is not None else None)
    raise ConfigError(f'{where}: precheck must be a tool name or {{"tool": NAME, "arguments": [...]}}')


def policy_from(raw: Any, where: str = "(given)") -> Policy:
    """A Policy from a policy file's parsed content, validated (see `schema.py`)."""
    parsed = parse(raw, where)
    tools = {name: overrides(entry) for name, entry in parsed.tools.items()}
    return Policy(tools=tools, default=overrides(parsed.default), trust_hints=parsed.trust_hints)


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
    return policy_from(raw, repr(str(p)))


__all__ = [
    "KEY_ARGUMENTS",
    "Policy",
    "Precheck",
    "StatusQuery",
    "ToolEntry",
    "ToolPolicy",
    "load_policy",
    "policy_from",
]
