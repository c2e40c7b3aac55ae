"""daybook: a durable journal for AI agents.

Intent is written before every act and the outcome after; a crashed run resumes from its journal
in any process, replaying recorded decisions and never re-firing a confirmed effect.
"""

import logging as _logging

from .book import Daybook
from .budget import Budget
from .context import Compensation, Context, Decision, Signal, Verdict
from .entity import Entity, EntityEntry, EntityView, Lease
from .errors import (
    BudgetExceeded,
    ConfigError,
    CorruptJournal,
    DaybookError,
    DedupWindowExpired,
    DuplicateKey,
    EffectFailed,
    LeaseLost,
    NeedsAttention,
    NonDeterminismError,
    NotAuthorized,
    NotSerializable,
    RunConflict,
    RunFailed,
    RunLeased,
    RunNotFound,
    RunStuck,
    SchemaVersionError,
    StepFailed,
    StoreUnavailable,
    Suspended,
    UpdateTimeout,
)
from .llm import Completion, LLMClient, ScriptedLLM
from .loop import Action, AgentLoop, Judgement, LoopResult, Policy
from .pool import BudgetPool
from .records import SCHEMA_VERSION, Event, Kind, RunInfo, RunStatus, Status, Why
from .tool import (
    Absent,
    Confirmed,
    NotFound,
    OutcomeUnknown,
    Pending,
    Retry,
    StillUnknown,
    Tool,
    TransientError,
    tool,
)
from .transaction import InvariantViolated, Transaction, TxResult
from .workflow import Workflow, workflow

__version__ = "0.1.0"

# A library stays quiet unless the application configures logging (then: logger "daybook").
_logging.getLogger("daybook").addHandler(_logging.NullHandler())

__all__ = [
    "SCHEMA_VERSION",
    "Absent",
    "Action",
    "AgentLoop",
    "Budget",
    "BudgetExceeded",
    "BudgetPool",
    "Compensation",
    "Completion",
    "ConfigError",
    "Confirmed",
    "Context",
    "CorruptJournal",
    "Daybook",
    "DaybookError",
    "Decision",
    "DedupWindowExpired",
    "DuplicateKey",
    "EffectFailed",
    "Entity",
    "EntityEntry",
    "EntityView",
    "Event",
    "InvariantViolated",
    "Judgement",
    "Kind",
    "LLMClient",
    "Lease",
    "LeaseLost",
    "LoopResult",
    "NeedsAttention",
    "NonDeterminismError",
    "NotAuthorized",
    "NotFound",
    "NotSerializable",
    "OutcomeUnknown",
    "Pending",
    "Policy",
    "Retry",
    "RunConflict",
    "RunFailed",
    "RunInfo",
    "RunLeased",
    "RunNotFound",
    "RunStatus",
    "RunStuck",
    "SchemaVersionError",
    "ScriptedLLM",
    "Signal",
    "Status",
    "StepFailed",
    "StillUnknown",
    "StoreUnavailable",
    "Suspended",
    "Tool",
    "Transaction",
    "TransientError",
    "TxResult",
    "UpdateTimeout",
    "Verdict",
    "Why",
    "Workflow",
    "__version__",
    "tool",
    "workflow",
]
