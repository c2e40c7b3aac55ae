"""daybook: a durable journal for AI agents.

Intent is written before every act and the outcome after; a crashed run resumes from its journal
in any process, replaying recorded decisions and never re-firing a confirmed effect.
"""

import logging as _logging
import typing as _typing
from importlib import import_module as _import_module

# Each public name is imported from its module the first time it is used (PEP 562), not all at
# once here: `import daybook` and every `python -m daybook`, worker or agent process started the
# whole package (about a sixth of a second of CPU) whatever it went on to use. The imports below
# are what type checkers and readers see; _WHERE says the same to the interpreter, and
# tests/test_shape.py checks that the two agree.
if _typing.TYPE_CHECKING:
    from .agent.loop import Action, AgentLoop, Judgement, LoopResult, Policy
    from .book import Daybook
    from .books.cost import Cost
    from .context import Context
    from .coordination.budget import Budget
    from .coordination.child import ChildFailed
    from .coordination.entity import Entity, EntityEntry, EntityView, Lease
    from .coordination.pool import BudgetPool
    from .coordination.reader import StreamReader
    from .dispatch.queues import Queue
    from .dispatch.schedules import Schedule
    from .dispatch.search import RunPage
    from .errors import (
        ActionHadNoEffect,
        BudgetExceeded,
        CheckoutBusy,
        ConfigError,
        ContractViolation,
        CorruptJournal,
        DaybookError,
        DedupWindowExpired,
        DuplicateKey,
        EffectFailed,
        EnvironmentLost,
        FrontierTimeout,
        LeaseLost,
        NeedsAttention,
        NonDeterminismError,
        NotAuthorized,
        NotInRun,
        NotSerializable,
        PriceTableError,
        ReaderBusy,
        RecoveryInProgress,
        ReleaseDeclined,
        ReplayDiverged,
        RunCancelled,
        RunConflict,
        RunErased,
        RunExpired,
        RunFailed,
        RunLeased,
        RunNotFound,
        RunParked,
        RunPaused,
        RunStuck,
        SchemaVersionError,
        ScopeViolation,
        SecretUnavailable,
        SinkConfigError,
        StepFailed,
        StepRetracted,
        StoreUnavailable,
        Suspended,
        TimedOut,
        TransactionAbandoned,
        TransactionNotFound,
        UpdateTimeout,
        WorkflowFailed,
        WorkspaceConflict,
    )
    from .gates.gate import Verdict
    from .gates.sink import LogSink, Webhook, verify_webhook
    from .journal.decision import Decision
    from .journal.llm import Completion, LLMClient, ScriptedLLM
    from .journal.price import PriceTable
    from .journal.tool import (
        Absent,
        Confirmed,
        NotFound,
        OutcomeUnknown,
        Pending,
        ReconcileResult,
        Retry,
        StillUnknown,
        Tool,
        TransientError,
        tool,
    )
    from .journal.wait import Signal
    from .records import SCHEMA_VERSION, Event, Kind, RunInfo, RunStatus, Status, Why
    from .recovery.compensation import Compensation
    from .recovery.restore import Recovery
    from .recovery.select import RecoveryPolicy
    from .recovery.signal import FailureSignal
    from .recovery.subtask import Skeleton, Subtask
    from .runtime.workflow import Workflow, workflow
    from .seam import current, idempotency_key, in_run, journaled_call
    from .steering.revision import Revision
    from .store.chunks import Chunk
    from .store.codec import FernetCodec, PayloadCodec, RedactingCodec
    from .store.secrets import Secret
    from .tx.atomix import EpochTransaction
    from .tx.commit import InvariantViolated, Transaction, TxResult
    from .workspace.checkout import Checkout
    from .workspace.rewind import Rewind
    from .workspace.screen import Screen

_WHERE: dict[str, str] = {
    "Action": "agent.loop",
    "AgentLoop": "agent.loop",
    "Judgement": "agent.loop",
    "LoopResult": "agent.loop",
    "Policy": "agent.loop",
    "Daybook": "book",
    "Cost": "books.cost",
    "Context": "context",
    "Budget": "coordination.budget",
    "ChildFailed": "coordination.child",
    "Entity": "coordination.entity",
    "EntityEntry": "coordination.entity",
    "EntityView": "coordination.entity",
    "Lease": "coordination.entity",
    "BudgetPool": "coordination.pool",
    "StreamReader": "coordination.reader",
    "Queue": "dispatch.queues",
    "Schedule": "dispatch.schedules",
    "RunPage": "dispatch.search",
    "ActionHadNoEffect": "errors",
    "BudgetExceeded": "errors",
    "CheckoutBusy": "errors",
    "ConfigError": "errors",
    "ContractViolation": "errors",
    "CorruptJournal": "errors",
    "DaybookError": "errors",
    "DedupWindowExpired": "errors",
    "DuplicateKey": "errors",
    "EffectFailed": "errors",
    "EnvironmentLost": "errors",
    "FrontierTimeout": "errors",
    "LeaseLost": "errors",
    "NeedsAttention": "errors",
    "NonDeterminismError": "errors",
    "NotAuthorized": "errors",
    "NotInRun": "errors",
    "NotSerializable": "errors",
    "PriceTableError": "errors",
    "ReaderBusy": "errors",
    "RecoveryInProgress": "errors",
    "ReleaseDeclined": "errors",
    "ReplayDiverged": "errors",
    "RunCancelled": "errors",
    "RunConflict": "errors",
    "RunErased": "errors",
    "RunExpired": "errors",
    "RunFailed": "errors",
    "RunLeased": "errors",
    "RunNotFound": "errors",
    "RunParked": "errors",
    "RunPaused": "errors",
    "RunStuck": "errors",
    "SchemaVersionError": "errors",
    "ScopeViolation": "errors",
    "SecretUnavailable": "errors",
    "SinkConfigError": "errors",
    "StepFailed": "errors",
    "StepRetracted": "errors",
    "StoreUnavailable": "errors",
    "Suspended": "errors",
    "TimedOut": "errors",
    "TransactionAbandoned": "errors",
    "TransactionNotFound": "errors",
    "UpdateTimeout": "errors",
    "WorkflowFailed": "errors",
    "WorkspaceConflict": "errors",
    "Verdict": "gates.gate",
    "LogSink": "gates.sink",
    "Webhook": "gates.sink",
    "verify_webhook": "gates.sink",
    "Decision": "journal.decision",
    "Completion": "journal.llm",
    "LLMClient": "journal.llm",
    "ScriptedLLM": "journal.llm",
    "PriceTable": "journal.price",
    "Absent": "journal.tool",
    "Confirmed": "journal.tool",
    "NotFound": "journal.tool",
    "OutcomeUnknown": "journal.tool",
    "Pending": "journal.tool",
    "ReconcileResult": "journal.tool",
    "Retry": "journal.tool",
    "StillUnknown": "journal.tool",
    "Tool": "journal.tool",
    "TransientError": "journal.tool",
    "tool": "journal.tool",
    "Signal": "journal.wait",
    "SCHEMA_VERSION": "records",
    "Event": "records",
    "Kind": "records",
    "RunInfo": "records",
    "RunStatus": "records",
    "Status": "records",
    "Why": "records",
    "Compensation": "recovery.compensation",
    "Recovery": "recovery.restore",
    "RecoveryPolicy": "recovery.select",
    "FailureSignal": "recovery.signal",
    "Skeleton": "recovery.subtask",
    "Subtask": "recovery.subtask",
    "Workflow": "runtime.workflow",
    "workflow": "runtime.workflow",
    "current": "seam",
    "idempotency_key": "seam",
    "in_run": "seam",
    "journaled_call": "seam",
    "Revision": "steering.revision",
    "Chunk": "store.chunks",
    "FernetCodec": "store.codec",
    "PayloadCodec": "store.codec",
    "RedactingCodec": "store.codec",
    "Secret": "store.secrets",
    "EpochTransaction": "tx.atomix",
    "InvariantViolated": "tx.commit",
    "Transaction": "tx.commit",
    "TxResult": "tx.commit",
    "Checkout": "workspace.checkout",
    "Rewind": "workspace.rewind",
    "Screen": "workspace.screen",
}

__version__ = "0.1.0"

# A library stays quiet unless the application configures logging (then: logger "daybook").
_logging.getLogger("daybook").addHandler(_logging.NullHandler())

__all__ = [
    "SCHEMA_VERSION",
    "Absent",
    "Action",
    "ActionHadNoEffect",
    "AgentLoop",
    "Budget",
    "BudgetExceeded",
    "BudgetPool",
    "Checkout",
    "CheckoutBusy",
    "ChildFailed",
    "Chunk",
    "Compensation",
    "Completion",
    "ConfigError",
    "Confirmed",
    "Context",
    "ContractViolation",
    "CorruptJournal",
    "Cost",
    "Daybook",
    "DaybookError",
    "Decision",
    "DedupWindowExpired",
    "DuplicateKey",
    "EffectFailed",
    "Entity",
    "EntityEntry",
    "EntityView",
    "EnvironmentLost",
    "EpochTransaction",
    "Event",
    "FailureSignal",
    "FernetCodec",
    "FrontierTimeout",
    "InvariantViolated",
    "Judgement",
    "Kind",
    "LLMClient",
    "Lease",
    "LeaseLost",
    "LogSink",
    "LoopResult",
    "NeedsAttention",
    "NonDeterminismError",
    "NotAuthorized",
    "NotFound",
    "NotInRun",
    "NotSerializable",
    "OutcomeUnknown",
    "PayloadCodec",
    "Pending",
    "Policy",
    "PriceTable",
    "PriceTableError",
    "Queue",
    "ReaderBusy",
    "ReconcileResult",
    "Recovery",
    "RecoveryInProgress",
    "RecoveryPolicy",
    "RedactingCodec",
    "ReleaseDeclined",
    "ReplayDiverged",
    "Retry",
    "Revision",
    "Rewind",
    "RunCancelled",
    "RunConflict",
    "RunErased",
    "RunExpired",
    "RunFailed",
    "RunInfo",
    "RunLeased",
    "RunNotFound",
    "RunPage",
    "RunParked",
    "RunPaused",
    "RunStatus",
    "RunStuck",
    "Schedule",
    "SchemaVersionError",
    "ScopeViolation",
    "Screen",
    "ScriptedLLM",
    "Secret",
    "SecretUnavailable",
    "Signal",
    "SinkConfigError",
    "Skeleton",
    "Status",
    "StepFailed",
    "StepRetracted",
    "StillUnknown",
    "StoreUnavailable",
    "StreamReader",
    "Subtask",
    "Suspended",
    "TimedOut",
    "Tool",
    "Transaction",
    "TransactionAbandoned",
    "TransactionNotFound",
    "TransientError",
    "TxResult",
    "UpdateTimeout",
    "Verdict",
    "Webhook",
    "Why",
    "Workflow",
    "WorkflowFailed",
    "WorkspaceConflict",
    "__version__",
    "current",
    "idempotency_key",
    "in_run",
    "journaled_call",
    "tool",
    "verify_webhook",
    "workflow",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use and kept (later reads are plain)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'daybook' has no attribute {name!r}")
    value = getattr(_import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
