"""GPU check: replayed calls (``_replayed`` in head.py.tmpl) compute what the task's Model does.

    pytest -m gpu tests/families_tests/test_replay_gpu.py -q   # ~1 min

Each case renders a bundled task's default candidate and calls it five times at a small
verification shape, the float inputs refilled in place before each call (new values at the
same addresses, so the same signature: from the second call on, a replay), and compares each
result with the task's Model on the same inputs. Then a parameter written in place (a new
signature: recorded anew; a convolution repacks its filter) and two calls more. The evaluator
checks replays as well (its timed calls are replays, and a random subset of them is compared
after the last one); this is the short, direct form.
"""

import importlib.util

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

pytestmark = pytest.mark.gpu

NAMES = ["batch_center_fp32", "frobenius_norm_fp32", "softmax_bf16", "batch_norm_fp32",
         "group_norm_bf16", "max_pool2d_fp32", "cumsum_fp32", "cross_entropy_bf16",
         "gemm_bias_relu_bf16", "gemm_gn_swish_bf16", "conv2d_bf16",
         "conv2d_groupnorm_scale_maxpool_clamp_bf16"]


def _load(name: str, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NAMES)
def test_replayed_calls_match_the_model(name, tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    path = tmp_path / f"{name}_cand.py"
    path.write_text(fd.rendered(name))
    task = _load(f"{name}_task", fd.task_path(name))
    for k, v in task.VERIFY_SHAPES[0].items():
        setattr(task, k, v)
    cand = _load(f"{name}_cand", path)
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs()).cuda()
    m = cand.ModelNew(*task.get_init_inputs()).cuda()
    m.load_state_dict(ref.state_dict())
    xs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in task.get_inputs()]
    written = []
    real = cand.ModelNew._cutegen_forward

    def counted(self, *a):
        written.append(1)
        return real(self, *a)

    cand.ModelNew._cutegen_forward = counted
    tol = 3e-2 if any(getattr(t, "dtype", None) in (torch.bfloat16, torch.float16)
                      for t in xs) else 1e-4
    replayed, outs = [], []
    with torch.no_grad():
        for i in range(7):
            if i == 5 and list(m.parameters()):  # an optimiser's step, in place
                for p, q in zip(m.parameters(), ref.parameters(), strict=True):
                    p.mul_(0.5)
                    q.mul_(0.5)
            for t in xs:
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    t.copy_(torch.randn_like(t))
            before = len(written)
            got = m(*xs)
            want = ref(*xs)
            torch.cuda.synchronize()
            replayed.append(len(written) == before)
            outs.append(got)
            torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol,
                                       msg=lambda s, i=i: f"call {i}: {s}")
    assert any(replayed[1:5]), replayed  # the same signature was replayed
    assert len({o.data_ptr() for o in outs}) == len(outs)  # every result its own memory
