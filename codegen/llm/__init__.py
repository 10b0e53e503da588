"""cutegen.codegen.llm: talking to an OpenAI-compatible endpoint under hard limits.

Ownership: this package owns the endpoint configuration (:class:`LLMConfig`, prices), the
client with its single retry loop and deadlines (:class:`LLMClient`), the dollar cap
(:class:`CostLedger`), the record of every attempt (:class:`LLMCall`, which the store
keeps as it is, and the :class:`CallRecorder` seam it goes through) and the pure extraction of a candidate from a reply
(:func:`extract_candidate`). Prompts are rendered by :mod:`cutegen.codegen.prompting`; the
rewriter that ties them together is :mod:`cutegen.codegen.rewriters.llm`.

Importing this package does not import ``openai``: only sending a request does.
"""

from __future__ import annotations

from cutegen.codegen.llm.client import (
    LLMClient,
    LLMDeadlineError,
    LLMRateLimitError,
    LLMRequest,
    LLMResult,
)
from cutegen.codegen.llm.config import (
    DEFAULT_PRICES,
    LLMConfig,
    ModelPrice,
    PriceTable,
    config_from_env,
    load_price_file,
    parse_price_option,
)
from cutegen.codegen.llm.extract import CodeBlock, Extraction, extract_candidate, fenced_blocks
from cutegen.codegen.llm.ledger import CostLedger, Reservation, estimate_tokens
from cutegen.codegen.llm.records import (
    COST_BASES,
    OUTCOMES,
    CallRecorder,
    LLMCall,
)

__all__ = [
    "COST_BASES", "DEFAULT_PRICES", "OUTCOMES", "CallRecorder", "CodeBlock", "CostLedger",
    "Extraction", "LLMCall", "LLMClient",
    "LLMConfig", "LLMDeadlineError", "LLMRateLimitError", "LLMRequest", "LLMResult",
    "ModelPrice", "PriceTable", "Reservation", "config_from_env", "estimate_tokens",
    "extract_candidate", "fenced_blocks", "load_price_file", "parse_price_option",
]
