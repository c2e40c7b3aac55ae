"""The runs list's query (`daybook web`): its filters written as SQL, so a page of run headers
and the counts by status are read from the store, never every header per request.

Filters (each absent or empty: no such filter):
- `status`: the run's status, exactly;
- `workflow`: text the workflow's name contains;
- `text`: text the run id or the run's input (its JSON as stored) contains;
- `since`: created at or after this time (seconds since the epoch);
- `run`: a run id listed whatever the other filters say (the run that issued a key searched).

Newest first (created_at, then run id), as `list_runs`.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError

FILTERS = ("status", "workflow", "text", "since", "run")
ORDER = "ORDER BY created_at DESC, run_id"


def where(filters: dict[str, Any], position: str) -> tuple[str, dict[str, Any]]:
    """The WHERE clause (with its leading space, or empty) and its named parameters;
    `position` is the dialect's (haystack, needle) substring search (`Dialect.position`)."""
    unknown = set(filters) - set(FILTERS)
    if unknown:
        raise ConfigError(f"runs list filters: unknown {sorted(unknown)}; known: {', '.join(FILTERS)}")
    found: list[str] = []
    params: dict[str, Any] = {}
    if filters.get("status"):
        found.append("status = %(status)s")
        params["status"] = str(filters["status"])
    if filters.get("workflow"):
        found.append(f"{position}(workflow, %(workflow)s) > 0")
        params["workflow"] = str(filters["workflow"])
    if filters.get("text"):
        found.append(f"({position}(run_id, %(text)s) > 0 OR {position}(CAST(input AS TEXT), %(text)s) > 0)")
        params["text"] = str(filters["text"])
    if filters.get("since") is not None:
        found.append("created_at >= %(since)s")
        params["since"] = float(filters["since"])
    if not found:
        return "", params  # every run matches: `run` adds none
    clause = " AND ".join(found)
    if filters.get("run"):
        clause = f"({clause}) OR run_id = %(run)s"
        params["run"] = str(filters["run"])
    return f" WHERE {clause}", params
