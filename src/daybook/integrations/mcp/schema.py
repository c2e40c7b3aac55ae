"""The tools policy file's schema: what `--tools-policy` may say, checked before the proxy serves.

A policy file is refused, with an error naming the field, when a key is unknown (a typo such as
`clas` is not silently ignored), a value has the wrong type (`"approvers": "alice"` is not five
approvers, `"gate": "false"` is not a boolean), an approver list is empty (it would mean
"anyone"), a timeout is not a number of seconds in range, `approvals` is not an int >= 1 or
`on_timeout` not an expiry policy (deny, escalate, wait, needs_attention). Tools the upstream does not have
are refused by `Policy.check` once the upstream's tools are known (and a precheck tool that is not
read-only, or a precheck on a tool that is not gated, by the proxy once it has every tool's class).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from daybook import ConfigError

CLASSES = ("read", "idempotent", "reversible", "irreversible")
MAX_TIMEOUT = 86_400 * 30


class StatusEntry(BaseModel):
    """`{"tool": NAME, "argument": "key"}`: the upstream tool that answers a call's status."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tool: str = Field(min_length=1)
    argument: str = Field(default="key", min_length=1)


class PrecheckEntry(BaseModel):
    """`{"tool": NAME, "arguments": [...]}`: the upstream read-only tool whose answer is the gate's
    facts, called with the gated call's arguments (only those named, when `arguments` is given)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tool: str = Field(min_length=1)
    arguments: list[str] | None = None


class ToolEntry(BaseModel):
    """One tool's entry (or the `default` entry): every field optional, each overriding what the
    tool's annotations say."""

    model_config = ConfigDict(extra="forbid", strict=True)
    effect_class: Literal["read", "idempotent", "reversible", "irreversible"] | None = Field(
        default=None, alias="class"
    )
    gate: bool | None = None
    approvers: list[str] | None = Field(default=None, min_length=1)
    timeout: float | None = None
    status: str | StatusEntry | None = None
    precheck: str | PrecheckEntry | None = None
    key_argument: str | None = Field(default=None, min_length=1)
    secrets: list[str] | None = None
    default_secrets: bool | None = None
    trust_hints: bool | None = None
    approvals: int | None = Field(default=None, ge=1, le=20)
    on_timeout: Literal["deny", "decline", "escalate", "wait", "needs_attention"] | None = None
    escalate_to: list[str] | list[list[str]] | None = Field(default=None, min_length=1)

    @field_validator("approvers")
    @classmethod
    def _named(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not name.strip() for name in value):
            raise ValueError("an approver name must not be empty")
        return value

    @field_validator("timeout")
    @classmethod
    def _seconds(cls, value: float | None) -> float | None:
        if value is not None and (math.isnan(value) or not 0 < value <= MAX_TIMEOUT):
            raise ValueError(f"timeout must be seconds between 0 and {MAX_TIMEOUT} (30 days)")
        return value


class PolicyFile(BaseModel):
    """The whole file: `tools` (per tool), `default` (every tool), `trust_hints` (read the
    upstream's annotations at all; false: every tool starts irreversible and gated)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    tools: dict[str, ToolEntry] = Field(default_factory=dict)
    default: ToolEntry = Field(default_factory=ToolEntry)
    trust_hints: bool = True


def overrides(entry: ToolEntry) -> dict[str, Any]:
    """The fields an entry sets, under the names the file uses (`class`, ...)."""
    raw = entry.model_dump(by_alias=True, exclude_unset=True)
    if isinstance(entry.status, StatusEntry):
        raw["status"] = entry.status.model_dump()
    if isinstance(entry.precheck, PrecheckEntry):
        raw["precheck"] = entry.precheck.model_dump(exclude_none=True)
    return raw


def parse(raw: Any, where: str) -> PolicyFile:
    """The validated policy file, or a ConfigError naming each wrong field."""
    try:
        return PolicyFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors()[:8])
        raise ConfigError(
            f"tools policy {where}: {problems}. Expected "
            '{"tools": {NAME: {"class": ..., "gate": ..., "approvers": [...], "timeout": ..., '
            '"status": ..., "precheck": ..., "key_argument": ..., "secrets": [...], "default_secrets": ..., '
            '"trust_hints": ..., "approvals": 2, "on_timeout": "deny|escalate|wait|needs_attention", '
            '"escalate_to": [...]}}, "default": {...}, "trust_hints": true}'
        ) from None


def _problem(error: Any) -> str:
    # A union (status: str | {...}) reports one error per branch; the field's path is what helps.
    loc = [str(p) for p in error.get("loc", ()) if p not in ("str", "StatusEntry", "PrecheckEntry")]
    field = ".".join(loc) or "(the file)"
    if error.get("type") == "extra_forbidden":
        return f"{field}: unknown key"
    return f"{field}: {error.get('msg')} (got {error.get('input')!r})"
