"""The cost ledger: a hard dollar cap enforced before each request is sent.

Before an attempt is sent, its worst case (estimated prompt tokens + ``max_tokens`` at the
model's price) is *reserved*. The attempt is refused with
:class:`~cutegen.errors.BudgetExceededError` when what is spent plus what is reserved plus
this worst case would pass the cap, so the cap holds even when a server charges the whole
``max_tokens``. After the attempt the reservation is released and the real charge is
recorded (by the client, through the :class:`~.records.CallRecorder`). What is spent is
read back from the recorder, so the ledger survives a restart.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from cutegen.codegen.llm.config import ModelPrice
from cutegen.codegen.llm.records import CallRecorder
from cutegen.errors import BudgetExceededError

#: Bytes of text per token assumed when estimating a prompt's size. Real tokenizers give
#: about 4 bytes per token for English and code; 3 overestimates, which is the safe side.
BYTES_PER_TOKEN = 3
#: Tokens added per message for the chat format's framing.
TOKENS_PER_MESSAGE = 16


def estimate_tokens(*texts: str) -> int:
    """A conservative (high) estimate of the prompt tokens of these messages."""
    return sum(math.ceil(len(t.encode("utf-8")) / BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE
               for t in texts)


@dataclass(frozen=True, slots=True)
class Reservation:
    """Dollars set aside for one attempt in flight."""

    usd: float
    prompt_tokens: int
    max_tokens: int


class CostLedger:
    """Spent (from the recorder) + reserved (in flight) <= cap, checked before sending.

    Args:
        recorder: the call records; ``spent_usd()`` is read from it on every check.
        price: the model's price (None: costs unknown, and ``max_usd`` must be None).
        max_usd: the cap, or None for no cap.
    """

    def __init__(self, recorder: CallRecorder, *, price: ModelPrice | None,
                 max_usd: float | None) -> None:
        if max_usd is not None and price is None:
            raise ValueError("a dollar cap needs a price")
        self.recorder = recorder
        self.price = price
        self.max_usd = max_usd
        self._reserved = 0.0
        self._lock = threading.Lock()

    def spent_usd(self) -> float:
        return self.recorder.spent_usd()

    def reserved_usd(self) -> float:
        with self._lock:
            return self._reserved

    def worst_case(self, prompt_tokens: int, max_tokens: int) -> float:
        return self.price.cost(prompt_tokens, max_tokens) if self.price else 0.0

    def reserve(self, prompt_tokens: int, max_tokens: int) -> Reservation:
        """Set aside the worst case of the next attempt, or refuse it.

        Raises:
            BudgetExceededError: the attempt could take the run past the cap.
        """
        usd = self.worst_case(prompt_tokens, max_tokens)
        with self._lock:
            if self.max_usd is not None:
                spent = self.recorder.spent_usd()
                if spent + self._reserved + usd > self.max_usd:
                    raise BudgetExceededError(
                        f"LLM budget: ${spent:.4f} spent + ${self._reserved:.4f} in flight "
                        f"+ ${usd:.4f} worst case of the next call ({prompt_tokens} prompt + "
                        f"{max_tokens} completion tokens) would pass --max-dollars "
                        f"{self.max_usd:.4f}; the call was not sent")
            self._reserved += usd
        return Reservation(usd, prompt_tokens, max_tokens)

    def release(self, reservation: Reservation) -> None:
        """Give back a reservation once its attempt's real charge has been recorded."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - reservation.usd)

    def charge(self, reservation: Reservation, *, prompt_tokens: int | None,
               completion_tokens: int | None, generated: bool) -> tuple[float | None, str]:
        """What to record for an attempt: (dollars, cost basis).

        Args:
            reservation: what was reserved for the attempt.
            prompt_tokens / completion_tokens: the server's usage, when reported.
            generated: False when the endpoint cannot have generated anything (the request
                never left, or was refused with a 4xx before generation).
        """
        if self.price is None:
            return None, "unpriced"
        if prompt_tokens is not None and completion_tokens is not None:
            return self.price.cost(prompt_tokens, completion_tokens), "usage"
        if not generated:
            return 0.0, "none"
        return reservation.usd, "reserved"
