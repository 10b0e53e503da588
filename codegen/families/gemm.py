"""The ``gemm`` kernel family: a Hopper (sm_90a) warp-specialized, persistent WGMMA GEMM with a
fused epilogue, rendered from a :class:`~cutegen.codegen.families.plan.Plan`.

The kernel (``templates/gemm.py.tmpl``, class ``GemmKernel``) computes
``C[l] = epilogue(A[l] @ B[l])`` for A stored [M, K] ("k"-major) or [K, M] ("m"-major),
B stored [K, N] ("n"-major) or [N, K] ("k"-major, an ``nn.Linear`` weight), optionally
batched over a leading L dim:

* **Producer warp group**: one warp issues TMA loads of A and B tiles into a ``stages``-deep
  shared-memory ring (``cutlass.pipeline.PipelineTmaAsync``: mbarriers count TMA bytes in
  and consumer warps out). In a thread-block cluster of ``cluster_m x cluster_n`` CTAs each
  A tile is TMA-multicast along the cluster's N direction and each B tile along M.
* **Consumer warp groups** (two for 128-row tiles, one for 64): WGMMA from swizzled shared
  memory (``cute.nvgpu.warpgroup``), fp32 accumulators in registers, one WGMMA batch kept in
  flight while the previous stage is released.
* **Persistent scheduling**: one CTA per SM walks the (M, N, L) tiles in ``raster`` order
  ("m" / "n"), grouped ``swizzle`` clusters at a time for L2 reuse.
* **Epilogue**: the plan's epilogue chain (bias per column, per-row values, residual
  tensors, scalars, module attributes, activations; code from
  :func:`~cutegen.codegen.families.pointwise.chain_function`, applied to each fp32
  accumulator with its (row, column)), then ``epilogue="tma"`` (registers -> swizzled shared
  memory -> TMA store, which clips the ragged M / N edges) or ``"direct"`` (predicated stores
  from registers, used automatically when the output's rows are not 16-byte aligned).
* **Reductions** (``reduce`` in sum / mean / amax / logsumexp over N): the GEMM writes the
  epilogue's fp32 result and a second small CuTe kernel reduces each row.
* **Precisions**: bf16 / fp16 operands with fp32 accumulation; ``tf32`` (fp32 operands,
  both K-major, so an M- or N-major operand is first transposed by a CuTe pack kernel);
  ``3xtf32`` for fp32 tasks: a CuTe pack kernel writes each operand as its (hi, lo) pair
  interleaved per tile_k block of K (block j: the hi columns of its k, then the lo ones; K
  zero-padded to Kp, a multiple of tile_k (times split_k)), hi = the value rounded to tf32,
  lo = value - hi, and one TF32 GEMM over K' = 3 Kp reads block j as three k tiles, A's
  (hi, lo, hi) against B's (hi, hi, lo), so it sums A_hi B_hi + A_lo B_hi + A_hi B_lo (the
  dropped A_lo B_lo is ~2^-22). Stored as pairs, the packs hold two thirds of the bytes of
  the three slots (the part two slots share is fetched once from memory and again from L2):
  a skinny fp32 Linear (M = 128, a 32768 x 32768 weight) reads its packed weight, 2x the
  weight's bytes, rather than 3x. (The candidate's ``PAIRED_PARTS = False`` packs the three
  slots, to compare.)
  The DSL ships no TF32 WGMMA wrapper; the candidate defines one (``_MmaTF32Op``) on the
  DSL's SM90 MMA atom type.
* **Promotion** (``promote``, tf32 / 3xtf32): Hopper's WGMMA accumulator appears to add
  with truncation (NVIDIA/cutlass#729; DeepSeek-V3 and SageAttention2 measured it), and
  3xTF32 over one accumulator measured ~15x fp32's error on an H200 at 8192^3. So the
  consumers let the WGMMA accumulator sum only ``promote`` k tiles, then add it into a
  second fp32 register fragment with FADDs (round-to-nearest) and restart it (the next
  chunk's first WGMMA does not accumulate), as DeepGEMM does; the epilogue reads that
  fragment. 0 turns it off (bf16 / fp16 default).

M, N, K, L are run-time values: one compiled kernel serves every shape. M, N and K need not
be multiples of the tile (TMA zero-fills and clips). Operands whose rows are not 16-byte
aligned (or that are not contiguous) go through the pack kernel first.

Knobs (TUNABLES / TUNABLE_CHOICES; see :func:`gemm_knobs`): ``tile_m`` (64: one consumer
warp group, 128: two), ``tile_n``, ``tile_k``, ``cluster_m`` / ``cluster_n`` (TMA multicast
of B / A tiles inside the cluster), ``stages`` (shared-memory ring depth; 0: as many as
fit, an explicit value is clamped to that), ``raster`` and ``swizzle`` (tile order), ``epilogue`` ("tma" / "direct"),
``split_k`` (0, the default: chosen per call from the shape, 1 unless the output has tiles
for fewer than half the SMs, e.g. a skinny M, the one-row hidden shape of a Linear or a
small output of a long K, then up to 32 slices so the work about fills the GPU; 1: off;
2 / 4: K is cut into that many
slices computed as batches of the kernel into an fp32 workspace, then a CuTe kernel sums
them in a fixed order and applies the epilogue; ignored for bmm, torch.tril / triu and when
K does not split into 16-byte aligned slices; 3xtf32 pads K so each slice holds whole
interleaved blocks. Shorter slices also shorten each output's chain of fp32 additions: at
M = 1 a Linear's reference is cuBLAS's GEMV, whose tree-like sums the 1e-4 comparison
holds a single-slice 3xTF32 chain against), ``wave_split`` (True, the default: a product
whose tiles leave a ragged last wave, e.g. fp32 1024 x 8192 x 8192's 344 tiles on 132 SMs,
runs as two launches over its rows, the first whole waves as they are and the rest in K
slices, or, one row of tiles (a skinny fp32 Linear at M = 128), as one launch in K slices,
where the tile-time model of the template's ``_wave_plan`` says it saves 5% and 20 µs; not
for bmm, torch.tril / triu or an A that is a module's parameter; False: one launch),
``promote`` (k tiles per accumulator promotion, 0: off; fp32 tasks only, whose tile_n
choices stop at 192 so both fragments fit in registers) and
``precision`` (fp32 tasks: "3xtf32", plus "tf32" when the plan's ``precision_modes`` (or its
default) admit it; bf16 / fp16 tasks: their own precision only), ``fast_math`` (bf16 /
fp16 outputs whose epilogue has a transcendental, e.g. Swish: approximate ``exp`` / ``tanh``)
and ``block_stages`` (3xtf32 with pairs: a pipeline stage holds a tile_k block's hi and lo
tiles of both operands, each loaded once, for the block's three WGMMA groups; off by default
here, where the 128 x 192 tiles leave room for two such stages; the conv family's default).
"""

from __future__ import annotations

import textwrap

from cutegen.codegen.families.operands import Operands, attr_path, source, wrapped
from cutegen.codegen.families.plan import Leaf, Plan
from cutegen.codegen.families.pointwise import VPOW, chain_function, fast_math_applies
from cutegen.codegen.families.taskmodule import extract
from cutegen.codegen.families.template import model_class, render_template

_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16"}
_REDUCES = ("sum", "mean", "amax", "logsumexp")
#: k tiles (of K' = 3 Kp for 3xtf32) per promotion of the WGMMA accumulator into the FADD
#: fragment (tf32 / 3xtf32 only; 0: off). Default 4: 128 k' of the default tile_k 32, a
#: chunk of a few hundred products (bf16 / fp16 keep 0: their default 128 x 256 tile has no
#: registers for a second fragment).
PROMOTE_CHOICES = [0, 1, 2, 3, 4, 6, 8]
PROMOTE_DEFAULT = 4
#: 3xTF32 products whose main loop has at most this many k tiles promote after every k tile
#: (``promote`` 1) instead of every PROMOTE_DEFAULT. The evaluator's fallback for elements
#: past atol + rtol |ref| (inputs scaled by 1e3) admits a kernel only within 2x the rmse of
#: the task's own fp32 reference, whose error is small over a short K: KernelBench L1 86's
#: 1x1 conv (64 channels, 6 k tiles) had 2.4x with promote 4 and was wrong whenever its
#: "large" inputs were drawn; tools/accuracy_probe.py on the H200 (2026-12-04): rmse against
#: float64 4.7e-8 with promote 1, 1.2e-7 with 4, 2.0e-7 with 0. The truncating-accumulator
#: model of test_gemm_compile.py (1.3x pessimistic there: 3.1x for 4) puts promote 4 at 2.0x
#: fp32's rmse at 12 k tiles, 1.5x at 24, 1.1x at 48; promote 1 stays below 1x from 9 k
#: tiles on. A short loop pays little for the extra promotions.
SHORT_K_TILES = 24


def promote_for(precision: str, k_tiles: int | None) -> int:
    """The default ``promote``: 0 unless 3xTF32; 1 for a main loop of at most
    SHORT_K_TILES k tiles (``k_tiles`` at the main shape; None: unknown), else
    PROMOTE_DEFAULT."""
    if precision != "3xtf32":
        return 0
    return 1 if k_tiles is not None and k_tiles <= SHORT_K_TILES else PROMOTE_DEFAULT


def _extents(plan: Plan) -> tuple[int, int] | None:
    """(N, K) of the product at the task's main shape (B's output columns, A's columns or,
    stored transposed, its rows); None when the plan does not hold both operands' shapes."""
    sa = tuple(plan.leaf(plan.param("a")).shape or ())
    sb = tuple(plan.leaf(plan.param("b")).shape or ())
    if len(sa) < 2 or len(sb) < 2:
        return None
    n = sb[-1] if plan.param("b_major", "n") == "n" else sb[-2]
    k = sa[-1] if plan.param("a_major", "k") == "k" else sa[-2]
    return int(n), int(k)


#: fp32 (tf32 / 3xtf32) tile_n values: a wider tile's two accumulator fragments (WGMMA and
#: promoted) do not fit in the consumers' 232 registers.
FP32_TILE_N = [64, 128, 192]


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def fp32_tile_n(n: int | None) -> int:
    """The default fp32 tile_n for an output N columns wide: 192 (measured ahead of 128 at
    4096^3 and 8192^3, where its ragged last column of tiles costs under 5%), or 128 where
    192's tiles would pad N a fifth more than 128's: a 256-wide output (KernelBench L1 6)
    is two 192-wide tiles, the second two thirds zeros, against two full 128-wide ones."""
    if n is None or n <= 0:
        return 192
    return 128 if _round_up(n, 128) * 6 <= _round_up(n, 192) * 5 else 192


def _precision(plan: Plan) -> str:
    return plan.param("precision_default") or {"float16": "fp16"}.get(
        plan.leaf(plan.param("a")).dtype, "bf16")


def gemm_knobs(plan: Plan) -> tuple[dict, dict]:
    """Default TUNABLES and TUNABLE_CHOICES of the file ``plan`` renders to.

    Every value of every knob compiles on its own with the others at their defaults;
    ``stages`` 0 means as many as fit in shared memory with the chosen tiles, and a larger
    explicit value is clamped to that.
    """
    precision = _precision(plan)
    fp32 = precision in ("tf32", "3xtf32")
    # fp32 (3xTF32) tile_n 192: on an H200 (tools/bench_gemm.py, 2026-11-30) 1.94x eager
    # fp32 at 4096^3 and 2.28x at 8192^3, against 1.35x / 1.37x with 128, at the same error
    # (fp32_tile_n: 128 where 192 would pad a narrow output by much more)
    tile_k = 64 if not fp32 else 32
    n, k = _extents(plan) or (None, None)
    tile_n = 256 if not fp32 else fp32_tile_n(n)
    values = {"tile_m": 128, "tile_n": tile_n, "tile_k": tile_k,
              "cluster_m": 1, "cluster_n": 1, "stages": 0, "raster": "m",
              "swizzle": 1, "epilogue": "tma", "split_k": 0, "wave_split": True,
              "promote": promote_for(precision, None if k is None else 3 * -(-k // tile_k)),
              "precision": precision}
    choices = {"tile_m": [64, 128], "tile_n": [64, 128, 192, 256] if not fp32 else FP32_TILE_N,
               "tile_k": [32, 64, 128] if not fp32 else [16, 32, 64],
               "cluster_m": [1, 2], "cluster_n": [1, 2], "stages": [0, 2, 3, 4, 6],
               "raster": ["m", "n"], "swizzle": [1, 2, 4, 8], "epilogue": ["tma", "direct"],
               "split_k": [0, 1, 2, 4], "wave_split": [True, False],
               "promote": PROMOTE_CHOICES if fp32 else [0],
               "precision": ["3xtf32", "tf32"] if precision == "tf32" else [precision]}
    modes = plan.param("precision_modes")  # what the task's tolerance admits, when known
    if modes:
        choices["precision"] = [m for m in modes if (m in ("tf32", "3xtf32")) == fp32] or [
            precision]
        if precision not in choices["precision"]:
            choices["precision"].append(precision)
    if fast_math_applies(plan.out_dtype, plan.epilogue):  # approximate epilogue transcendentals
        values["fast_math"], choices["fast_math"] = False, [False, True]
    if precision == "3xtf32":  # a stage holds a block's hi and lo tiles: off, as measured
        # at the default 128 x 192 tiles (two such stages fit: 0.73x on gemm_fp32 8192^3,
        # H100; the conv family's blocked_pays)
        values["block_stages"], choices["block_stages"] = False, [False, True]
    return values, choices


def _doc(plan: Plan, precision: str) -> str:
    body = (f"Generated by cutegen's built-in 'gemm' kernel family: {plan.description}; "
            f"precision {precision}. A persistent, warp-specialized Hopper GEMM (TMA loads "
            "into a multi-stage shared-memory pipeline, WGMMA consumers, fused epilogue on the "
            "fp32 accumulators, TMA or direct stores); see the GemmKernel class.")
    return "\n".join(textwrap.wrap(body.replace('"', "'"), 92))


def _kept(lf: Leaf) -> str:
    """``(module, parameter)`` for an operand that is a module's parameter (its packing is kept
    across calls: ``_pack_kept`` in the template), else ``None``."""
    if lf.source != "param":
        return "None"
    owner = attr_path(lf.ref.rsplit(".", 1)[0]) if "." in lf.ref else "self"
    return f"({owner}, {attr_path(lf.ref)})"


def _forward(plan: Plan, ops: Operands, has_epilogue: bool) -> str:
    a_major = plan.param("a_major", "k")
    b_major = plan.param("b_major", "n")
    batched = bool(plan.param("batched", False))
    reduce = plan.param("reduce", "") or ""
    dt = _DTYPES[plan.out_dtype]
    lines = [f"a = {source(plan.leaf(plan.param('a')))}",
             f"b = {source(plan.leaf(plan.param('b')))}"]
    if batched:  # the batch dims (one, or [B, H] of attention) fold into L
        lines += ["lead = tuple(a.shape[:-2])",
                  "a = a.reshape(-1, a.shape[-2], a.shape[-1])",
                  "b = b.reshape(-1, b.shape[-2], b.shape[-1])",
                  "L = a.shape[0]",
                  f"M = a.shape[{-2 if a_major == 'k' else -1}]",
                  f"N = b.shape[{-1 if b_major == 'n' else -2}]",
                  "mshape = (*lead, M, N)"]
    else:
        if a_major == "k":  # leading dims of A (x of a Linear) fold into M
            lines += ["lead = tuple(a.shape[:-1])", "a = a.reshape(-1, a.shape[-1])",
                      "M = a.shape[0]"]
        else:
            lines += ["lead = (a.shape[-1],)", "M = a.shape[-1]"]
        lines += [f"N = b.shape[{-1 if b_major == 'n' else -2}]", "L = 1",
                  "mshape = (*lead, N)"]
    lines += ["n_rows = L * M", "n_cols = N"]
    if reduce:
        keep = " + (1,)" if plan.param("reduce_keepdim") else ""
        lines += [f"out = _empty(tuple(mshape[:-1]){keep}, dtype={dt}, device=a.device)",
                  "if out.numel() == 0:", "    return out",
                  "res = _empty((n_rows, N), dtype=torch.float32, device=a.device)"]
        target = "res"
    else:
        lines += [f"out = _empty(mshape, dtype={dt}, device=a.device)",
                  "if out.numel() == 0:", "    return out"]
        target = "out.view(L, M, N)" if batched else "out"
    epi = "_epilogue" if has_epilogue else "None"
    a_kind = "a_k" if a_major == "k" else "a_m"
    b_kind = "b_k" if b_major == "k" else "b_n"
    tri = plan.param("tri")
    kept = [_kept(plan.leaf(plan.param(n))) for n in ("a", "b")]
    lines.append(f"_gemm_launch(a, b, {a_kind!r}, {b_kind!r}, {batched}, {target}, "
                 f"TUNABLES['precision'], {epi}, [{', '.join(ops.vec)}], {tuple(ops.full)!r}, "
                 f"[{', '.join(ops.rows)}], {ops.kinds()}, "
                 f"[{', '.join(ops.scalars)}]" + (f", tri={tuple(tri)!r}" if tri else "")
                 + (f", kept=({kept[0]}, {kept[1]}))" if kept != ["None", "None"] else ")"))
    if reduce:
        if reduce not in _REDUCES:
            raise ValueError(f"gemm: unknown reduce {reduce!r}")
        post = plan.param("post")
        extra = ""
        if post is not None:
            pops = Operands()
            for name in post.leaves():
                pops.add(plan.leaf(name), source(plan.leaf(name)))
            extra = f", _post, [{', '.join(pops.scalars)}]"
        lines.append(f"_gemm_row_reduce(res, out.view(n_rows), {reduce!r}{extra})")
    lines.append("return out")
    return "\n".join(lines)


def gemm_parts(plan: Plan, precision: str) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a ``gemm`` plan."""
    ops = Operands()
    for name in plan.epilogue.leaves():
        ops.add(plan.leaf(name), wrapped(plan.leaf(name), shape="mshape"))
    has_epilogue = not (plan.epilogue.empty and plan.epilogue.result == "%y")
    funcs: list[str] = []
    if has_epilogue:
        funcs.append(chain_function("_epilogue", plan.epilogue, ops.access, epilogue=True,
                                    doc="The fused epilogue, applied to each fp32 accumulator "
                                        "y (x is y too)."))
    post = plan.param("post")
    if post is not None:
        pops = Operands()
        for name in post.leaves():
            pops.add(plan.leaf(name), source(plan.leaf(name)))
        funcs.append(chain_function("_post", post, pops.access, epilogue=True,
                                    doc="The ops after the row reduction, on each row's value."))
    body = [render_template("gemm", {"PRECISION": repr(precision)}, {})]
    return funcs, body, _forward(plan, ops, has_epilogue)


def render_gemm(plan: Plan, task_source: str, *, tunables: dict | None = None) -> str:
    """The candidate file for a ``gemm`` plan (see the module docstring).

    Raises:
        TaskModuleError: Model's constructor cannot be copied into the candidate.
    """
    values, choices = gemm_knobs(plan)
    values.update(tunables or {})
    precision = values["precision"]
    tm = extract(task_source)
    family = {"family": "gemm", "op": "matmul", "fused": True}
    head = render_template("head", {
        "DOC": _doc(plan, precision), "TASK_IMPORTS": tm.imports + "\n",
        "TUNABLES": repr(values), "TUNABLE_CHOICES": repr(choices), "FAMILY": repr(family),
    }, {})
    funcs, body, fwd = gemm_parts(plan, precision)
    parts = [head, *body, "\n" + (tm.constants + "\n\n" if tm.constants else "\n")
             + tm.class_source, VPOW, *funcs]
    args = ", ".join(plan.forward_args)
    parts.append(model_class(args, fwd))
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"
