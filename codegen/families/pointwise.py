"""Pointwise chains -> CuTe DSL source: the fused prologue / epilogue functions.

A chain (:class:`~cutegen.codegen.families.plan.Chain`) becomes one ``@cute.jit``
function whose statements are the chain's ops in SSA form, computed in fp32. The values a
chain reads are passed in three lists built by the family kernel: ``v`` (fp32 TensorSSA
values of the vector operands: full tensors and per-column vectors), ``r`` (fp32 scalars:
per-row values and single-element tensors) and ``s`` (fp32 scalars: module attributes read
at run time); constants are inlined. An epilogue also gets ``y`` (the family op's result)
and ``x`` (the value the op consumed). The same code serves TensorSSA and scalar values
(a reduction's per-row result), which is why max/min go through ``_vmax`` / ``_vmin``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from cutegen.codegen.families.plan import Chain, PwNode

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: torch dtype name -> CuTe type, for rounding casts inside a chain.
_ROUND = {"bfloat16": "cutlass.BFloat16", "float16": "cutlass.Float16"}


#: The candidate file's name for ``TUNABLES["fast_math"]`` (defined by head.py.tmpl): True
#: evaluates the chain's transcendentals with the DSL's fast-math lowering (approximate
#: ``ex2`` / reciprocal, fewer range-reduction steps), errors far inside a bf16 / fp16
#: result's rounding but not always inside fp32's 1e-4; offered only for half-precision
#: results (:func:`fast_math_applies`).
FAST = "_FAST_MATH"


def _fm(fn: str, x: str) -> str:
    """``cute.math.<fn>(x)``, approximate when the file's fast-math knob is on (``fastmath=``:
    the DSL's ``approx=`` of tanh is scalar-only, and chains compute on vectors)."""
    return f"cute.math.{fn}({x}, fastmath={FAST})"


def _num(x: object) -> str:
    """A Python literal for a number (``float('inf')`` spelled so the candidate parses)."""
    f = float(x)  # type: ignore[arg-type]
    if math.isinf(f):
        return "_INF" if f > 0 else "(-_INF)"
    if math.isnan(f):
        return "float('nan')"
    return repr(f)


def _softplus(a: str, beta: float) -> str:
    bx = f"({a} * {_num(beta)})" if beta != 1 else a
    core = f"(_vmax({bx}, 0.0) + {_fm('log1p', _fm('exp', f'-cute.math.abs({bx})'))})"
    return core if beta == 1 else f"({core} * {_num(1.0 / beta)})"


def _mish(a: str) -> str:
    """x * tanh(softplus(x)) with one exp and one division: with e = exp(x),
    tanh(log(1 + e)) = ((1 + e)^2 - 1) / ((1 + e)^2 + 1) = p / (p + 2), p = e (e + 2), no
    cancellation anywhere (as x -> -inf, p / (p + 2) -> e as it should). x is clamped to 20
    first: e^20 (e + 2) stays far from fp32's overflow, and there p / (p + 2) is 1 in fp32,
    as tanh(softplus(x)) is from x = 9 on. Against the float64 mish, over 3 million fp32
    points in [-100, 100] emulated on the CPU: at most 2.7e-7 relative (2.1e-7 for the
    exp, log1p and tanh it replaces). KernelBench L2 4's fp32 conv kernel (a Mish-Mish
    epilogue) went from 9,280 to 6,800 SASS instructions; its time is not yet measured."""
    e = _fm("exp", f"_vmin({a}, 20.0)")
    return f"({a} * _mish_ratio({e}))"


def _pow(a: str, b: str, n: PwNode) -> str:
    e = n.param("exponent_value")
    if e is not None:
        special = {2.0: f"({a} * {a})", 3.0: f"({a} * {a} * {a})", 1.0: a,
                   0.5: f"cute.math.sqrt({a})", -1.0: f"(1.0 / {a})",
                   -0.5: f"cute.math.rsqrt({a})", 0.0: f"({a} * 0.0 + 1.0)"}
        if float(e) in special:
            return special[float(e)]
        if float(e).is_integer() and 0 < abs(float(e)) <= 8:
            prod = " * ".join([a] * int(abs(float(e))))
            return f"({prod})" if e > 0 else f"(1.0 / ({prod}))"
    base = n.param("base_value")
    if base is not None and float(base) > 0:
        return _fm("exp2", f"{b} * {_num(math.log2(float(base)))}")
    return f"_vpow({a}, {b})"


def _clamp(a: str, lo: object, hi: object) -> str:
    out = a
    if lo is not None:
        out = f"_vmax({out}, {_num(lo)})"
    if hi is not None:
        out = f"_vmin({out}, {_num(hi)})"
    return out


def _gelu(a: str, n: PwNode) -> str:
    if n.param("approximate", "none") == "tanh":
        inner = f"({a} + 0.044715 * {a} * {a} * {a}) * {_SQRT_2_OVER_PI!r}"
        return f"(({a} * 0.5) * (1.0 + {_fm('tanh', inner)}))"
    return f"(({a} * 0.5) * (1.0 + {_fm('erf', f'{a} * {_INV_SQRT2!r}')}))"


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _celu(a: str, alpha: float) -> str:
    inner = _fm("expm1", f"_vmin({a}, 0.0) * {_num(1.0 / alpha)}")
    return f"(_vmax({a}, 0.0) + {_num(alpha)} * {inner})"


def _hardsigmoid(a: str) -> str:
    return f"_vmin(_vmax({a} * {1.0 / 6.0!r} + 0.5, 0.0), 1.0)"


def _scaled(b: str, n: PwNode) -> str:
    alpha = n.param("alpha", 1)
    return b if alpha in (None, 1, 1.0) else f"({b} * {_num(alpha)})"


#: op -> expression builder (args as source text, the node for its parameters).
EXPRESSIONS: dict[str, Callable[[list[str], PwNode], str]] = {
    "add": lambda a, n: f"({a[0]} + {_scaled(a[1], n)})",
    "sub": lambda a, n: f"({a[0]} - {_scaled(a[1], n)})",
    "mul": lambda a, n: f"({a[0]} * {a[1]})",
    "div": lambda a, n: f"({a[0]} / {a[1]})",
    "neg": lambda a, n: f"(-{a[0]})",
    "pow": lambda a, n: _pow(a[0], a[1], n),
    "maximum": lambda a, n: f"_vmax({a[0]}, {a[1]})",
    "minimum": lambda a, n: f"_vmin({a[0]}, {a[1]})",
    "relu": lambda a, n: f"_vmax({a[0]}, 0.0)",
    "relu6": lambda a, n: f"_vmin(_vmax({a[0]}, 0.0), 6.0)",
    "gelu": lambda a, n: _gelu(a[0], n),
    "silu": lambda a, n: f"({a[0]} / (1.0 + {_fm('exp', f'-{a[0]}')}))",
    "sigmoid": lambda a, n: f"(1.0 / (1.0 + {_fm('exp', f'-{a[0]}')}))",
    "tanh": lambda a, n: _fm("tanh", a[0]),
    "exp": lambda a, n: _fm("exp", a[0]),
    "exp2": lambda a, n: _fm("exp2", a[0]),
    "log": lambda a, n: _fm("log", a[0]),
    "log1p": lambda a, n: _fm("log1p", a[0]),
    "expm1": lambda a, n: _fm("expm1", a[0]),
    "sqrt": lambda a, n: f"cute.math.sqrt({a[0]})",
    "rsqrt": lambda a, n: f"cute.math.rsqrt({a[0]})",
    "abs": lambda a, n: f"cute.math.abs({a[0]})",
    "erf": lambda a, n: _fm("erf", a[0]),
    "square": lambda a, n: f"({a[0]} * {a[0]})",
    "reciprocal": lambda a, n: f"(1.0 / {a[0]})",
    "clamp": lambda a, n: _clamp(a[0], n.param("min"), n.param("max")),
    "hardtanh": lambda a, n: _clamp(a[0], n.param("min_val", -1.0), n.param("max_val", 1.0)),
    "leaky_relu": lambda a, n: (f"(_vmax({a[0]}, 0.0) + "
                                f"{_num(n.param('negative_slope', 0.01))} * _vmin({a[0]}, 0.0))"),
    "elu": lambda a, n: (f"(_vmax({a[0]}, 0.0) + "
                         f"{_num(n.param('alpha', 1.0))} * {_fm('expm1', f'_vmin({a[0]}, 0.0)')})"),
    "softplus": lambda a, n: _softplus(a[0], float(n.param("beta", 1.0))),
    "hardsigmoid": lambda a, n: _hardsigmoid(a[0]),
    "hardswish": lambda a, n: f"({a[0]} * {_hardsigmoid(a[0])})",
    "mish": lambda a, n: _mish(a[0]),
    "cast": lambda a, n: (f"{a[0]}.to({_ROUND[n.param('dtype')]}).to(Float32)"
                          if n.param("dtype") in _ROUND else a[0]),
    "identity": lambda a, n: a[0],
    "selu": lambda a, n: (f"({_SELU_SCALE!r} * (_vmax({a[0]}, 0.0) + {_SELU_ALPHA!r} * "
                          f"{_fm('expm1', f'_vmin({a[0]}, 0.0)')}))"),
    "celu": lambda a, n: _celu(a[0], float(n.param("alpha", 1.0))),
    "softsign": lambda a, n: f"({a[0]} / (1.0 + cute.math.abs({a[0]})))",
    "logsigmoid": lambda a, n: (f"(_vmin({a[0]}, 0.0) - "
                                f"{_fm('log1p', _fm('exp', f'-cute.math.abs({a[0]})'))})"),
    "tanhshrink": lambda a, n: f"({a[0]} - {_fm('tanh', a[0])})",
    "softshrink": lambda a, n: (f"({a[0]} - _vmin(_vmax({a[0]}, {_num(-n.param('lambd', 0.5))}), "
                                f"{_num(n.param('lambd', 0.5))}))"),
    "hardshrink": lambda a, n: (f"_vwhere(_vcmp(cute.math.abs({a[0]}), "
                                f"{_num(n.param('lambd', 0.5))}, 'gt'), {a[0]}, 0.0)"),
    "threshold": lambda a, n: f"_vwhere(_vcmp({a[0]}, {a[1]}, 'gt'), {a[0]}, {a[2]})",
    "sign": lambda a, n: f"(_vcmp({a[0]}, 0.0, 'gt') - _vcmp({a[0]}, 0.0, 'lt'))",
    "where": lambda a, n: f"_vwhere({a[0]}, {a[1]}, {a[2]})",
    **{op: (lambda a, n, op=op: f"_vcmp({a[0]}, {a[1]}, {op!r})")
       for op in ("gt", "lt", "ge", "le", "eq", "ne")},
}


#: Output dtypes whose rounding hides the approximations ``fast_math`` allows.
FAST_MATH_DTYPES = frozenset({"bfloat16", "float16"})


def fast_math_applies(out_dtype: str, *chains: Chain) -> bool:
    """Whether ``TUNABLES["fast_math"]`` can change a file computing ``chains`` into an
    ``out_dtype`` result: a half-precision output and a transcendental in some chain."""
    if out_dtype not in FAST_MATH_DTYPES:
        return False
    return any(FAST in EXPRESSIONS[n.op](["a", "b", "c"], n)
               for c in chains for n in c.nodes if n.op in EXPRESSIONS)


def _var(i: int) -> str:
    """The SSA variable of node ``i`` (negative ids: a value before its rounding cast)."""
    return f"t{i}" if i >= 0 else f"u{-i}"


def chain_function(name: str, chain: Chain, access: Mapping[str, str], *,
                   epilogue: bool = False, doc: str = "", y: str = "y") -> str:
    """Source of ``@cute.jit def name(v, r, s)`` (prologue) or ``name(y, x, v, r, s)``
    (epilogue) computing the chain; ``access`` maps each leaf name to how the function reads
    it (``"v[0]"``, ``"r[1]"``, ``"s[0]"``, a literal); ``y`` is how ``%y`` is read (an
    epilogue run as a kernel of its own reads it as ``v[0]``)."""
    params = "y, x, v, r, s" if epilogue else "v, r, s"
    lines = ["@cute.jit", f"def {name}({params}):"]
    if doc:
        lines.append(f'    """{doc}"""')

    def ref(a: str) -> str:
        if a == "%y":
            return y
        if a == "%in":
            return "x"
        if a.startswith("%"):
            return _var(int(a[1:]))
        if a.startswith("@"):
            return access[a[1:]]
        return _num(a)

    for n in chain.nodes:
        build = EXPRESSIONS.get(n.op)
        if build is None:  # recognition only admits ops listed here
            raise KeyError(f"no code for pointwise op {n.op!r}")
        lines.append(f"    {_var(n.id)} = {build([ref(a) for a in n.args], n)}")
    lines.append(f"    return {ref(chain.result)}")
    return "\n".join(lines) + "\n"


#: The helper a chain may call besides the head's _vmax / _vmin.
VPOW = '''
@cute.jit
def _vpow(a, b):
    """a ** b for values that may be scalars or TensorSSA."""
    if const_expr(isinstance(a, cute.TensorSSA) and not isinstance(b, cute.TensorSSA)):
        b = cute.full_like(a, b)
    elif const_expr(isinstance(b, cute.TensorSSA) and not isinstance(a, cute.TensorSSA)):
        a = cute.full_like(b, a)
    return cute.math.pow(a, b)
'''
