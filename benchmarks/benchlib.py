"""Small helpers shared by the benchmark scripts; standard library only, so that a process that
imports nothing else (a launcher whose children's peak RSS is read through `wait4`) stays small.

A measuring child process reports to its parent with one line on stdout: `@@bench <json>`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

MARK = "@@bench "
HERE = Path(__file__).resolve().parent


class ChildFailed(RuntimeError):
    """A measuring child exited badly or printed no result line; the message carries its stderr."""


def emit(result: Mapping[str, Any]) -> None:
    """Report `result` to the parent (the last `@@bench` line on stdout wins)."""
    print(MARK + json.dumps(result, default=str), flush=True)


def parse_result(stdout: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = None
    for line in stdout.splitlines():
        if line.startswith(MARK):
            found = json.loads(line[len(MARK) :])
    return found


def tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_child(
    cmd: list[str], *, env: Mapping[str, str] | None = None, timeout: float = 3600
) -> dict[str, Any]:
    """Run a child that reports with `emit`, and return its result."""
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=None if env is None else dict(env), timeout=timeout
    )
    result = parse_result(proc.stdout)
    if proc.returncode != 0 or result is None:
        raise ChildFailed(
            f"{' '.join(cmd[:4])}... exited {proc.returncode}"
            f"{'' if result else ' without a result line'}: {tail(proc.stderr) or tail(proc.stdout)}"
        )
    return result


def peak_rss_kib() -> int | None:
    """VmHWM of this process: its own peak resident set (ru_maxrss would carry the parent's)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


def async_commit_env() -> dict[str, str]:
    """Environment for a libpq client whose commits need not wait for the WAL flush."""
    return {**os.environ, "PGOPTIONS": "-c synchronous_commit=off"}


def fs_type(path: Path) -> str:
    best, kind = "", "?"
    with contextlib.suppress(OSError), open("/proc/mounts") as fh:
        for line in fh:
            parts = line.split()
            mount = parts[1]
            inside = str(path).startswith(mount.rstrip("/") + "/") or str(path) == mount
            if inside and len(mount) >= len(best):
                best, kind = mount, parts[2]
    return kind


@contextlib.contextmanager
def scratch_dir(parent: str | None) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="daybook-bench-", dir=parent)).resolve()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
