"""cutegen.search.storage: the storage contract and its two implementations.

``BaseStorage`` states the contract; ``InMemoryStorage`` and ``SqliteStorage`` hold it and
are tested by one shared suite. Records are frozen dataclasses from ``_records``; an LLM
call is kept as the client's own record, :class:`cutegen.codegen.llm.LLMCall`.
"""

from cutegen.codegen.atomic import write_atomic
from cutegen.search.storage._base import (
    BaseStorage,
    StoreBaselineCache,
    StoreCallRecorder,
    SweepsTemporaries,
    check_run_name,
)
from cutegen.search.storage._inmemory import InMemoryStorage
from cutegen.search.storage._records import (
    RUN_STATUSES,
    Baseline,
    BestDecision,
    FrozenRun,
    LessonRecord,
    ProfileRecord,
    PruneRecord,
    RunConfig,
    Session,
    StoredResult,
)
from cutegen.search.storage._sqlite import SqliteStorage

__all__ = [
    "RUN_STATUSES",
    "Baseline",
    "BaseStorage",
    "BestDecision",
    "FrozenRun",
    "InMemoryStorage",
    "LessonRecord",
    "ProfileRecord",
    "PruneRecord",
    "RunConfig",
    "Session",
    "SqliteStorage",
    "StoreBaselineCache",
    "StoreCallRecorder",
    "StoredResult",
    "SweepsTemporaries",
    "check_run_name",
    "write_atomic",
]
