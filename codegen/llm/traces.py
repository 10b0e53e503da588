"""Training traces: (prompt, response, candidate, evaluation, reward) rows, one per LLM call.

Pure: :func:`trace_rows` joins call records with the nodes of a run by the candidate's
source hash and yields JSON-able dicts; ``cutegen export-traces`` writes them as JSON lines
for people who train kernel-writing models. A call is linked to a node through its
``candidate_sha256`` when the record has one, else by extracting the candidate from the
stored response again (extraction is deterministic). Several calls may lead to one node
(the search keeps one node per source hash): each call is its own row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from cutegen.codegen.candidate import sha256_text
from cutegen.codegen.evaluation import Evaluation
from cutegen.codegen.llm.extract import extract_candidate
from cutegen.codegen.llm.records import LLMCall

#: Version of the row layout, written into every row.
TRACE_FORMAT = 1


@dataclass(frozen=True, slots=True)
class TraceNode:
    """What a trace row needs to know about one node of the run."""

    node_id: int
    source: str
    evaluation: Evaluation | None
    reward: float | None

    @property
    def sha256(self) -> str:
        return sha256_text(self.source)


def _candidate_sha(call: LLMCall) -> str | None:
    if call.candidate_sha256:
        return call.candidate_sha256
    if call.outcome != "ok":
        return None
    found = extract_candidate(call.response)
    return sha256_text(found.code) if found.code else None


def _evaluation_dict(ev: Evaluation, *, keep_samples: bool) -> dict[str, Any]:
    d = ev.to_dict()
    if not keep_samples:
        for name in ("timing", "eager", "compiled"):
            if isinstance(d.get(name), dict):
                d[name] = {k: v for k, v in d[name].items() if k != "samples_us"}
    return d


def trace_rows(calls: Iterable[LLMCall], nodes: Iterable[TraceNode], *, run: str = "",
               task: str = "", all_calls: bool = False,
               keep_samples: bool = False) -> Iterator[dict[str, Any]]:
    """One row per LLM call that led to a node (or per call, with ``all_calls``).

    Args:
        calls: the run's call records, oldest first.
        nodes: the run's nodes with their sources, evaluations and rewards.
        run / task: names written into every row.
        all_calls: also emit calls that produced no node (failures, duplicates of nothing),
            with ``candidate`` null: negative examples for training.
        keep_samples: keep the raw timing samples in the evaluation (large).
    """
    by_sha: Mapping[str, TraceNode] = {n.sha256: n for n in nodes}
    for call in calls:
        sha = _candidate_sha(call)
        node = by_sha.get(sha) if sha else None
        if node is None and not all_calls:
            continue
        ev = node.evaluation if node is not None else None
        yield {
            "format": TRACE_FORMAT,
            "run": run,
            "task": task,
            "model": call.model,
            "purpose": call.purpose,
            "attempt": call.attempt,
            "system": call.system,
            "prompt": call.prompt,
            "response": call.response,
            "outcome": call.outcome,
            "error": call.error,
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens,
            "cost_usd": call.cost_usd,
            "candidate_sha256": sha,
            "node_id": node.node_id if node is not None else None,
            "candidate": node.source if node is not None else None,
            "verdict": ev.verdict.value if ev is not None else None,
            "speedup_eager": ev.speedup_eager if ev is not None else None,
            "speedup_compile": ev.speedup_compile if ev is not None else None,
            "reward": node.reward if node is not None else None,
            "evaluation": _evaluation_dict(ev, keep_samples=keep_samples) if ev else None,
        }
