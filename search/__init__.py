"""cutegen.search: the Monte-Carlo tree search over kernel candidates.

Pure parts (``_policy``: UCT, widening, rewards, dead ends; ``_tree``: statistics derived
from stored facts; ``_best``: the statistically gated best), the search memory
(``_memory``: Lessons), budgets (``_budget``), the facade (``_search.Search``), graph export
(``_graph``) and the store (``storage``).
"""

from cutegen.search._best import GateParams, GateResult, gate, mann_whitney_less
from cutegen.search._budget import Budget, Usage
from cutegen.search._node import ROOT, FrozenNode
from cutegen.search._params import SearchParams
from cutegen.search._policy import RewardParams, Widening
from cutegen.search._profile_hook import ProfileHook, profile_hook
from cutegen.search._report import NodeHandle, RunSummary, StepReport
from cutegen.search._search import Search
from cutegen.search._session import check_resume
from cutegen.search._state import NodeState

__all__ = [
    "ROOT",
    "Budget",
    "FrozenNode",
    "GateParams",
    "GateResult",
    "NodeHandle",
    "NodeState",
    "ProfileHook",
    "RewardParams",
    "RunSummary",
    "Search",
    "SearchParams",
    "StepReport",
    "Usage",
    "Widening",
    "check_resume",
    "gate",
    "mann_whitney_less",
    "profile_hook",
]
