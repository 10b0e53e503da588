"""Kernel families: the built-in rewriter's CuTe DSL templates (memory-bound work and GEMMs).

A task's reference forward is captured as a graph on the meta device
(:mod:`.capture`, canonical op names in :mod:`.ops`), composite ops are lowered to primitive
ones (:mod:`.lower`: norms, F.normalize, eval-mode batch norm, regression losses, einsum,
global pooling), and the graph is matched to a family (:mod:`.recognize`, :mod:`.matcher`,
:mod:`.reductions`, :mod:`.norms`, :mod:`.pooling`, :mod:`.gemm_match`) with the pointwise
ops it fuses before and after (:mod:`.plan`); a forward with several anchors becomes a chain
of family kernels (:mod:`.chains`). A :class:`~.plan.Plan` renders (:mod:`.render` and the
``render_*`` modules, templates in ``templates/*.py.tmpl``, pointwise code from
:mod:`.pointwise`, the task's constructor copied by :mod:`.taskmodule`) into one standalone
candidate file with TUNABLES, TUNABLE_CHOICES and a FAMILY literal. :mod:`.moves` gives the
built-in rewriter its initial family candidates and its strategy, fuse and profiler-hinted
moves.

Families (all in fp32 arithmetic, bf16 / fp16 / fp32 tensors, 128-bit accesses where the
layout and alignment allow):

* ``pointwise``: chains of elementwise ops (activations, comparisons, where / masked_fill,
  bool masks) over full tensors, per-column, per-row, per-channel vectors and scalars
  (strategies ``tile``, ``grid_stride``);
* ``row``: softmax, log-softmax, layer-norm, RMSNorm, cross-entropy, group norm, instance
  norm, and the reductions sum / mean / prod / amax / amin / argmax / argmin / var / std over
  trailing dims or every element (two deterministic passes), alone or mapped back over the
  row (L1 / L2 normalisation), one kernel class per op over a shared body
  (:mod:`.rowops`; strategies ``auto``, ``registers``, ``cluster``, ``looped``);
* ``strided``: the same reductions over a middle run of dims, x viewed (B, R, C) and R walked
  with coalesced loads (norms over the channel dim mapped back over it; where C is too narrow
  for 128-bit accesses, a sum, mean, amax or amin reads f rows of R as one row, then merges
  each column's f partials: knob ``s_fold``; argmax / argmin the same way, their (value,
  index) statistics merged by the split reductions' finish, off by default until run on a
  GPU);
* ``reduce_map``: a statistic over every element or two runs of dims, mapped back
  (x / ||x||_F, batch centring): the statistic, then a pointwise pass;
* ``batchnorm``: batch norm with batch statistics (Welford partials, a per-channel merge,
  a pointwise pass);
* ``pool``: max / average pooling over 1-3 spatial dims;
* ``scan``: cumsum, cumprod, reverse and exclusive (strategies ``auto``, ``looped``);
* ``gemm`` (:mod:`.gemm_match` recognises matmul / mm / bmm / addmm / linear / einsum with
  transposed operands, the pointwise epilogue, tril / triu, and a row reduction over N with
  the ops after it; :mod:`.gemm` renders): a warp-specialized Hopper GEMM (TMA producer,
  WGMMA consumers, persistent tile scheduler, clusters, epilogue through shared memory) in
  bf16 / fp16, TF32 or 3xTF32, knobs for tiles, cluster, stages, raster and swizzle, split-K
  and the store path;
* ``conv`` (:mod:`.conv_match` recognises one convolution, transposed or not, its geometry,
  the pointwise epilogue and the tails after it (:mod:`.conv_tails`: pooling, Group- /
  Instance- / BatchNorm, reductions over the spatial dims or the channels, softmax over the
  channels); :mod:`.conv` renders): an implicit GEMM on the gemm kernel with TMA im2col loads
  of the packed input (a strided transposed conv: one per output phase), or a direct kernel
  for depthwise / thin-group convs; each tail a kernel of its own with its pointwise ops.
* ``chain``: several of the above in one file, each kernel reading what the previous wrote.
"""

from cutegen.codegen.families.moves import family_moves, family_proposals, recognition_for
from cutegen.codegen.families.plan import NotCovered, Plan, Recognition
from cutegen.codegen.families.recognize import recognize, recognize_task
from cutegen.codegen.families.render import render

__all__ = ["NotCovered", "Plan", "Recognition", "family_moves", "family_proposals",
           "recognition_for", "recognize", "recognize_task", "render"]
