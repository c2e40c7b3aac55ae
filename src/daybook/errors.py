"""The exceptions daybook raises: one base class, each message saying what went wrong and what to do."""

from __future__ import annotations


class DaybookError(Exception):
    """Base class of every error daybook raises on purpose."""


class ConfigError(DaybookError):
    """A store URL, option or argument that daybook cannot use."""


class SchemaVersionError(DaybookError):
    """The store was written by a daybook whose schema this code does not know."""


class CorruptJournal(DaybookError):
    """A journal row that cannot be read back (bad JSON, unknown kind, missing field)."""


class RunNotFound(DaybookError):
    """No run with the given id exists in the store."""

    def __init__(self, run_id: str, url: str) -> None:
        super().__init__(f"no run {run_id!r} in {url}; list runs with `daybook runs --db {url}`")
        self.run_id = run_id


class RunConflict(DaybookError):
    """A run id was reused with a different workflow or different input."""


class RunLeased(DaybookError):
    """Another live process owns the run; only one process may execute a run at a time."""

    def __init__(self, run_id: str, owner: str, expires_in: float) -> None:
        super().__init__(
            f"run {run_id!r} is being executed by {owner} (lease expires in {expires_in:.1f}s); "
            "wait for it, or resume with wait=SECONDS (CLI: --wait) to take it over once the "
            "lease expires"
        )
        self.run_id = run_id
        self.owner = owner
        self.expires_in = expires_in


class StoreUnavailable(DaybookError):
    """A journal write failed (database down, disk full, locked too long); the run stopped."""


class LeaseLost(DaybookError):
    """This process lost the run's lease (it expired, or another process took the run over)."""


class RunFailed(DaybookError):
    """The workflow raised; the run is `failed` and its error is journaled."""

    def __init__(self, run_id: str, error: dict[str, str]) -> None:
        super().__init__(
            f"run {run_id!r} failed: {error.get('type', 'Error')}: {error.get('message', '')}; "
            f"inspect it with `daybook show {run_id}`"
        )
        self.run_id = run_id
        self.error = error


class NeedsAttention(DaybookError):
    """The run stopped at an effect whose outcome nobody can establish automatically."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class DedupWindowExpired(NeedsAttention):
    """A re-send was needed but the counterparty's dedup window for the key has passed."""


class NonDeterminismError(DaybookError):
    """On replay the workflow asked for a different step than the journal holds at that position."""


class NotSerializable(DaybookError):
    """A value daybook must journal is not JSON-serialisable."""


class DuplicateKey(DaybookError):
    """Two different effects were given the same idempotency key."""


class StepFailed(DaybookError):
    """A recorded step (decision or effect) raised; the same error is raised again on replay."""

    def __init__(self, message: str, error: dict[str, str]) -> None:
        super().__init__(message)
        self.error = error


class EffectFailed(StepFailed):
    """A tool call failed for certain (the counterparty refused, or retries ran out)."""


class Suspended(DaybookError):
    """The run is waiting (a durable timer or a signal) and holds no process while it waits."""

    def __init__(self, run_id: str, wake_at: float | None, waiting_for: str) -> None:
        import time

        when = (
            f"until {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(wake_at))}"
            if wake_at is not None
            else "until it is signalled"
        )
        super().__init__(
            f"run {run_id!r} is suspended {when}, waiting for {waiting_for}; a worker "
            f"(`daybook worker`) resumes it when due, or run `daybook resume {run_id}` then"
        )
        self.run_id = run_id
        self.wake_at = wake_at
        self.waiting_for = waiting_for


class NotAuthorized(DaybookError):
    """An approver's token did not match, or the approver may not decide this gate."""


class BudgetExceeded(DaybookError):
    """A spend was refused because it would pass a budget cap."""

    def __init__(self, message: str, cap_name: str, cap: float) -> None:
        super().__init__(message)
        self.cap_name = cap_name
        self.cap = cap


class RunStuck(NeedsAttention):
    """Compensation could not undo every effect; the run is `stuck` with the list of what remains."""


class UpdateTimeout(DaybookError):
    """A run did not answer an update in time (the request stays queued)."""


class ScopeViolation(DaybookError):
    """A tool call inside `ctx.transaction` touches a resource outside the transaction's declared
    scopes; it was refused before it ran (and the transaction aborted, without a retry)."""


class FrontierTimeout(DaybookError):
    """A transaction waited longer than its `wait=` for earlier transactions on overlapping
    scopes to finish; it was aborted before its body ran (`daybook frontiers` names the staller)."""


class ReleaseDeclined(DaybookError):
    """A transaction's held irreversible call was not approved at its gate (declined, timed out,
    or stale); the transaction was aborted before its commit, without a retry."""
