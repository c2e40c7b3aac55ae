"""The exceptions daybook raises: one base class, each message saying what went wrong and what to do."""

from __future__ import annotations


class DaybookError(Exception):
    """Base class of every error daybook raises on purpose.

    Every subclass can be built from one argument: a message (`EffectFailed("card declined")`),
    or, for the errors about one run (`RunNotFound`, `RunLeased`, `RunFailed`, `RunParked`,
    `RunPaused`, `RunCancelled`, `RunExpired`, `RunErased`, `RecoveryInProgress`, `Suspended`),
    the run id; the other arguments have defaults."""

    # Set by `book.recover` on the error of the re-run it started (parked, failed again,
    # waiting): what the recovery did before it (a `daybook.Recovery`). None otherwise.
    recovery: object = None


class ConfigError(DaybookError):
    """A store URL, option or argument that daybook cannot use."""


class SinkConfigError(ConfigError):
    """A notification sink that cannot be used (a webhook URL that is not http(s), a missing or
    short HMAC secret): configure it as the message says."""


class NotInRun(ConfigError):
    """`daybook.current()` outside a workflow body, or `daybook.idempotency_key()` outside a
    tool's call that daybook is executing."""


class SchemaVersionError(DaybookError):
    """The store was written by a daybook whose schema this code does not know."""


class CorruptJournal(DaybookError):
    """A journal row that cannot be read back (bad JSON, unknown kind, missing field)."""


class RunNotFound(DaybookError):
    """No run with the given id exists in the store."""

    def __init__(self, run_id: str, url: str = "") -> None:
        where, db = (f" in {redact_url(url)}", f" --db {redact_url(url)}") if url else ("", "")
        super().__init__(f"no run {run_id!r}{where}; list runs with `daybook runs{db}`")
        self.run_id = run_id


class RunConflict(DaybookError):
    """A run id was reused with a different workflow or different input."""


class RunLeased(DaybookError):
    """Another live process owns the run; only one process may execute a run at a time."""

    def __init__(self, run_id: str, owner: str = "another process", expires_in: float = 0.0) -> None:
        super().__init__(
            f"run {run_id!r} is being executed by {owner} (lease expires in {expires_in:.1f}s); "
            "wait for it, or resume with wait=SECONDS (CLI: --wait) to take it over once the "
            "lease expires"
        )
        self.run_id = run_id
        self.owner = owner
        self.expires_in = expires_in


class RecoveryInProgress(RunLeased):
    """Another live process is recovering the run (`daybook recover`): one recovery at a time."""

    def __init__(self, run_id: str, owner: str = "another process", expires_in: float = 0.0) -> None:
        parts = owner.split(":")
        who = f"process {parts[1]} on {parts[0]}" if len(parts) == 6 else "another process"
        DaybookError.__init__(
            self,
            f"run {run_id!r} is being recovered by {who} (lease owner {owner}, or it holds the run "
            f"for another operator action; the lease expires in {expires_in:.1f}s): one recovery "
            "at a time. "
            f"Wait for it to end (`daybook show {run_id}`); if that process died, `daybook recover "
            f"{run_id}` continues its recovery (at once on the same machine, else once the lease "
            "expires)",
        )
        self.run_id = run_id
        self.owner = owner
        self.expires_in = expires_in


class StoreUnavailable(DaybookError):
    """A journal write failed (database down, disk full, locked too long); the run stopped."""


class LeaseLost(DaybookError):
    """This process lost the run's lease (it expired, or another process took the run over)."""


class RunFailed(DaybookError):
    """The workflow raised and the run did not finish; its error is journaled. The run is
    `failed` (terminal: `WorkflowFailed`, a certain `StepFailed`, a budget refusal, or an
    exception the workflow lists in `fail_on`) or, for any other exception, parked
    (`RunParked`): `daybook retry` continues it after a fix."""

    def __init__(self, run_id: str, error: dict[str, str] | None = None) -> None:
        error = error if error is not None else {}
        what = f": {error.get('type', 'Error')}: {error.get('message', '')}" if error else ""
        super().__init__(f"run {run_id!r} failed{what}; inspect it with `daybook show {run_id}`")
        self.run_id = run_id
        self.error = error


class NeedsAttention(DaybookError):
    """The run stopped at an effect whose outcome nobody can establish automatically."""

    def __init__(self, run_id: str, message: str | None = None) -> None:
        # One argument is the message (raised by hand, outside any run).
        run_id, message = (run_id, message) if message is not None else ("", run_id)
        super().__init__(message)
        self.run_id = run_id


class RunParked(NeedsAttention, RunFailed):
    """The workflow raised an exception it did not declare (a bug, most likely): the run is parked
    as `needs_attention` with its journal and traceback, not failed for good. Fix the code, then
    `daybook retry RUN` (or `book.retry`) continues it: confirmed effects are not repeated.

    It is a `RunFailed` too, so code that catches that still sees a run that did not finish."""

    def __init__(self, run_id: str, error: dict[str, str] | None = None) -> None:
        error = error if error is not None else {}
        DaybookError.__init__(
            self,
            f"run {run_id!r} is parked: the workflow raised {error.get('type', 'Error')}: "
            f"{error.get('message', '')}. Its journal is kept: fix the code, then "
            f"`daybook retry {run_id}` continues it without repeating confirmed effects "
            f"(`daybook show {run_id}` prints the traceback)",
        )
        self.run_id = run_id
        self.error = error


class WorkflowFailed(DaybookError):
    """Raise it from workflow code to end the run as `failed` on purpose (terminal: a retry is
    still possible by hand, but nothing retries it by itself)."""


class RunPaused(DaybookError):
    """A person paused the run (`daybook pause`); it holds no process until resumed."""

    def __init__(self, run_id: str, by: str = "") -> None:
        who = f" by {by}" if by else ""
        super().__init__(
            f"run {run_id!r} is paused{who}; `daybook resume {run_id}` (or book.resume) goes on "
            "from its last committed step, from any process, at any time"
        )
        self.run_id = run_id


class RunExpired(DaybookError):
    """The run (paused, or finished with its environment kept) outlived the retention window and
    was expired (by `gc` or a worker); it never runs again."""

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} expired: it stayed paused (or its environment stayed kept after it "
            "ended) past the retention window, and `daybook gc` or a worker ended it. Its journal "
            f"is kept (`daybook show {run_id}`); start a new run, or fork "
            f"this one (`daybook fork {run_id} --at STEP`)"
        )
        self.run_id = run_id


class RunErased(DaybookError):
    """What a run needs was erased by retention (`daybook gc`): only its audit spine is left, and
    an erasure mark is never handed to code as data."""

    def __init__(self, run_id: str, gc_id: object = "a gc pass", what: str = "its payloads") -> None:
        super().__init__(
            f"run {run_id!r}: {what} were erased by `daybook gc` ({gc_id}), so they cannot be "
            f"read or replayed; `daybook show {run_id}` shows the audit spine that is left. Start "
            "a new run (with a new run id)"
        )
        self.run_id = run_id
        self.gc_id = gc_id


class RunCancelled(DaybookError):
    """The run was cancelled (`daybook cancel`); it never runs again."""

    def __init__(self, run_id: str, by: str = "") -> None:
        who = f" by {by}" if by else ""
        super().__init__(
            f"run {run_id!r} was cancelled{who}; it does not run again (`daybook show {run_id}` "
            "shows what it did and what was unwound)"
        )
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
    """A recorded step (decision or effect) raised; the same error is raised again on replay.

    `error` is the journaled error (`type`, `message`); raised by hand with a message alone
    (`raise daybook.EffectFailed("card declined")` in a tool: a certain failure, not re-sent),
    it is this exception's own. For a decision, `step` names it, and `bug` says its function
    raised an exception it did not mean (not a `WorkflowFailed`, `StepFailed` or
    `BudgetExceeded`): left uncaught, such a failure parks the run; either way `retry` runs that
    step again."""

    def __init__(
        self,
        message: str = "",
        error: dict[str, str] | None = None,
        step: int | None = None,
        bug: bool = False,
    ) -> None:
        super().__init__(message)
        self.error = error if error is not None else {"type": type(self).__name__, "message": str(message)}
        self.step = step
        self.bug = bug


class EffectFailed(StepFailed):
    """A tool call failed for certain (the counterparty refused, or retries ran out)."""


class TimedOut(StepFailed, TimeoutError):
    """A deadline passed: a run's execution timeout (`@workflow(timeout=)`, the run fails), a
    decision's (`ctx.decide(..., timeout=)`, the step fails once its retries are spent) or an
    effect's start-to-close timeout (`Retry(timeout=)`: the outcome is journaled `unknown` and
    resolved like any other, by asking the counterparty)."""


class StepRetracted(EffectFailed):
    """A retraction (`book.steer(run, "retract", ..., target=...)`) cancelled this tool call
    while it ran, and the call said nothing was applied. Nothing is retried; the step stays
    `retracted`. Catch it in a workflow that should go on without the act (the agent loop does)."""


class EnvironmentLost(WorkflowFailed):
    """The run's declared environment (`ctx.environment(..., alive=...)`) did not answer alive
    within its startup grace: it is gone, or never came up. The run fails with its state kept;
    bring the environment back and `daybook retry RUN`."""


class Suspended(DaybookError):
    """The run is waiting (a durable timer or a signal) and holds no process while it waits."""

    def __init__(self, run_id: str, wake_at: float | None = None, waiting_for: str = "a signal") -> None:
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

    def __init__(self, message: str, cap_name: str = "", cap: float = 0.0) -> None:
        super().__init__(message)
        self.cap_name = cap_name
        self.cap = cap


class RunStuck(NeedsAttention):
    """Compensation could not undo every effect; the run is `stuck` with the list of what remains."""


class UpdateTimeout(DaybookError):
    """A run did not answer an update in time (the request stays queued)."""


class SecretUnavailable(DaybookError):
    """A secret was read where only its digest is known (a step replayed from the journal)."""


def redact_url(url: str) -> str:
    """`url` as it may be shown (messages, logs, `daybook` output): a password in it, in the
    user info or as a `password=` option, replaced by `***`."""
    if "@" not in url and "password" not in url.lower():
        return url
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.split(':', 1)[0]}:***@{host}"
        query = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(parts.query)]
        return urlunsplit(parts._replace(netloc=netloc, query=urlencode(query, safe="*")))
    except ValueError:
        return "<a store URL that does not parse>"


class ScopeViolation(DaybookError):
    """A tool call inside `ctx.transaction` touches a resource outside the transaction's declared
    scopes; it was refused before it ran (and the transaction aborted, without a retry)."""


class FrontierTimeout(DaybookError):
    """A transaction waited longer than its `wait=` for earlier transactions on overlapping
    scopes to finish; it was aborted before its body ran (`daybook frontiers` names the staller)."""


class TransactionAbandoned(DaybookError):
    """A transaction was left open by a process that stopped without deciding it (killed, or its
    lease lapsed); the process that took the run over aborted it (staged calls dropped, what ran
    undone, held irreversible calls never released), and it runs again under a fresh epoch
    while its `retries` last."""


class TransactionNotFound(DaybookError):
    """No transaction attempt has this id (`daybook tx` lists them, column `transaction`)."""


class ReleaseDeclined(DaybookError):
    """A transaction's held irreversible call was not approved at its gate (declined, timed out,
    or stale); the transaction was aborted before its commit, without a retry."""


class ContractViolation(DaybookError):
    """A subtask's reviewed contract does not hold (raise it inside `ctx.subtask`): its output is
    wrong though no tool failed. Semantic recovery reads it as the `CONTRACT` signal."""


class PriceTableError(ConfigError):
    """A model price table daybook cannot use (`Daybook(prices=...)`): a file that is not JSON,
    a price that is negative or not a number, a model without input and output prices."""


class ReplayDiverged(StepFailed):
    """The world a step assumed is not the world it would act on: a workspace path (or a
    screen's view) changed outside the run between the decision and the act, or while the run
    was down. `assumed` and `live` map each changed path (or "view") to its hash (None: absent).
    Left uncaught it parks the run (`daybook show RUN` says what changed): put the outside
    change back and `daybook retry RUN`, or `daybook rewind RUN --to STEP`; a workflow whose
    checkout has `on_drift="redecide"` decides again with the new state instead."""

    def __init__(
        self,
        message: str = "",
        error: dict[str, str] | None = None,
        step: int | None = None,
        bug: bool = True,
        assumed: dict[str, str | None] | None = None,
        live: dict[str, str | None] | None = None,
    ) -> None:
        super().__init__(message, error, step, bug)
        self.assumed = dict(assumed or {})
        self.live = dict(live or {})


class ActionHadNoEffect(StepFailed):
    """A UI act (a click, a keystroke) left the view exactly as it was: the act missed (a
    disabled button, a stale element) and the agent must not go on as if it landed. Catch it
    to look again and decide anew; left uncaught it parks the run."""

    def __init__(
        self,
        message: str = "",
        error: dict[str, str] | None = None,
        step: int | None = None,
        bug: bool = True,
    ) -> None:
        super().__init__(message, error, step, bug)


class CheckoutBusy(DaybookError):
    """Another live run holds the lease on this checkout: two runs editing one checkout would
    overwrite each other's files. Wait for it to end (or its lease to lapse), or give each run
    its own worktree (`daybook.Checkout(path, worktree=True)`)."""


class ReaderBusy(DaybookError):
    """Another live process follows the stream under the same reader name, or took the name
    over while this one held it past its claim: one process per reader name at a time. Wait for
    it to stop (a SIGKILLed reader on this machine is taken over at once, one on another host
    once its claim lapses), or follow under another name."""


class WorkspaceConflict(DaybookError):
    """A rewind would overwrite files the run does not own any more: someone (another run, a
    person) changed them after the run's last edit. Nothing was restored; commit or move those
    changes, then rewind again (or pass force=True / `--force` to overwrite them)."""
