"""Canonical op names for captured calls, and what each canonical op is.

:func:`canonical_call` names one ``torch.fx`` call node: the torch function, the tensor
method and the ``nn`` module forms of an op share one name (``softmax`` for
``torch.softmax``, ``F.softmax``, ``x.softmax`` and ``nn.Softmax``), and its arguments are
bound to parameter names (positional order of the ``torch.*`` / ``Tensor`` form, or of the
functional form for ``F.*``). Matrix products (``MATMUL_OPS``: ``matmul`` for
``torch.matmul`` and ``@``, ``mm``, ``bmm``, ``addmm``, ``linear`` for ``F.linear`` and
``nn.Linear``) keep their operands as tensor arguments; every transpose form (``.t()``,
``.T``, ``.mT``, ``transpose`` / ``swapaxes``, a ``permute`` that swaps the last two dims)
is ``transpose`` with ``consts["dims"]``: the two swapped dims, or "T" for ``.T`` (all dims
reversed). Module parameters (``nn.LayerNorm``'s weight) are reported as
``{"path", "shape", "dtype"}`` constants, so the recognizer can read them as leaves.
"""

from __future__ import annotations

import operator
from typing import Any

#: Ops that reduce or normalise along a dimension (the row family).
ROW_OPS = frozenset({"softmax", "log_softmax", "layer_norm", "rms_norm", "cross_entropy", "sum",
                     "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std",
                     "prod", "logsumexp", "group_norm", "instance_norm", "batch_norm"})
#: Pooling windows over the spatial dims of (N, C, *spatial) (the pool family).
POOL_OPS = frozenset({f"{kind}_pool{d}d" for kind in ("max", "avg") for d in (1, 2, 3)})
#: Reductions over any dims (``norm`` / ``vector_norm`` / ``normalize`` are lowered to these by
#: :mod:`~cutegen.codegen.families.lower` first).
REDUCE_OPS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var",
                        "std", "prod", "logsumexp"})
#: Ops that only change a tensor's shape (a view of the same values in the same order).
VIEW_OPS = frozenset({"view"})
#: Scans along a dimension (the scan family).
SCAN_OPS = frozenset({"cumsum", "cumprod"})
#: Matrix products (the gemm family): ``matmul`` (``torch.matmul``, ``@``), ``mm``, ``bmm``,
#: ``linear`` (``F.linear``, ``nn.Linear``) and ``addmm``.
MATMUL_OPS = frozenset({"matmul", "mm", "bmm", "linear", "addmm"})
#: Convolutions (the conv family): ``conv`` for ``nn.Conv1d / 2d / 3d`` and ``F.conv1d / 2d /
#: 3d``, ``conv_transpose`` for ``nn.ConvTranspose1d / 2d / 3d`` and ``F.conv_transpose*``
#: (the spatial rank is the weight's rank - 2). Module forms report ``weight`` / ``bias`` as
#: parameter constants and their geometry (``stride``, ``padding``, ``dilation``, ``groups``,
#: ``output_padding``, ``padding_mode``) as constants, like the functional forms' arguments.
CONV_OPS = frozenset({"conv", "conv_transpose"})
#: Ops the conv family runs as a second kernel after a convolution (its "tail"): pooling
#: (``max_pool`` / ``avg_pool``: ``nn.MaxPoolNd`` / ``nn.AvgPoolNd`` and ``F.*``;
#: ``adaptive_avg_pool``: ``nn.AdaptiveAvgPoolNd`` / ``F.adaptive_avg_pool*``) and
#: ``group_norm`` (``nn.GroupNorm``, ``F.group_norm``), ``instance_norm`` (``nn.InstanceNormNd``,
#: ``F.instance_norm``) and ``batch_norm`` (``nn.BatchNormNd`` with its ``training`` flag,
#: ``F.batch_norm``).
CONV_TAIL_OPS = frozenset({"max_pool", "avg_pool", "adaptive_avg_pool", "group_norm",
                           "instance_norm", "batch_norm"})
#: Shape-only ops a conv family result may end with (``squeeze`` / ``unsqueeze`` /
#: ``flatten``, torch and Tensor forms): views of the contiguous result, applied as they are.
RESHAPE_OPS = frozenset({"squeeze", "unsqueeze", "flatten"})
#: Elementwise ops the pointwise code generator knows (see ``pointwise.py``).
POINTWISE_OPS = frozenset({
    "add", "sub", "mul", "div", "neg", "pow", "maximum", "minimum", "relu", "relu6", "gelu",
    "silu", "sigmoid", "tanh", "exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt", "abs",
    "erf", "square", "reciprocal", "clamp", "leaky_relu", "elu", "softplus", "hardtanh",
    "hardsigmoid", "hardswish", "mish", "cast", "identity", "selu", "celu", "softsign",
    "logsigmoid", "tanhshrink", "hardshrink", "softshrink", "threshold", "sign", "where",
    "gt", "lt", "ge", "le", "eq", "ne", "masked_fill",
})
#: Comparisons: their value is 1.0 where true, 0.0 where false (a mask a chain can use).
COMPARE_OPS = frozenset({"gt", "lt", "ge", "le", "eq", "ne"})

#: Positional parameter names per canonical op (the ``torch.*`` / ``Tensor`` form).
_PARAMS: dict[str, tuple[str, ...]] = {
    "softmax": ("input", "dim", "dtype"), "log_softmax": ("input", "dim", "dtype"),
    "layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
    "rms_norm": ("input", "normalized_shape", "weight", "eps"),
    "cross_entropy": ("input", "target", "weight", "size_average", "ignore_index", "reduce",
                      "reduction", "label_smoothing"),
    "sum": ("input", "dim", "keepdim", "dtype"), "mean": ("input", "dim", "keepdim", "dtype"),
    "prod": ("input", "dim", "keepdim", "dtype"),
    "amax": ("input", "dim", "keepdim"), "amin": ("input", "dim", "keepdim"),
    "max": ("input", "dim", "keepdim"), "min": ("input", "dim", "keepdim"),
    "argmax": ("input", "dim", "keepdim"), "argmin": ("input", "dim", "keepdim"),
    "cumsum": ("input", "dim", "dtype"), "cumprod": ("input", "dim", "dtype"),
    "flip": ("input", "dims"), "getitem": ("input", "index"),
    "add": ("input", "other", "alpha"), "sub": ("input", "other", "alpha"),
    "mul": ("input", "other"), "div": ("input", "other", "rounding_mode"),
    "pow": ("input", "exponent"), "maximum": ("input", "other"), "minimum": ("input", "other"),
    "clamp": ("input", "min", "max"), "gelu": ("input", "approximate"),
    "clamp_min": ("input", "min"), "clamp_max": ("input", "max"),
    "dropout": ("input", "p", "training", "inplace"),
    "leaky_relu": ("input", "negative_slope", "inplace"), "elu": ("input", "alpha", "inplace"),
    "softplus": ("input", "beta", "threshold"), "hardtanh": ("input", "min_val", "max_val"),
    "cast": ("input", "dtype"), "identity": ("input",), "view": ("input", "shape"),
    "where": ("condition", "input", "other"), "masked_fill": ("input", "mask", "value"),
    "gt": ("input", "other"), "lt": ("input", "other"), "ge": ("input", "other"),
    "le": ("input", "other"), "eq": ("input", "other"), "ne": ("input", "other"),
    "celu": ("input", "alpha"), "hardshrink": ("input", "lambd"),
    "tril": ("input", "diagonal"), "triu": ("input", "diagonal"), "diag": ("input", "diagonal"),
    "einsum": ("equation", "a", "b"),
    "sdpa": ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
             "enable_gqa"),
    **{f"max_pool{d}d": ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                         "return_indices") for d in (1, 2, 3)},
    **{f"avg_pool{d}d": ("input", "kernel_size", "stride", "padding", "ceil_mode",
                         "count_include_pad", "divisor_override") for d in (1, 2, 3)},
    **{f"adaptive_{k}_pool{d}d": ("input", "output_size", "return_indices")
       for k in ("avg", "max") for d in (1, 2, 3)},
    "smooth_l1_loss": ("input", "target", "size_average", "reduce", "reduction", "beta"),
    "huber_loss": ("input", "target", "reduction", "delta"),
    "mse_loss": ("input", "target", "size_average", "reduce", "reduction"),
    "l1_loss": ("input", "target", "size_average", "reduce", "reduction"),
    "kl_div": ("input", "target", "size_average", "reduce", "reduction", "log_target"),
    "cosine_similarity": ("x1", "x2", "dim", "eps"),
    "triplet_margin_loss": ("anchor", "positive", "negative", "margin", "p", "eps", "swap",
                            "size_average", "reduce", "reduction"),
    "softshrink": ("input", "lambd"), "threshold": ("input", "threshold", "value"),
    "matmul": ("input", "other"), "mm": ("input", "other"), "bmm": ("input", "other"),
    "linear": ("input", "weight", "bias"), "addmm": ("input", "mat1", "mat2", "beta", "alpha"),
    "transpose": ("input", "dim0", "dim1"), "logsumexp": ("input", "dim", "keepdim"),
    "var": ("input", "dim", "unbiased", "keepdim"), "std": ("input", "dim", "unbiased", "keepdim"),
    "norm": ("input", "p", "dim", "keepdim", "out", "dtype"),
    "vector_norm": ("input", "ord", "dim", "keepdim"),
    "normalize": ("input", "p", "dim", "eps"),
    "group_norm": ("input", "num_groups", "weight", "bias", "eps"),
    "instance_norm": ("input", "running_mean", "running_var", "weight", "bias",
                      "use_input_stats", "momentum", "eps"),
    "batch_norm": ("input", "running_mean", "running_var", "weight", "bias", "training",
                   "momentum", "eps"),
    # convolutions (CONV_OPS): the functional forms' positional order
    "conv": ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
    "conv_transpose": ("input", "weight", "bias", "stride", "padding", "output_padding",
                       "groups", "dilation"),
}
#: Functional (``F.*``) forms whose positional order differs from the torch form.
_F_PARAMS = {"softmax": ("input", "dim", "_stacklevel", "dtype"),
             "log_softmax": ("input", "dim", "_stacklevel", "dtype")}

_UNARY = ("relu", "sigmoid", "tanh", "exp", "exp2", "log", "log1p", "expm1", "sqrt", "rsqrt",
          "abs", "neg", "erf", "square", "reciprocal", "selu", "sign")
#: torch's other spellings of the arithmetic ops (``torch.multiply`` is ``torch.mul``, ...).
_TORCH_ALIASES = {"multiply": "mul", "subtract": "sub", "divide": "div", "true_divide": "div",
                  "negative": "neg", "absolute": "abs", "clip": "clamp"}
_METHOD_ALIASES = {**_TORCH_ALIASES, "div_": "div",
                   "masked_fill": "masked_fill", "where": "where", "greater": "gt",
                   "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne",
                   "contiguous": "identity", "clone": "identity", "detach": "identity",
                   "float": "cast", "half": "cast", "bfloat16": "cast", "double": "cast",
                   "to": "cast", "type": "cast", "view": "view", "reshape": "view",
                   "max": "max", "min": "min", "t": "transpose", "swapaxes": "transpose",
                   "swapdims": "transpose", "unsqueeze": "view", "squeeze": "view",
                   "expand": "view", "expand_as": "view", "flatten": "view", "view_as": "view",
                   "reshape_as": "view", "norm": "norm"}
_CAST_DTYPE = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64"}


def _function_table() -> dict[Any, tuple[str, bool]]:
    """callable -> (canonical op, is a functional ``F.*`` form)."""
    import torch
    import torch.nn.functional as F

    table: dict[Any, tuple[str, bool]] = {
        operator.add: ("add", False), operator.sub: ("sub", False),
        operator.mul: ("mul", False), operator.truediv: ("div", False),
        operator.neg: ("neg", False), operator.pow: ("pow", False),
        operator.getitem: ("getitem", False),
        torch.true_divide: ("div", False), torch.clip: ("clamp", False),
        torch.negative: ("neg", False), F.relu6: ("relu6", True),
        F.layer_norm: ("layer_norm", True), F.cross_entropy: ("cross_entropy", True),
        F.softmax: ("softmax", True), F.log_softmax: ("log_softmax", True),
        F.silu: ("silu", True), F.mish: ("mish", True), F.hardswish: ("hardswish", True),
        F.hardsigmoid: ("hardsigmoid", True), F.leaky_relu: ("leaky_relu", True),
        F.elu: ("elu", True), F.softplus: ("softplus", True), F.hardtanh: ("hardtanh", True),
        F.gelu: ("gelu", True), F.relu: ("relu", True), F.sigmoid: ("sigmoid", True),
        F.tanh: ("tanh", True), F.linear: ("linear", True), F.dropout: ("dropout", True),
        operator.matmul: ("matmul", False), torch.t: ("transpose", False),
        operator.gt: ("gt", False), operator.lt: ("lt", False), operator.ge: ("ge", False),
        operator.le: ("le", False), operator.eq: ("eq", False), operator.ne: ("ne", False),
        F.selu: ("selu", True), F.celu: ("celu", True), F.softsign: ("softsign", True),
        F.logsigmoid: ("logsigmoid", True), F.tanhshrink: ("tanhshrink", True),
        F.hardshrink: ("hardshrink", True), F.softshrink: ("softshrink", True),
        F.threshold: ("threshold", True), F.smooth_l1_loss: ("smooth_l1_loss", True),
        F.huber_loss: ("huber_loss", True), F.mse_loss: ("mse_loss", True),
        F.l1_loss: ("l1_loss", True), F.kl_div: ("kl_div", True),
        F.cosine_similarity: ("cosine_similarity", True),
        F.scaled_dot_product_attention: ("sdpa", True),
        F.triplet_margin_loss: ("triplet_margin_loss", True),
        **{getattr(F, f"{k}_pool{d}d"): (f"{k}_pool{d}d", True) for k in ("max", "avg")
           for d in (1, 2, 3)},
        **{getattr(F, f"adaptive_{k}_pool{d}d"): (f"adaptive_{k}_pool{d}d", True)
           for k in ("max", "avg") for d in (1, 2, 3)},
        F.normalize: ("normalize", True), F.group_norm: ("group_norm", True),
        F.instance_norm: ("instance_norm", True), F.batch_norm: ("batch_norm", True),
        torch.norm: ("norm", False), torch.linalg.vector_norm: ("vector_norm", False),
        torch.unsqueeze: ("view", False), torch.squeeze: ("view", False),
        torch.flatten: ("view", False), torch.reshape: ("view", False),
    }
    if hasattr(F, "rms_norm"):
        table[F.rms_norm] = ("rms_norm", True)
    for d in (1, 2, 3):  # convolutions (F.conv2d is torch.conv2d)
        table[getattr(torch, f"conv{d}d")] = ("conv", False)
        table[getattr(torch, f"conv_transpose{d}d")] = ("conv_transpose", False)
    for name in ("softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "mean", "amax",
                 "amin", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "flip", "add",
                 "sub", "mul", "div", "pow", "maximum", "minimum", "clamp", "matmul", "mm",
                 "bmm", "addmm", "transpose", "swapaxes", "swapdims", "logsumexp", "var", "std",
                 "prod", "where", "gt", "lt", "ge", "le", "eq", "ne", "greater", "less",
                 "greater_equal",
                 "less_equal", "not_equal", "selu", "celu", "tril", "triu", "einsum",
                 "clamp_min", "clamp_max", "diag", *_UNARY, *_TORCH_ALIASES):
        fn = getattr(torch, name, None)
        if fn is not None:
            table.setdefault(fn, ({"swapaxes": "transpose", "swapdims": "transpose",
                                   "greater": "gt", "less": "lt", "greater_equal": "ge",
                                   "less_equal": "le", "not_equal": "ne",
                                   **_TORCH_ALIASES}.get(name, name), False))
    for name in ("gelu", "silu", "elu", "softplus", "hardtanh", "leaky_relu", "hardswish",
                 "hardsigmoid", "mish", "relu6", "softshrink", "hardshrink", "log_sigmoid",
                 "celu"):
        fn = getattr(torch._C._nn, name, None)  # what F.gelu & co. really are
        if fn is not None:
            table.setdefault(fn, ({"log_sigmoid": "logsigmoid"}.get(name, name), True))
    for name in ("selu", "celu", "threshold"):
        fn = getattr(torch, name, None)  # torch.selu & co.: F.selu calls these
        if fn is not None:
            table.setdefault(fn, (name, False))
    return table


#: In the name of a random op (training-mode dropout): recognition's refusal of it says that
#: no rewriter can help (``matcher.NotCoveredError``).
RANDOM_MARK = "whose output is random"


def _random_dropout(what: str) -> str:
    """How a dropout that drops something is named in the refusal: its output is random."""
    return f"{what} in training mode, {RANDOM_MARK} (a fresh mask each call)"


def _module_call(mod: Any) -> tuple[str, dict[str, Any]]:
    """(canonical op, constants) for an ``nn`` leaf module; ("?", {}) when unknown."""
    import torch.nn as nn

    def param(p: Any, path: str) -> Any:
        if p is None:
            return None
        return {"path": path, "shape": [int(s) for s in p.shape], "dtype": str(p.dtype)[6:]}

    simple = {nn.ReLU: "relu", nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh",
              nn.ReLU6: "relu6", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid",
              nn.Mish: "mish", nn.Identity: "identity", nn.SELU: "selu",
              nn.Softsign: "softsign", nn.LogSigmoid: "logsigmoid", nn.Tanhshrink: "tanhshrink"}
    for cls, name in simple.items():
        if type(mod) is cls:
            return name, {}
    if isinstance(mod, (nn.Softmax, nn.LogSoftmax)):
        return ("softmax" if isinstance(mod, nn.Softmax) else "log_softmax"), {"dim": mod.dim}
    if isinstance(mod, nn.GELU):
        return "gelu", {"approximate": mod.approximate}
    if isinstance(mod, nn.LeakyReLU):
        return "leaky_relu", {"negative_slope": mod.negative_slope}
    if isinstance(mod, nn.ELU):
        return "elu", {"alpha": mod.alpha}
    if isinstance(mod, nn.Softplus):
        return "softplus", {"beta": mod.beta, "threshold": mod.threshold}
    if isinstance(mod, nn.CELU):
        return "celu", {"alpha": mod.alpha}
    if isinstance(mod, (nn.Hardshrink, nn.Softshrink)):
        return ("hardshrink" if isinstance(mod, nn.Hardshrink) else "softshrink"), {
            "lambd": mod.lambd}
    if isinstance(mod, nn.Threshold):
        return "threshold", {"threshold": mod.threshold, "value": mod.value}
    if isinstance(mod, nn.Hardtanh):
        return "hardtanh", {"min_val": mod.min_val, "max_val": mod.max_val}
    if isinstance(mod, nn.Linear):
        return "linear", {"weight": param(mod.weight, "weight"), "bias": param(mod.bias, "bias")}
    if isinstance(mod, nn.Dropout):
        return ("identity", {}) if mod.p == 0 or not mod.training else ("?", {})
    if isinstance(mod, nn.LayerNorm):
        return "layer_norm", {"normalized_shape": list(mod.normalized_shape), "eps": mod.eps,
                              "weight": param(mod.weight, "weight"),
                              "bias": param(mod.bias, "bias")}
    if hasattr(nn, "RMSNorm") and isinstance(mod, nn.RMSNorm):
        return "rms_norm", {"normalized_shape": list(mod.normalized_shape), "eps": mod.eps,
                            "weight": param(mod.weight, "weight")}
    conv = _conv_module(mod, param)
    if conv is not None:
        return conv
    if isinstance(mod, nn.GroupNorm):
        return "group_norm", {"num_groups": mod.num_groups, "eps": mod.eps,
                              "weight": param(mod.weight, "weight"),
                              "bias": param(mod.bias, "bias")}
    norm_base = getattr(nn.modules, "batchnorm", None)
    if isinstance(mod, nn.modules.instancenorm._InstanceNorm):
        stats = mod.training or not mod.track_running_stats
        return "instance_norm", {"eps": mod.eps, "use_input_stats": stats,
                                 "momentum": mod.momentum,
                                 "weight": param(mod.weight, "weight"),
                                 "bias": param(mod.bias, "bias"),
                                 "running_mean": param(mod.running_mean, "running_mean"),
                                 "running_var": param(mod.running_var, "running_var")}
    if norm_base is not None and isinstance(mod, norm_base._BatchNorm):
        batch_stats = mod.training or mod.running_mean is None
        return "batch_norm", {"eps": mod.eps, "training": batch_stats, "momentum": mod.momentum,
                              "weight": param(mod.weight, "weight"),
                              "bias": param(mod.bias, "bias"),
                              "running_mean": param(mod.running_mean, "running_mean"),
                              "running_var": param(mod.running_var, "running_var")}
    for d in (1, 2, 3):
        if type(mod) is getattr(nn, f"MaxPool{d}d"):
            return f"max_pool{d}d", {"kernel_size": mod.kernel_size, "stride": mod.stride,
                                     "padding": mod.padding, "dilation": mod.dilation,
                                     "ceil_mode": mod.ceil_mode,
                                     "return_indices": mod.return_indices}
        if type(mod) is getattr(nn, f"AvgPool{d}d"):
            return f"avg_pool{d}d", {"kernel_size": mod.kernel_size, "stride": mod.stride,
                                     "padding": mod.padding, "ceil_mode": mod.ceil_mode,
                                     "count_include_pad": mod.count_include_pad,
                                     "divisor_override": getattr(mod, "divisor_override", None)}
        for k in ("Avg", "Max"):
            if type(mod) is getattr(nn, f"Adaptive{k}Pool{d}d"):
                return f"adaptive_{k.lower()}_pool{d}d", {
                    "output_size": mod.output_size,
                    "return_indices": getattr(mod, "return_indices", False)}
    losses = {nn.SmoothL1Loss: ("smooth_l1_loss", ("reduction", "beta")),
              nn.HuberLoss: ("huber_loss", ("reduction", "delta")),
              nn.MSELoss: ("mse_loss", ("reduction",)), nn.L1Loss: ("l1_loss", ("reduction",)),
              nn.KLDivLoss: ("kl_div", ("reduction", "log_target")),
              nn.CosineSimilarity: ("cosine_similarity", ("dim", "eps")),
              nn.TripletMarginLoss: ("triplet_margin_loss", ("margin", "p", "eps", "swap",
                                                             "reduction"))}
    for cls, (name, attrs) in losses.items():
        if type(mod) is cls:
            return name, {a: getattr(mod, a) for a in attrs}
    if isinstance(mod, nn.CrossEntropyLoss):
        return "cross_entropy", {"ignore_index": mod.ignore_index, "reduction": mod.reduction,
                                 "label_smoothing": mod.label_smoothing,
                                 "weight": param(getattr(mod, "weight", None), "weight")}
    return "?", {}


def _conv_module(mod: Any, param: Any) -> tuple[str, dict[str, Any]] | None:
    """(op, constants) of an ``nn.ConvNd`` / ``nn.ConvTransposeNd`` module (None for others):
    its parameters and geometry as the functional form takes them."""
    import torch.nn as nn

    if not isinstance(mod, nn.modules.conv._ConvNd):
        return None
    transposed = isinstance(mod, nn.modules.conv._ConvTransposeNd)
    consts: dict[str, Any] = {
        "weight": param(mod.weight, "weight"), "bias": param(mod.bias, "bias"),
        "stride": list(mod.stride), "dilation": list(mod.dilation), "groups": mod.groups,
        "padding": mod.padding if isinstance(mod.padding, str) else list(mod.padding),
        "padding_mode": mod.padding_mode}
    if transposed:
        consts["output_padding"] = list(mod.output_padding)
    return ("conv_transpose" if transposed else "conv"), consts


def _swaps_last_two(perm: Any) -> bool:
    """Whether a ``permute`` order only swaps the last two dims (``(0, 2, 1)``, ``(1, 0)``)."""
    if not isinstance(perm, (tuple, list)) or len(perm) < 2:
        return False
    if not all(isinstance(d, int) for d in perm):
        return False
    nd = len(perm)
    return [d % nd for d in perm] == [*range(nd - 2), nd - 1, nd - 2]


#: The forward arguments of the modules that take other than (input, target).
_MODULE_ARGS = {"cosine_similarity": ("x1", "x2"),
                "triplet_margin_loss": ("anchor", "positive", "negative")}


def _bind(names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(zip(names, args, strict=False))
    if len(args) > len(names):
        out["_extra"] = list(args[len(names):])
    out.update(kwargs)
    return out


def _index_spec(index: Any, values: dict[Any, Any]) -> list | None:
    """An indexing expression (``x[:-1]``, ``x[:, 0]``, ``x[..., None]``) as JSON, one entry
    per position: an int, None (a new axis), "..." or a slice as [start, stop, step] (ints or
    None, sizes computed in the forward read at capture); None when some part is a tensor or
    anything else (then only the result's shape says what was taken)."""
    import torch.fx

    def num(v: Any) -> Any:
        v = values.get(v) if isinstance(v, torch.fx.Node) else v
        return v if v is None or (isinstance(v, int) and not isinstance(v, bool)) else ...

    spec: list = []
    for part in index if isinstance(index, tuple) else (index,):
        if isinstance(part, slice):
            fields = [num(part.start), num(part.stop), num(part.step)]
            if ... in fields:
                return None
            spec.append(fields)
        elif part is None or part is Ellipsis:
            spec.append(None if part is None else "...")
        else:
            v = num(part)
            if v is None or v is ...:
                return None
            spec.append(v)
    return spec


def canonical_call(n: Any, gm: Any, values: dict[Any, Any],
                   ids: dict[Any, int]) -> tuple[str, str, dict[str, int], dict[str, Any]]:
    """(op, target, tensor args, constant args) of one fx call node; op "?" when unknown."""
    import torch
    import torch.fx

    from cutegen.codegen.families.capture import _jsonable

    tensors: dict[str, int] = {}
    consts: dict[str, Any] = {}
    args, kwargs = tuple(n.args), dict(n.kwargs)
    if n.op == "call_module":
        mod = gm.get_submodule(str(n.target))
        op, consts = _module_call(mod)
        consts = {k: v if isinstance(v, dict) else _jsonable(v) for k, v in consts.items()}
        for v in consts.values():
            if isinstance(v, dict) and "path" in v:
                v["path"] = f"{n.target}.{v['path']}"
        bound = _bind(_MODULE_ARGS.get(op, ("input", "target")), args, kwargs)
        target = f"nn.{type(mod).__name__}"
        if op == "?" and isinstance(mod, torch.nn.Dropout):
            target = _random_dropout(f"{target}(p={mod.p})")
    elif n.op == "call_method":
        name = str(n.target)
        op = _METHOD_ALIASES.get(name, name if name in _PARAMS or name in _UNARY else "?")
        if name in ("flip", "view", "reshape", "permute") and len(args) > 2:
            args = (args[0], tuple(args[1:]))  # varargs dims / shape
        bound = _bind(_PARAMS.get(op, ("input",)), args, kwargs)
        if name == "permute" and _swaps_last_two(args[1] if len(args) > 1
                                                 else kwargs.get("dims")):
            op, bound = "transpose", {"input": args[0]}
            consts["dims"] = [-2, -1]
        if name in _CAST_DTYPE:
            bound["dtype"] = getattr(torch, _CAST_DTYPE[name])
        target = f"Tensor.{name}"
    elif n.target is getattr and len(args) == 2 and args[1] in ("values", "indices"):
        # torch.max(x, dim).values / .indices (torch.return_types): fields 0 and 1
        op, target, bound = "getitem", f"Tensor.{args[1]}", {"input": args[0]}
        consts["index"] = 0 if args[1] == "values" else 1
    elif n.target is getattr and len(args) == 2 and args[1] in ("T", "mT"):
        bound = {"input": args[0]}  # x.T (all dims reversed) / x.mT (the last two swapped)
        op, target = "transpose", f"Tensor.{args[1]}"
        consts["dims"] = "T" if args[1] == "T" else [-2, -1]
    else:
        fn = n.target
        op, functional = _function_table().get(fn, ("?", False))
        names = (_F_PARAMS.get(op) if functional else None) or _PARAMS.get(op, ("input", "other"))
        bound = _bind(names, args, kwargs)
        mod_name = getattr(fn, "__module__", "") or ""
        target = f"{mod_name}.{getattr(fn, '__name__', str(fn))}".lstrip(".")
    if op in ("clamp_min", "clamp_max"):  # torch.clamp_min(x, v) / x.clamp_max(v)
        op = "clamp"
    if op == "dropout":  # F.dropout(x, p, training): the identity when it drops nothing
        p, training = bound.get("p", 0.5), bound.get("training", True)
        if isinstance(p, (int, float)) and (p == 0 or training is False):
            op, bound = "identity", {"input": bound.get("input")}
        else:
            op = "?"  # random in training mode: nothing a kernel can be checked against
            target = _random_dropout(f"{target}(p={p})")
    if op in ("max", "min") and isinstance(bound.get("dim"), torch.fx.Node) and isinstance(
            values.get(bound["dim"]), torch.Tensor):  # torch.max(x, y): elementwise
        bound["other"] = bound.pop("dim")
    if op == "view":  # x.view(...), x.unsqueeze(d), x.expand_as(y) ...: only x is data
        bound = {"input": bound.get("input")}
    if op == "transpose" and "dims" not in consts:  # x.t(), x.transpose(d0, d1), torch.t(x)
        d0, d1 = bound.pop("dim0", None), bound.pop("dim1", None)
        consts["dims"] = [d0, d1] if d0 is not None and d1 is not None else [-2, -1]
    if op == "cast":
        dt = bound.get("dtype")
        if not isinstance(dt, torch.dtype):  # x.to(other) / x.to(device): only dtypes count
            dt = next((a for a in list(bound.values()) + [kwargs.get("dtype")]
                       if isinstance(a, torch.dtype)), None)
        bound = {"input": bound.get("input"), "dtype": dt}
    if op == "getitem" and "index" in bound:
        spec = _index_spec(bound["index"], values)
        if spec is not None:
            consts["slices"] = spec
    for k, v in bound.items():
        if isinstance(v, torch.fx.Node):
            val = values.get(v)
            if isinstance(val, torch.Tensor):
                tensors[k] = ids[v]
            elif isinstance(val, (tuple, list)) and any(isinstance(t, torch.Tensor) for t in val):
                tensors[k] = ids[v]  # a tuple of tensors (e.g. torch.max(x, dim))
            elif v.op == "placeholder" and isinstance(val, (int, float)) and not isinstance(
                    val, bool):
                # a number passed to forward: read at run time, never the value seen here
                consts[k] = {"input": str(v.target), "value": val}
            else:
                consts[k] = _jsonable(val)
        elif isinstance(v, (tuple, list)) and any(isinstance(a, torch.fx.Node) for a in v):
            resolved = [values.get(a) if isinstance(a, torch.fx.Node) else a for a in v]
            if any(isinstance(r, torch.Tensor) for r in resolved):
                op = "?" if op != "?" else op
                consts[k] = "<tensors>"
                # each tensor of the list by position (lowering reads torch.cat's operands)
                for i, (a, r) in enumerate(zip(v, resolved, strict=True)):
                    if isinstance(a, torch.fx.Node) and isinstance(r, torch.Tensor):
                        tensors[f"{k}.{i}"] = ids[a]
            else:
                consts[k] = _jsonable(resolved)
        else:
            consts.setdefault(k, _jsonable(v))
    return op, target, tensors, consts
