"""Kernel families: the built-in rewriter's CuTe DSL templates (memory-bound work and GEMMs).

A task's reference forward is captured as a graph on the meta device
(:mod:`.capture`, canonical op names in :mod:`.ops`) and matched to a family
(:mod:`.recognize`, :mod:`.matcher`) with the pointwise ops it fuses before and after
(:mod:`.plan`). A :class:`~.plan.Plan` renders (:mod:`.render`, templates in
``templates/*.py.tmpl``, pointwise code from :mod:`.pointwise`, the task's constructor
copied by :mod:`.taskmodule`) into one standalone candidate file with TUNABLES,
TUNABLE_CHOICES and a FAMILY literal. :mod:`.moves` gives the built-in rewriter its
initial family candidates and its strategy, fuse and profiler-hinted moves.

Families (all in fp32 arithmetic, bf16 / fp16 / fp32 tensors, 128-bit accesses where the
row length and alignment allow):

* ``pointwise``: chains of elementwise ops over full tensors, per-column / per-row vectors
  and scalars (strategies ``tile``, ``grid_stride``);
* ``row``: softmax, log-softmax, layer-norm, RMSNorm, cross-entropy (mean / sum / none,
  ignore_index), sum, mean, amax, amin, argmax, argmin along the last dim(s) (strategies
  ``auto``, ``registers``, ``cluster`` — a row over a thread-block cluster, statistics
  merged through distributed shared memory —, ``looped``);
* ``scan``: cumsum, cumprod, reverse and exclusive (strategies ``auto``, ``looped``);
* ``gemm`` (:mod:`.gemm_match` recognises matmul / mm / bmm / addmm / linear with transposed
  operands, the pointwise epilogue and a row reduction over N; :mod:`.gemm` renders): a
  warp-specialized Hopper GEMM (TMA producer, WGMMA consumers, persistent tile scheduler,
  clusters, epilogue through shared memory) in bf16 / fp16, TF32 or 3xTF32, knobs for tiles,
  cluster, stages, raster and swizzle, split-K and the store path;
* ``conv`` (:mod:`.conv_match` recognises one convolution, transposed or not, its geometry,
  the pointwise epilogue and the tails after it (:mod:`.conv_tails`: pooling, Group- /
  Instance- / BatchNorm, reductions over the spatial dims or the channels, softmax over the
  channels); :mod:`.conv` renders): an implicit GEMM on the gemm kernel with TMA im2col loads
  of the packed input (a strided transposed conv: one per output phase), or a direct kernel
  for depthwise / thin-group convs; each tail a kernel of its own with its pointwise ops.
"""

from cutegen.codegen.families.moves import family_moves, family_proposals, recognition_for
from cutegen.codegen.families.plan import NotCovered, Plan, Recognition
from cutegen.codegen.families.recognize import recognize, recognize_task
from cutegen.codegen.families.render import render

__all__ = ["NotCovered", "Plan", "Recognition", "family_moves", "family_proposals",
           "recognition_for", "recognize", "recognize_task", "render"]
