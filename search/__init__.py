"""cutegen.search: the Monte-Carlo tree search over kernel candidates.

Pure parts (``_policy``: UCT, widening, rewards, dead ends; ``_tree``: statistics derived
from stored facts; ``_best``: the statistically gated best), the search memory
(``_lessons``: Lessons), budgets (``_budget``), the facade (``_search.Search``) and what it
hands back (``_results``), the parallel driver (``_parallel``), the profile hook
(``_profile_hook``), sessions and resume checks (``_session``). Subpackages: the store
(``storage``, below the search: it imports only the node records ``_node`` and ``_state``)
and the reports read back from it (``report``, above the search).
"""

from cutegen.search._best import GateParams, GateResult, gate, mann_whitney_less
from cutegen.search._budget import Budget, Usage
from cutegen.search._node import ROOT, FrozenNode
from cutegen.search._params import SearchParams
from cutegen.search._policy import RewardParams, Widening
from cutegen.search._profile_hook import ProfileHook, profile_hook
from cutegen.search._results import NodeHandle, RunSummary, StepReport
from cutegen.search._search import Search
from cutegen.search._session import STALE_AFTER_S, check_resume, session_live
from cutegen.search._state import NodeState

__all__ = [
    "ROOT",
    "STALE_AFTER_S",
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
    "session_live",
]
