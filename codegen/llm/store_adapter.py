"""A :class:`~.records.CallRecorder` over the search store (``record_llm_call`` /
``llm_spent_usd``), so the dollar ledger lives in the run's SQLite file and survives a
restart.

The store's own ``LLMCall`` row type (``cutegen.search.storage.LLMCall``) is filled field by
field from ours: every field the two share by name is copied, so columns the store adds
later (``candidate_sha256``, ``system``, ``purpose``...) are filled without a change here.
Fields the store lacks are dropped; :func:`cutegen.codegen.llm.traces.trace_rows` recovers
the candidate from the stored response when ``candidate_sha256`` is not stored.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from cutegen.codegen.llm.records import LLMCall


class StoreCallRecorder:
    """Records LLM calls into a :class:`~cutegen.search.storage.BaseStorage` run.

    Args:
        storage: the store (anything with ``record_llm_call`` and ``llm_spent_usd``).
        run_id: the run the calls are charged to.
    """

    def __init__(self, storage: Any, run_id: int) -> None:
        from cutegen.search.storage import LLMCall as StoreLLMCall

        self.storage = storage
        self.run_id = run_id
        self._row_type = StoreLLMCall
        self._row_fields = {f.name for f in fields(StoreLLMCall)}

    def to_row(self, call: LLMCall) -> Any:
        """The store's record for one of our calls."""
        values: dict[str, Any] = {}
        for name in self._row_fields & {f.name for f in fields(LLMCall)}:
            values[name] = getattr(call, name)
        values["run_id"] = self.run_id
        if "node_id" in self._row_fields:
            values.setdefault("node_id", None)  # the node is created after the call
        if "created_at" in self._row_fields:
            values["created_at"] = call.started_at
        for name in ("prompt_tokens", "completion_tokens"):
            if name in values and values[name] is None:
                values[name] = 0
        if values.get("cost_usd") is None:
            values["cost_usd"] = 0.0  # unpriced model: no cap can be active
        return self._row_type(**values)

    def record(self, call: LLMCall) -> None:
        self.storage.record_llm_call(self.to_row(call))

    def spent_usd(self) -> float:
        return float(self.storage.llm_spent_usd(self.run_id))
