"""The GEMM operand packs on the host side, checked on the rendered candidate's own functions
(no GPU): which operands PackVecKernel takes (``_pack_vec``), and the packing of a module's
parameter kept across calls (``_pack_kept``).

3xTF32 packs both operands into (hi, lo) parts on every call. For an fp32 Linear of 8192 x
8192 (issue 17's chains) the weight's pack alone read 256 MB and wrote 768 MB a call (the
three 3xTF32 slots; 512 MB as the (hi, lo) pair it is stored as now), of a
call that took ~1.7 ms on the H200; the weight does not change between calls, so its packing
is kept on the module (as a conv keeps its packed filter) while the Parameter and its version
counter are the same. The SASS of both pack kernels is checked in test_gemm_compile.py."""

from importlib.util import find_spec

import _cutegen_gemm_plans as gp  # registered by conftest.py
import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")


@pytest.fixture(scope="module")
def cand(tmp_path_factory):
    """gemm_fp32's rendered candidate, imported (its host functions run here; no GPU)."""
    import _cutegen_famdata as fd  # registered by conftest.py

    return fd.rendered_module(tmp_path_factory.mktemp("gemm_pack"), "gemm_fp32")


def _strides(t: torch.Tensor, kmajor: bool):
    t3 = t.unsqueeze(0)
    return (t3.stride(1), t3.stride(2), t3.stride(0)) if kmajor else \
        (t3.stride(2), t3.stride(1), t3.stride(0))


def test_k_contiguous_aligned_operands_take_the_vector_pack(cand):
    a = torch.zeros(64, 256)
    assert cand._pack_vec(a, 256, 1, _strides(a, True), 32, 4, False) == 4
    assert cand._pack_vec(a.bfloat16(), 256, 1, _strides(a, True), 0, 2, False) == 8
    # transposed (contiguous along r): the shared-memory transpose kernel
    assert cand._pack_vec(a, 64, 1, _strides(a, False), 32, 4, True) == 1
    # K not a multiple of four values, a row stride that breaks 16-byte rows
    odd = torch.zeros(64, 258)
    assert cand._pack_vec(odd, 258, 1, _strides(odd, True), 32, 4, False) == 1
    sliced = torch.zeros(64, 300)[:, :256]
    assert cand._pack_vec(sliced, 256, 1, _strides(sliced, True), 32, 4, False) == 4
    shifted = torch.zeros(64 * 256 + 1)[1:].view(64, 256)  # 4 bytes off 16-byte alignment
    assert cand._pack_vec(shifted, 256, 1, _strides(shifted, True), 32, 4, False) == 1
    # a part interleave block the vector does not divide; a wider destination
    assert cand._pack_vec(a, 256, 1, _strides(a, True), 2, 4, False) == 1
    assert cand._pack_vec(a.bfloat16(), 256, 1, _strides(a, True), 0, 4, False) == 1
    # more batches than the grid's z holds
    many = torch.zeros(1, 4, 256).expand(70000, 4, 256)
    assert cand._pack_vec(many, 256, 70000, (256, 1, 0), 32, 4, False) == 1
    # batches whose stride breaks the alignment
    b = torch.zeros(3, 5, 256)[:, :, :255]
    assert cand._pack_vec(b, 255, 3, (b.stride(1), b.stride(2), b.stride(0)), 0, 4,
                          False) == 1


class _Counted:
    def __init__(self):
        self.calls = 0

    def __call__(self, src, R, K, L, strides, parts, dst_dtype, r_fast, block=32, k_align=0):
        self.calls += 1  # what _pack returns: the packing and its row length, parts x K
        return torch.full((1,), float(self.calls)), len(parts) * K


def test_a_parameter_is_packed_once_until_it_changes(cand, monkeypatch):
    packs = _Counted()
    monkeypatch.setattr(cand, "_pack", packs)
    lin = nn.Linear(16, 8)
    w = lin.weight
    args = (8, 16, 1, (16, 1, 128), ("hi", "lo"), torch.float32, False, 32, 32)
    src = w.detach().unsqueeze(0)
    first = cand._pack_kept((lin, w), src, *args)
    assert packs.calls == 1 and first[1] == 32
    again = cand._pack_kept((lin, w), w.detach().unsqueeze(0), *args)
    assert packs.calls == 1 and again[0] is first[0]
    assert list(lin.__dict__["_cutegen_packed"].values())[0][0] is w
    with torch.no_grad():  # an in-place update bumps the version counter
        w.mul_(2.0)
    cand._pack_kept((lin, w), w.detach().unsqueeze(0), *args)
    assert packs.calls == 2
    lin.load_state_dict({"weight": torch.randn(8, 16), "bias": torch.randn(8)})
    cand._pack_kept((lin, w), w.detach().unsqueeze(0), *args)
    assert packs.calls == 3
    assert len(lin.__dict__["_cutegen_packed"]) == 1  # one packing of the storage is kept
    # a new Parameter object at the module's attribute: packed again
    lin.weight = nn.Parameter(torch.randn(8, 16))
    cand._pack_kept((lin, lin.weight), lin.weight.detach().unsqueeze(0), *args)
    assert packs.calls == 4
    # another tensor than the parameter's storage, or no parameter: packed every call
    other = torch.randn(1, 8, 16)
    cand._pack_kept((lin, lin.weight), other, *args)
    cand._pack_kept(None, other, *args)
    cand._pack_kept(None, other, *args)
    assert packs.calls == 7


def test_the_replay_signature_holds_the_kept_packing(cand, monkeypatch):
    monkeypatch.setattr(cand, "_pack", _Counted())
    lin = nn.Linear(16, 8)
    known: list = []
    before = cand._call_sig(lin, (torch.randn(4, 16),), known)
    cand._pack_kept((lin, lin.weight), lin.weight.detach().unsqueeze(0), 8, 16, 1,
                    (16, 1, 128), ("hi", "lo"), torch.float32, False, 32, 32)
    after = cand._call_sig(lin, (torch.randn(4, 16),), [])
    assert before != after


def test_a_linear_renders_its_weight_as_kept():
    import _cutegen_famdata as fd  # registered by conftest.py

    code = fd.rendered("linear_scale_leakyrelu_fp32")
    assert "kept=(None, (self.gemm, self.gemm.weight)))" in code
    assert "kept=" not in gp.rendered("gemm_fp32").split("class ModelNew")[1]  # two inputs


def test_parameters_of_a_sequential_render_as_expressions(tmp_path):
    """A Linear inside ``nn.Sequential`` is ``net.0`` to torch.fx: ``self.net.0.weight`` does
    not parse (every family but the conv one rendered that, so such a task's candidate was a
    compile error); ``getattr(self.net, '0').weight`` does, for the operand, the epilogue's
    bias and the kept packing's owner alike."""
    import ast

    from cutegen.codegen.eval.static import check_source
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_task_file

    path = tmp_path / "seq_linear.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n"
                    "        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(),\n"
                    "                                 nn.LayerNorm(512))\n\n"
                    "    def forward(self, x):\n        return self.net(x)\n\n\n"
                    "def get_inputs():\n    return [torch.randn(64, 256)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    props = family_proposals(load_task_file(str(path), name="seq_linear"))
    assert props
    code = props[0].candidate.code
    ast.parse(code)
    assert check_source(code).ok
    assert "kept=(None, (getattr(self.net, '0'), getattr(self.net, '0').weight)))" in code
    assert "getattr(self.net, '2').weight.detach()" in code  # the LayerNorm stage's weight


def test_a_convs_repack_keeps_a_gemms_packing_on_the_same_module(tmp_path, monkeypatch):
    """A conv keeps one plan's packed filter on its module and drops the others when it
    repacks; a GEMM's packed operands kept on the same module (keys ("gemm", ...)) stay."""
    import _cutegen_famdata as fd  # registered by conftest.py

    mod = fd.rendered_module(tmp_path, "conv2d_bf16")
    monkeypatch.setattr(mod, "_conv_pack_weight", lambda *a: torch.zeros(1))
    conv = nn.Conv2d(4, 8, 3)
    gemm_key = ("gemm", 1234, (1, 8, 16), (128, 16, 1), "torch.float32")
    conv.__dict__["_cutegen_packed"] = {gemm_key: "kept", ("old plan",): "stale"}
    plan = {"key": ("new plan",), "k_out": 8, "cgp": 4, "runs": [None], "parts_w": ("x",),
            "store": torch.bfloat16, "tk": 64, "fold": False}
    mod._conv_weights(conv.weight, conv, plan, False)
    cache = conv.__dict__["_cutegen_packed"]
    assert set(cache) == {gemm_key, ("new plan",)}
