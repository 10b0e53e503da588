"""GPU check of the hand-written seeds against a float64 torch reference.

    pytest -m gpu tests/codegen_tests/test_seeds_gpu.py -s -q

Every case prints one line (``CASE ... max_abs ... max_rel ... ok|FAIL``) so a single run
shows all the errors; each case is its own test, so one failure does not stop the others.

A case passes when every element satisfies ``|c - r| <= atol + rtol * |r|`` (fp32 1e-4,
bf16 1e-2; r is the float64 reference), or, as in the harness, when the candidate is as
accurate as torch itself in the task's dtype (rmse <= 2 * torch's rmse + atol / 100 and
max error <= 4 * torch's max error + atol). The parameters come from the task's own
``Model`` through ``load_state_dict``, as the harness does it.
"""

import faulthandler
import importlib.util
import math
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cutegen.codegen.candidate import set_tunable  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "benchmarks" / "seeds"
TASKS = ROOT / "benchmarks" / "tasks"
TOL = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (1e-2, 1e-2)}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
_TMP = Path(tempfile.mkdtemp(prefix="cutegen_seeds_"))
_modules: dict = {}
#: A kernel that never finishes (say a cluster barrier that is never satisfied) would hang
#: the whole run: after this many seconds in one test, dump the stacks and exit.
WATCHDOG_S = 180


@pytest.fixture(autouse=True)
def _watchdog(request):
    print(f"START {request.node.name}", flush=True)
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _seed(name: str, tunables: tuple = ()):
    """The seed module, with ``tunables`` applied to its source (as the search does)."""
    key = (name, tunables)
    if key not in _modules:
        source = (SEEDS / f"{name}.py").read_text()
        for k, v in tunables:
            source = set_tunable(source, k, v)
        tag = f"{name}_{len(_modules)}"
        path = _TMP / f"{tag}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(tag, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _modules[key] = mod
    return _modules[key]


def _task(name: str):
    spec = importlib.util.spec_from_file_location(f"task_{name}", TASKS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _draw(shape, dist: str, dtype, offset: int, gen):
    """Inputs as the harness draws them (fp32 draw, cast); offset shifts the start by that
    many elements so that rows lose their 16-byte alignment."""
    n = math.prod(shape)
    x = torch.randn(n + offset, generator=gen, device="cuda", dtype=torch.float32)
    if dist == "randn_mean3":
        x += 3.0
    elif dist == "uniform":
        x = 1 - torch.rand(n + offset, generator=gen, device="cuda", dtype=torch.float32)
    elif dist == "large":
        x *= 1e3
    elif dist == "small":
        x *= 1e-3
    elif dist == "negative":
        x = -x.abs()
    return x.to(dtype)[offset:].view(shape)


def _reference_rows(seed: str, xd, model):
    """float64 reference for a block of rows."""
    if seed == "softmax":
        return torch.softmax(xd, dim=-1)
    if seed == "sum_rows":
        return xd.sum(dim=-1)
    return torch.nn.functional.gelu(xd) * model.scale + model.bias.double()


def _compare(seed: str, x, c, native, model, dtype):
    """The harness's rule, evaluated in row blocks (the long-row shapes have 2**31
    elements; whole float64 copies of them would not fit)."""
    atol, rtol = TOL[dtype]
    step = max(1, (1 << 26) // x.shape[-1])
    max_abs = max_rel = nmax = 0.0
    sq = nsq = 0.0
    bad = nonfinite = count = 0
    worst = (-1.0, 0, 0.0, 0.0)
    for i in range(0, x.shape[0], step):
        r64 = _reference_rows(seed, x[i : i + step].double(), model)
        c64 = c[i : i + step].double()
        n64 = native[i : i + step].double()
        diff = (c64 - r64).abs()
        nonfinite += int((~torch.isfinite(c64)).sum())
        bad += int((diff > atol + rtol * r64.abs()).sum())
        if diff.numel():
            d = float(diff.max())
            if d > worst[0]:
                j = int(torch.argmax(diff.reshape(-1)))
                row = i + (j // x.shape[-1] if c.dim() > 1 else j)
                worst = (d, row, float(c64.reshape(-1)[j]), float(r64.reshape(-1)[j]))
            max_abs = max(max_abs, d)
            max_rel = max(max_rel, float((diff / r64.abs().clamp_min(1e-30)).max()))
            sq += float(diff.pow(2).sum())
            ndiff = (n64 - r64).abs()
            nmax = max(nmax, float(ndiff.max()))
            nsq += float(ndiff.pow(2).sum())
            count += diff.numel()
    rmse = math.sqrt(sq / max(count, 1))
    nrmse = math.sqrt(nsq / max(count, 1))
    ok = nonfinite == 0 and (
        bad == 0 or (rmse <= 2 * nrmse + atol / 100 and max_abs <= 4 * nmax + atol)
    )
    msg = (f"max_abs {max_abs:.3e} max_rel {max_rel:.3e} rmse {rmse:.3e} (torch {nrmse:.3e},"
           f" torch max {nmax:.3e}) bad {bad}/{count} nonfinite {nonfinite}")
    if not ok:
        msg += f"; worst in row {worst[1]}: got {worst[2]:.6g}, want {worst[3]:.6g}"
    return ok, msg


_TASK_OF = {
    ("softmax", "fp32"): "softmax_fp32", ("softmax", "bf16"): "softmax_bf16",
    ("gelu_scale_bias", "fp32"): "gelu_scale_bias_fp32",
    ("gelu_scale_bias", "bf16"): "gelu_scale_bias_bf16",
    ("sum_rows", "fp32"): "sum_rows_fp32", ("sum_rows", "bf16"): "sum_rows_bf16",
}


def _cases():
    """(seed, dtype, rows, N, offset, distribution, tunables)."""
    out = []
    dists = ("randn", "randn_mean3", "uniform", "large", "small", "negative")
    shapes = {
        "softmax": [(1, 4096), (127, 1000), (64, 32768), (5, 3), (3, 1), (1, 131072),
                    (127, 100000), (8, 262144), (2, 524288), (4, 1 << 20), (300, 1024)],
        "sum_rows": [(1, 8192), (127, 1000), (16, 262144), (5, 3), (1, 1), (3, 1 << 20),
                     (1000, 8192), (2, 100003)],
        "gelu_scale_bias": [(1, 8192), (127, 1000), (3, 100003), (5, 1), (1000, 4096)],
    }
    main = {"softmax": [(32768, 4096), (16384, 131072)], "sum_rows": [(32768, 8192)],
            "gelu_scale_bias": [(32768, 8192)]}
    for seed in shapes:
        for dt in DTYPES:
            for rows, n in shapes[seed]:
                for dist in dists if rows * n <= (1 << 22) else ("randn",):
                    out.append((seed, dt, rows, n, 0, dist, ()))
            for rows, n in main[seed]:
                if seed == "softmax" and n == 131072 and dt == "fp32":
                    continue  # softmax_long is a bf16 task; fp32 long rows are covered above
                out.append((seed, dt, rows, n, 0, "randn", ()))
            # rows that are not 16-byte aligned
            out.append((seed, dt, 7, 1001, 1, "randn", ()))
            out.append((seed, dt, 33, 4096, 1, "randn", ()))
    # Other TUNABLES values (one knob at a time, the extremes) on shapes that exercise them.
    knobs = {
        "softmax": [("vals_per_thread", 16), ("vals_per_thread", 64), ("cta_threads", 64),
                    ("cta_threads", 256), ("max_cta_threads", 256), ("max_cta_threads", 1024),
                    ("cluster_max", 1), ("cluster_max", 2), ("vec_bits", 32)],
        "sum_rows": [("threads", 128), ("threads", 512), ("unroll", 1), ("unroll", 8),
                     ("cluster_max", 1), ("vec_bits", 64)],
        "gelu_scale_bias": [("threads", 64), ("threads", 512), ("rows_per_thread", 1),
                            ("rows_per_thread", 8), ("vec_bits", 32)],
    }
    knob_shapes = {
        "softmax": [(127, 1000), (33, 4096), (8, 32768), (4, 131072), (2, 262144)],
        "sum_rows": [(127, 1000), (64, 8192), (16, 262144)],
        "gelu_scale_bias": [(127, 1000), (64, 8192)],
    }
    for seed, ks in knobs.items():
        for k, v in ks:
            for dt in DTYPES:
                for rows, n in knob_shapes[seed]:
                    out.append((seed, dt, rows, n, 0, "randn", ((k, v),)))
    return out


CASES = _cases()


def _case_id(c) -> str:
    seed, dt, rows, n, offset, dist, knobs = c
    extra = "".join(f"-{k}={v}" for k, v in knobs)
    return f"{seed}-{dt}-{rows}x{n}{'-misaligned' if offset else ''}-{dist}{extra}"


def _run_case(c, gen, stream=None):
    seed, dt, rows, n, offset, dist, knobs = c
    dtype = DTYPES[dt]
    task = _task(_TASK_OF[(seed, dt)])
    init = [n, 1.702] if seed == "gelu_scale_bias" else []
    ref_model = task.Model(*init).cuda()
    model = _seed(seed, knobs).ModelNew(*init).cuda()
    model.load_state_dict(ref_model.state_dict())
    x = _draw((rows, n), dist, dtype, offset, gen)
    if stream is None:
        out = model(x)
    else:
        # The input is NaN on the default stream and becomes x on the side stream only
        # after a ~20 ms sleep there: a kernel launched anywhere but the current (side)
        # stream reads NaNs.
        xs = torch.full_like(x, float("nan"))
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.cuda._sleep(40_000_000)
            xs.copy_(x)
            out = model(xs)
        stream.synchronize()
    torch.cuda.synchronize()
    native = ref_model(x)
    assert out.shape == native.shape and out.dtype == native.dtype, (out.shape, out.dtype)
    return _compare(seed, x, out, native, ref_model, dtype)


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_seed_matches_torch(case) -> None:
    gen = torch.Generator(device="cuda").manual_seed(1234)
    try:
        ok, msg = _run_case(case, gen)
    except Exception as e:
        print(f"CASE {_case_id(case)}: EXCEPTION {type(e).__name__}: {e}", file=sys.stderr)
        traceback.print_exc()
        raise
    print(f"CASE {_case_id(case)}: {msg} -> {'ok' if ok else 'FAIL'}")
    assert ok, msg


@pytest.mark.parametrize("seed", ["softmax", "sum_rows", "gelu_scale_bias"])
def test_seed_on_a_side_stream_and_with_other_row_counts(seed: str) -> None:
    """Launches go to the current stream; one compiled kernel serves every row count."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    side = torch.cuda.Stream()
    results = []
    for rows in (300, 1, 77, 4096):  # same N: the first compile is reused (rows are dynamic)
        for dt in DTYPES:
            case = (seed, dt, rows, 4096, 0, "randn", ())
            ok, msg = _run_case(case, gen, stream=side if rows == 77 else None)
            print(f"CASE {_case_id(case)}{'-side-stream' if rows == 77 else ''}: {msg} -> "
                  f"{'ok' if ok else 'FAIL'}")
            results.append((ok, msg))
    assert all(ok for ok, _ in results), [m for ok, m in results if not ok]
