"""The mixed rewriter: cheap moves from the built-in rewriter, expensive ones from the LLM.

The search decides how many cheap and how many expensive children a node gets
(asymmetric branching) and asks with ``cost=``; this rewriter only routes:
``cost="cheap"`` goes to the built-in rewriter (TUNABLES, template variants),
``cost="expensive"`` to the LLM. Initial candidates come from the built-in rewriter first
(hand-written seeds cost nothing) and the LLM fills the remaining slots. It is the default
rewriter when an LLM is configured.

The built-in rewriter is constructed lazily, by module and class name, so this module does
not depend on how (or whether) ``cutegen.codegen.rewriters.builtin`` is installed until a
cheap move is asked for.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Sequence

from cutegen.codegen.rewriters.base import CostClass, Proposal, RewriteContext, Rewriter
from cutegen.errors import ConfigError

#: Where the built-in rewriter lives: (module, class).
BUILTIN = ("cutegen.codegen.rewriters.builtin", "BuiltinRewriter")


def load_builtin() -> Rewriter:
    """Construct the built-in rewriter by name.

    Raises:
        ConfigError: the module or class is not there.
    """
    module, cls = BUILTIN
    try:
        return getattr(importlib.import_module(module), cls)()
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"the built-in rewriter {module}.{cls} is not available: {e}") from e


class MixedRewriter:
    """Routes cheap moves to the built-in rewriter and expensive ones to the LLM.

    Args:
        llm: the expensive rewriter (normally :class:`~.llm.LLMRewriter`).
        builtin: the cheap rewriter; None = build it on first use with ``builtin_factory``.
        builtin_factory: how to build it (default :func:`load_builtin`).
    """

    name = "mixed"

    def __init__(self, llm: Rewriter, builtin: Rewriter | None = None, *,
                 builtin_factory: Callable[[], Rewriter] = load_builtin) -> None:
        self.llm = llm
        self._builtin = builtin
        self._factory = builtin_factory

    @property
    def builtin(self) -> Rewriter:
        if self._builtin is None:
            self._builtin = self._factory()
        return self._builtin

    def initial(self, ctx: RewriteContext, *, n: int, rng: random.Random) -> Sequence[Proposal]:
        cheap = list(self.builtin.initial(ctx, n=n, rng=rng))[:n]
        rest = n - len(cheap)
        expensive = list(self.llm.initial(ctx, n=rest, rng=rng)) if rest > 0 else []
        return _unique(cheap + expensive)

    def propose(self, ctx: RewriteContext, *, n: int, cost: CostClass,
                rng: random.Random) -> Sequence[Proposal]:
        target = self.builtin if cost == "cheap" else self.llm
        return _unique(list(target.propose(ctx, n=n, cost=cost, rng=rng)))


def _unique(proposals: Sequence[Proposal]) -> list[Proposal]:
    seen: set[str] = set()
    out = []
    for p in proposals:
        if p.candidate.sha256 not in seen:
            seen.add(p.candidate.sha256)
            out.append(p)
    return out
