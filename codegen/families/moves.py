"""Kernel-family moves for the built-in rewriter: initial candidates, strategies, fusion and
profiler-guided knob changes.

* :func:`family_proposals`: the rendered candidates for a recognised task (the fused
  default first, then for long rows the default walked the other way: with its row slice
  read twice where the default keeps it in shared memory between the two passes
  (``smem_row``); for a pool whose default stages its input through shared memory, the
  thread-per-outputs kernel (``pool_stage`` False), then the default with ``fast_math``
  where a bf16 / fp16 result has transcendentals in its chains, then each other strategy in
  :data:`STRATEGY_ORDER`, then the unfused variant), move kind "family".
* :func:`family_moves` (a ``MoveGenerator``) for a parent that a family rendered (it has a
  ``FAMILY`` literal):

  - kind **"tunable"**: flip ``TUNABLES["smem_row"]``, ``["l2_hints"]`` and
    ``["async_stage"]`` where the parent has them (long rows); set a pool's
    ``["pool_stage"]`` to each of its other values;
  - kind **"strategy"**: switch ``TUNABLES["strategy"]`` to each other allowed strategy;
  - kind **"fuse"**: re-render the parent fused (``{"fuse": True}``) when it runs its
    pointwise prologue / epilogue as kernels of their own, or unfused (``{"fuse": False}``)
    when it fuses them, keeping the parent's knob values;
  - kind **"tunable"** with a ``"hint"`` param: the knob change a profiler finding asks for.

**Profiler hints.** ``RewriteContext.findings`` holds the parent's ``hint.*`` findings.
:data:`HINT_RULES` matches them by key and value, never by wording (the sass profiler's
``hint.vector_width``, ``hint.spills`` and ``hint.loads_in_flight``; ``hint.occupancy``
whose value is what limits it: "registers", "shared_memory", "warps" or "blocks";
``hint.stall`` = "long_scoreboard";
the timeline's ``hint.fuse_kernels`` and ``hint.launch_overhead``) and turns each into preferred moves: a knob stepped one allowed value up or down (``vec_bits`` up for narrow accesses;
``vals_per_thread`` / ``rows_per_thread`` down for spills and register-limited occupancy,
up (and ``unroll`` / ``s_unroll`` up) for long-scoreboard stalls; ``unroll`` / ``s_unroll``
up where one load is in flight a thread; ``cta_threads`` up for too few warps) or
the fuse move. Those
proposals carry ``params["hint"]`` (the finding's key) and the built-in rewriter offers them
before other moves of the same cost. The parent's evaluation counts as a fuse hint
(``"evaluation.host_bound"``) when the GPU waited on the host for a quarter of the call or
more (``Evaluation.host_wait_fraction``): fusing removes launches, and the Python between them.

**GEMM parents** (``FAMILY["family"] == "gemm"``, see :mod:`.gemm`) have no strategies and
nothing to fuse or split; :func:`gemm_moves` changes one knob at a time to each other value
of its ``TUNABLE_CHOICES`` (tile shape, cluster shape, stages, raster order, swizzle,
epilogue variant; kind "tunable", params ``{"name", "from", "to", "family": "gemm"}``) and
the precision only to a mode the task's tolerance allows (``precision_modes`` of the plan;
kind "precision"): fp32 tasks with the default 1e-4 tolerance stay at "3xtf32". **Conv
parents** (``"conv"``, see :mod:`.conv`) get the same one-knob moves over their knobs
(params ``"family": "conv"``), and their root candidates are the default and
:data:`~cutegen.codegen.families.conv.CONV_VARIANTS`. Its hint
rules are :data:`GEMM_HINT_RULES` ("occupancy limited by shared memory" -> fewer stages;
"tensor pipe busy" / "long scoreboard" -> more stages, wider tiles, a 2-CTA cluster;
spills -> narrower tiles). The "uses HMMA / FFMA instead of WGMMA" finding asks for nothing
here: the template always issues WGMMA, so no knob changes that.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cutegen.codegen.candidate import CandidateSource, parse_tunables, set_tunable
from cutegen.codegen.evaluation import HOST_BOUND
from cutegen.codegen.families.conv import CONV_VARIANTS
from cutegen.codegen.families.gemm import PROMOTE_DEFAULT
from cutegen.codegen.families.plan import NotCovered, Plan, Recognition
from cutegen.codegen.families.recognize import recognize_task
from cutegen.codegen.families.render import can_split, knobs, render
from cutegen.codegen.families.render_pool import staged_by_default
from cutegen.codegen.families.taskmodule import TaskModuleError
from cutegen.codegen.rewriters.base import Move, Proposal, RewriteContext
from cutegen.codegen.tasks import Task
from cutegen.errors import CandidateError
from cutegen.profilers import Finding


@dataclass(frozen=True, slots=True)
class HintRule:
    """A profiler finding (its key, and the values it answers; empty: any value) and the
    moves it asks for: (knob, +1 / -1) steps, or "fuse"."""

    key: str
    values: tuple[str, ...] = ()
    steps: tuple[tuple[str, int], ...] = ()
    fuse: bool = False

    def matches(self, finding: Finding) -> bool:
        return finding.key == self.key and (not self.values or str(finding.value) in self.values)


HINT_RULES: tuple[HintRule, ...] = (
    HintRule("hint.vector_width", (), (("vec_bits", +1), ("pw_vec_bits", +1))),
    HintRule("hint.spills", (),
             (("vals_per_thread", -1), ("rows_per_thread", -1), ("pw_rows_per_thread", -1))),
    HintRule("hint.occupancy", ("registers",), (("vals_per_thread", -1), ("rows_per_thread", -1))),
    HintRule("hint.occupancy", ("warps", "blocks"), (("cta_threads", +1), ("threads", +1),
                                                     ("vals_per_thread", -1))),
    HintRule("hint.stall", ("long_scoreboard",),
             (("vals_per_thread", +1), ("rows_per_thread", +1), ("unroll", +1),
              ("s_unroll", +1))),
    # the SASS shows one global load in flight a thread: more rows a step of the walk
    HintRule("hint.loads_in_flight", (), (("s_unroll", +1), ("unroll", +1))),
    HintRule("hint.fuse_kernels", (), fuse=True),
    HintRule("hint.launch_overhead", (), fuse=True),  # launching costs more than the kernels
)

#: Hint rules for gemm parents (knobs of :func:`cutegen.codegen.families.gemm.gemm_knobs`).
GEMM_HINT_RULES: tuple[HintRule, ...] = (
    HintRule("hint.occupancy", ("shared_memory",), (("stages", -1),)),
    HintRule("hint.tensor_pipe", (), (("stages", +1), ("tile_n", +1), ("cluster_m", +1))),
    HintRule("hint.stall", ("long_scoreboard",), (("stages", +1),)),
    HintRule("hint.spills", (), (("tile_n", -1),)),
)
#: Initial gemm candidates besides the default: (label, knob values), each used when its
#: values are allowed choices that differ from the defaults.
#: Order: the bench of the gemm suite on an H200 (BENCHMARKS.md, 2026-11-30, 12 tasks) had
#: cluster 2x1 best or within 1% of it on 11, raster n + swizzle 4 ahead of tile_n 128 on all 12;
#: fast math (offered only where an epilogue has a transcendental) has not been measured.
GEMM_VARIANTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("cluster 2x1", {"cluster_m": 2}),
    ("fast math", {"fast_math": True}),
    ("raster n, swizzle 4", {"raster": "n", "swizzle": 4}),
    ("tile_n 128", {"tile_n": 128}),
)

_CACHE: dict[str, Recognition] = {}


def _precheck(task: Task) -> NotCovered | None:
    """A reason not to capture at all: the source has no Model with a forward."""
    try:
        tree = ast.parse(task.source)
    except SyntaxError as e:
        return NotCovered(f"the task does not parse: {e}")
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"),
                 None)
    if model is None or not any(isinstance(b, ast.FunctionDef) and b.name == "forward"
                                for b in model.body):
        return NotCovered("the task has no Model.forward to recognise")
    if not task.path.is_file():
        return NotCovered(f"the task file {task.path} is gone")
    return None


def recognition_for(task: Task, *, in_process: bool = False) -> Recognition:
    """Recognise a task once per task text (cached); see :mod:`.recognize`."""
    hit = _CACHE.get(task.sha256)
    if hit is None:
        pre = _precheck(task)
        hit = Recognition(not_covered=pre) if pre else recognize_task(task, in_process=in_process)
        _CACHE[task.sha256] = hit
    return hit


def not_covered_message(task: Task) -> str:
    """Why no family covers the task ("" when one does)."""
    rec = recognition_for(task)
    return "" if rec.covered or rec.not_covered is None else rec.not_covered.message


#: How a root variant that sets an on / off knob against its default says so.
_SWITCH_WORDS = {("smem_row", True): "row slice kept in shared memory",
                 ("smem_row", False): "row read twice (no shared-memory copy)",
                 ("pool_stage", False): "each thread reads its windows' span (not staged)"}


def _move(plan: Plan, strategy: str, fused: bool, fast_math: bool = False,
          switch: tuple[str, bool] | None = None) -> Move:
    """The root's move for a rendered variant (``switch``: a knob (name, value) set against
    its default, or None where the variant keeps the defaults)."""
    how = ("" if fused or not can_split(plan) else ", unfused") + (", fast math" if fast_math
                                                                   else "")
    if switch is not None:
        how += ", " + _SWITCH_WORDS[switch]
    params: dict[str, object] = {"family": plan.family, "op": plan.op, "strategy": strategy,
                                 "fused": fused}
    if fast_math:
        params["fast_math"] = True
    if switch is not None:
        params[switch[0]] = switch[1]
    return Move("family", f"{plan.family} family: {plan.op} ({strategy}{how})", "cheap", params)


#: The order in which the other strategies of a family are offered at the root (a short
#: search evaluates only the first few). Row family, measured on the H200: ``looped`` beat
#: ``auto`` 2.0x on cross-entropy over 32768 bf16 classes (489 vs 953 us, 2026-11-30) and
#: ``cluster`` was never the best of softmax at 1024 / 4096 / 16384 / 131072 bf16 columns
#: (0.90x / 2.49x / 1.84x / 1.78x against the best's 1.56x / 3.12x / 1.88x / 1.80x vs eager).
#: ``split`` (long rows only) right after ``auto``: issue 17's few very long rows (16 rows of
#: 4M values) fill 128 CTAs of 256 threads with a cluster of 8 but 272 with a split (225 us
#: against auto's 258 us on the H200, 2026-12-04; where no cluster can hold such rows, split
#: is the default and auto comes second: ``render.few_unheld_rows``). ``resident`` (long
#: rows only) last: on the H200 (2026-12-04) it was
#: correct but the slowest way for both long kinds: 16 rows of 4M fp32 with LayerNorm's
#: weight and bias 415 us (split 225, auto 258), 4096 rows of 393,216 fp32 softmax 4,091 us
#: (auto with the slice in shared memory 3,890, auto 4,273).
#: The long rows' on / off knobs each flipped as a move of its own (``render.knobs``):
#: ``smem_row`` (the slice kept in shared memory between the passes), ``l2_hints`` (the
#: output stored, and x read for the last time, evict-first in L2) and ``async_stage`` (a
#: staged slice copied in with cp.async, all of it in flight at once); ``l2_batch`` (few rows
#: that no cluster holds: the split's two launches 32 MiB of rows at a time, the output launch
#: reading x again from L2; not yet measured on a GPU).
_ROW_SWITCHES = ("smem_row", "l2_hints", "async_stage", "l2_batch")
STRATEGY_ORDER = {"row": ("auto", "split", "registers", "looped", "cluster", "resident")}


def _ordered(family: str, strategies: Sequence[str]) -> list[str]:
    rank = {s: i for i, s in enumerate(STRATEGY_ORDER.get(family, ()))}
    return sorted(strategies, key=lambda s: rank.get(s, len(rank)))  # stable for the rest


def family_proposals(task: Task) -> list[Proposal]:
    """Rendered candidates for a recognised task, best guess first (see the module doc)."""
    rec = recognition_for(task)
    out: list[Proposal] = []
    for plan in rec.plans:
        if plan.family in ("gemm", "conv"):
            gemm = _gemm_proposals(task, plan)
            if gemm is None:
                return []
            out += gemm
            continue
        values, choices = knobs(plan)
        default = values.get("strategy", "default")  # the pool family has one way only
        # (strategy, fused, fast math, a knob (name, value) set against its default or None)
        variants: list[tuple[str, bool, bool, tuple[str, bool] | None]] = [
            (default, True, False, None)]
        if "smem_row" in choices:  # long rows: the other way of walking them, right after
            variants.append((default, True, False, ("smem_row", not values["smem_row"])))
        if plan.family == "pool" and staged_by_default(plan):  # the new kernel's fallback
            variants.append((default, True, False, ("pool_stage", False)))
        if "fast_math" in choices:  # transcendentals into a bf16 / fp16 result: next, since
            # on the H200 kl_div_bf16 (two logs an element) ran 338.8 -> 139.2 us with it and
            # selu_bf16 lost nothing (303.1 / 303.3 us; 2026-12-03), while the strategies
            # change the same kernel's shape
            variants.append((default, True, True, None))
        variants += [(s, True, False, None) for s in _ordered(
            plan.family, choices.get("strategy", [default])) if s != default]
        if can_split(plan):
            variants.append((default, False, False, None))
        for strategy, fused, fast, switch in variants:
            tunables: dict[str, object] = {"strategy": strategy} if "strategy" in values else {}
            if fast:
                tunables["fast_math"] = True
            if switch is not None:
                tunables[switch[0]] = switch[1]
            try:
                code = render(plan, task.source, tunables=tunables, fused=fused)
            except TaskModuleError as e:  # remembered, so not_covered_message says why
                _CACHE[task.sha256] = Recognition(not_covered=NotCovered(
                    f"a candidate cannot copy Model's constructor: {e}", "Model.__init__"))
                return []
            move = _move(plan, strategy, fused, fast, switch)
            out.append(Proposal(CandidateSource(code, f"family:{move.description}"), move))
    return out


def _gemm_proposals(task: Task, plan: Plan) -> list[Proposal] | None:
    """The default gemm (or conv) candidate, then :data:`GEMM_VARIANTS` (conv:
    :data:`~cutegen.codegen.families.conv.CONV_VARIANTS`) (None: Model cannot be copied)."""
    values, choices = knobs(plan)
    variants: list[tuple[str, dict[str, object]]] = [("default", {})]
    for label, change in (CONV_VARIANTS if plan.family == "conv" else GEMM_VARIANTS):
        if all(v in choices.get(k, ()) and v != values.get(k) for k, v in change.items()):
            variants.append((label, change))
    out: list[Proposal] = []
    for label, change in variants:
        try:
            code = render(plan, task.source, tunables=dict(change))
        except TaskModuleError as e:  # remembered, so not_covered_message says why
            _CACHE[task.sha256] = Recognition(not_covered=NotCovered(
                f"a candidate cannot copy Model's constructor: {e}", "Model.__init__"))
            return None
        how = ("direct kernel, fp32 sums" if plan.family == "conv" and plan.param("algo") ==
               "direct" else f"precision {values.get('precision')}")
        desc = (f"{plan.family} family: {'matmul' if plan.family == 'gemm' else plan.op} "
                f"({label}, {how})")
        move = Move("family", desc, "cheap", {"family": plan.family, "op": plan.op,
                                              "variant": label, **change})
        out.append(Proposal(CandidateSource(code, f"family:{desc}"), move))
    return out


def read_family(code: str) -> dict | None:
    """The ``FAMILY`` literal of a rendered candidate (None for other candidates)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "FAMILY" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return value if isinstance(value, dict) and "family" in value else None
    return None


def hint_rules(findings: Sequence[Finding],
               rules: tuple[HintRule, ...] = HINT_RULES) -> list[HintRule]:
    """The rules some finding matches, in ``rules`` order."""
    return [r for r in rules if any(r.matches(f) for f in findings)]


def _step(values: tuple, current: object, direction: int) -> object | None:
    ordered = sorted(values) if all(isinstance(v, (int, float)) for v in values) else list(values)
    if current not in ordered:
        return None
    i = ordered.index(current) + direction
    return ordered[i] if 0 <= i < len(ordered) else None


def family_moves(ctx: RewriteContext) -> Iterator[Proposal]:
    """Strategy switches, fuse / unfuse, and profiler-hinted knob steps of a family parent."""
    if ctx.parent is None:
        return
    code = ctx.parent.code
    fam = read_family(code)
    if fam is None:
        return
    try:
        tunables = parse_tunables(code)
    except CandidateError:
        return
    if fam.get("family") in ("gemm", "conv"):  # conv: the GEMM's knobs (conv.py)
        yield from gemm_moves(ctx, code, tunables, family=str(fam["family"]))
        return
    if fam.get("family") == "chain" and str(fam.get("op", "")).startswith("conv"):
        # a conv kernel, then other families' (chains.conv_then): one-knob steps over all
        yield from gemm_moves(ctx, code, tunables, family="conv")
        return
    rules = hint_rules(ctx.findings)
    for rule in rules:  # hinted knob steps first: the rewriter prefers them
        for name, direction in rule.steps:
            t = tunables.get(name)
            new = _step(t.choices, t.value, direction) if t else None
            if t is None or new is None:
                continue
            desc = f"{name} {t.value!r}->{new!r} (profiler: {rule.key})"
            yield Proposal(CandidateSource(set_tunable(code, name, new), f"builtin:{desc}"),
                           Move("tunable", desc, "cheap",
                                {"name": name, "from": t.value, "to": new, "hint": rule.key}))
    # long rows: keep the slice in shared memory or not, stream the output through L2 or
    # not (on / off switches); pools: staged through shared memory, or not ("auto" too)
    for name in (*_ROW_SWITCHES, "pool_stage"):
        t = tunables.get(name)
        if t is None:
            continue
        others = [v for v in t.choices if v != t.value] if t.choices else [not t.value]
        for v in others:
            desc = f"{name} {t.value!r}->{v!r} ({fam.get('op')})"
            yield Proposal(CandidateSource(set_tunable(code, name, v), f"builtin:{desc}"),
                           Move("tunable", desc, "cheap", {"name": name, "from": t.value,
                                                           "to": v}))
    strat = tunables.get("strategy")
    if strat is not None:
        for s in strat.choices:
            if s != strat.value:
                desc = f"strategy {strat.value}->{s} ({fam.get('op')})"
                yield Proposal(CandidateSource(set_tunable(code, "strategy", s), f"builtin:{desc}"),
                               Move("strategy", desc, "cheap",
                                    {"name": "strategy", "from": strat.value, "to": s,
                                     "family": fam.get("family")}))
    hint = next((r.key for r in rules if r.fuse), None)  # the finding that asks for fusing
    if hint is None and _host_bound(ctx):
        hint = "evaluation.host_bound"
    yield from _fuse_moves(ctx, fam, tunables, hint)


def _host_bound(ctx: RewriteContext) -> bool:
    """Whether the parent's evaluation saw the GPU wait on the host for a quarter of the call
    or more (between launches): fusing the pointwise kernels back in removes launches."""
    wait = ctx.evaluation.host_wait_fraction if ctx.evaluation is not None else None
    return wait is not None and wait >= HOST_BOUND


def _fuse_moves(ctx: RewriteContext, fam: dict, tunables: dict,
                hint: str | None) -> Iterator[Proposal]:
    rec = recognition_for(ctx.task)
    plan = next((p for p in rec.plans if p.family == fam.get("family") and p.op == fam.get("op")),
                None)
    if plan is None or not can_split(plan):
        return
    fused = bool(fam.get("fused", True))
    keep = {k: t.value for k, t in tunables.items() if not k.startswith("pw_")}
    try:
        code = render(plan, ctx.task.source, tunables=keep, fused=not fused)
    except TaskModuleError:
        return
    if fused:
        desc = f"run the pointwise ops of {plan.op} as kernels of their own"
    else:
        desc = f"fuse the pointwise ops into the {plan.op} kernel"
    params: dict[str, object] = {"fuse": not fused}
    if hint and not fused:
        params["hint"] = hint
    yield Proposal(CandidateSource(code, f"builtin:{desc}"), Move("fuse", desc, "cheap", params))


def allowed_precisions(task: Task, family: str = "gemm") -> tuple[str, ...]:
    """The precision modes the task's gemm (or conv) plan allows (``()`` when it has none)."""
    stages = (st for p in recognition_for(task).plans  # a chain's kernels (conv_then) too
              for st in (p.param("stages") if p.family == "chain" else (p,)))
    plan = next((p for p in stages if p.family == family), None)
    return tuple(plan.param("precision_modes", ())) if plan is not None else ()


#: The rendered module-level ``PRECISION = '...'`` declaration of a gemm candidate.
_PRECISION_LINE = re.compile(r"^PRECISION = .*$", re.MULTILINE)


def gemm_moves(ctx: RewriteContext, code: str, tunables: dict,
               family: str = "gemm") -> Iterator[Proposal]:
    """One-knob changes of a gemm (or conv) parent: hinted steps first, then every other
    allowed value of each knob; precision only to modes :func:`allowed_precisions` lists (none
    when the task is not recognised: the precision is then left alone)."""
    precisions = allowed_precisions(ctx.task, family)

    def allowed(name: str, value: object) -> bool:
        return name != "precision" or value in precisions

    def move(name: str, new: object, hint: str = "") -> Proposal:
        old = tunables[name].value
        desc = f"{family} {name} {old!r}->{new!r}" + (f" (profiler: {hint})" if hint else "")
        params: dict[str, object] = {"name": name, "from": old, "to": new, "family": family}
        if hint:
            params["hint"] = hint
        kind = "precision" if name == "precision" else "tunable"
        child = set_tunable(code, name, new)
        if name == "precision":  # keep the declaration the Evaluation records in step
            child = _PRECISION_LINE.sub(f"PRECISION = {new!r}", child, count=1)
            promote = tunables.get("promote")
            if (new == "3xtf32" and promote is not None and promote.value == 0
                    and PROMOTE_DEFAULT in promote.choices):
                # 3xTF32 is only fp32-accurate with promoted accumulators (gemm.py)
                child = set_tunable(child, "promote", PROMOTE_DEFAULT)
                params["promote"] = PROMOTE_DEFAULT
        return Proposal(CandidateSource(child, f"builtin:{desc}"),
                        Move(kind, desc, "cheap", params))

    for rule in hint_rules(ctx.findings, GEMM_HINT_RULES):
        for name, direction in rule.steps:
            t = tunables.get(name)
            new = _step(t.choices, t.value, direction) if t else None
            if new is not None and allowed(name, new):
                yield move(name, new, rule.key)
    for name in sorted(tunables):
        t = tunables[name]
        for value in t.choices:
            if value != t.value and allowed(name, value):
                yield move(name, value)
