"""daybook: a durable journal for AI agents.

Intent is written before every act and the outcome after; a crashed run resumes from its journal
in any process, replaying recorded decisions and never re-firing a confirmed effect.
"""

import logging as _logging

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
