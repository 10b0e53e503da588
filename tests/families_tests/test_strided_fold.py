"""The strided family's fold, its host path emulated on the CPU: where C is too narrow for
full-width accesses (KernelBench L1 47 to 49 and 53: (128, 4096, 4095) fp32, one 4-byte load
a thread, 0.81 to 0.92x eager on an H100), x (B, R, C) is read as (B, R / f, f * C) by a
first pass writing fp32 partials, and a second pass over their (B, f, C) view merges each
column's f of them.

No GPU here: the rendered candidate's ``ModelNew`` runs on the CPU with the kernel compile
replaced by the kernel object and the launch by an emulation of its contract (x read as
(n_b, R, C) from its pointer, one value per (b, column) written as the op's value), so what is
checked is what the host decides: the views, the fold factor, the partials, the counts and
the ops of the two passes, against the task's own reference at several shapes. The kernels
themselves are the family's (compiled for sm_90a in test_reduce_compile.py)."""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest
import torch

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")



class _Emulator(fd.HostEmulator):
    def go(self, fn, vptrs, rptrs, o_ptr, n_b, scalars, stream):
        op = fn[1]
        b = fd.launch_int(n_b)
        kind = type(op).__name__
        if kind == "ArgStrided" or kind == "StridedFinish":
            return self.arg(op, kind, vptrs, o_ptr, b)
        assert op.splits == 1 and not op.writes, "the tests run unsplit reductions"
        self.launches.append((kind, op.R, op.C, op.vec, op.prologue.__name__,
                              op.epilogue.__name__, dict(op.opts)))
        x = self.flat(vptrs[0])[:b * op.R * op.C].view(b, op.R, op.C).double()
        if kind == "SumStrided":
            y = x.sum(1) / (op.count if op.opts.get("mean") else 1.0)
        else:
            assert kind == "ExtremeStrided"
            y = x.amax(1) if op.opts.get("largest") else x.amin(1)
        out = self.flat(o_ptr)
        out[:b * op.C] = y.reshape(-1).to(out.dtype)


    def arg(self, op, kind, vptrs, o_ptr, b):
        """A folded argmin's contract: the pass leaves (value, index along its R as a float)
        of each (b, position) in a (words, f * C, B, 1) workspace; the finish takes column
        c's f of them, index r' of sub-row q meaning row f * r' + q, the smallest value and
        the first such row."""
        if kind == "ArgStrided":
            assert op.splits == 1 and not op.opts.get("largest")
            self.launches.append((kind, op.R, op.C, op.vec))
            x = self.flat(vptrs[0])[:b * op.R * op.C].view(b, op.R, op.C)
            val, idx = x.min(1)  # torch: the first of equal values
            if not op.partials:  # unfolded: the indices themselves
                self.flat(o_ptr)[:b * op.C] = idx.reshape(-1)
                return
            assert op.opts["fold"] > 1
            ws = self.flat(o_ptr)[:2 * op.C * b].view(b, op.C, 2)
            ws[..., 0], ws[..., 1] = val, idx.float()
            return
        self.launches.append((kind, op.C, op.fold, op.splits))
        f, c = op.fold, op.C
        ws = self.flat(vptrs)[:2 * f * c * b].view(b, f, c, 2)
        rows = ws[..., 1] * f + torch.arange(f).view(1, f, 1)  # unfold
        best = ws[..., 0].min(1, keepdim=True).values
        first = torch.where(ws[..., 0] == best, rows, torch.full_like(rows, float("inf")))
        self.flat(o_ptr)[:b * c] = first.min(1).values.reshape(-1).to(torch.int64)


def _model_new(tmp_path, name, monkeypatch, **tunables):
    return fd.emulated_module(tmp_path, name, monkeypatch, _Emulator, "_strided_compiled",
                              strategy="no_split", **tunables)


@pytest.mark.parametrize("shape, fold", [
    ((3, 512, 4095), 4),  # L1 47's columns: 4 rows make 16380, a multiple of 4
    ((5, 256, 4094), 2),  # even: 2 rows are enough
    ((1, 4096, 4095), 4),  # the hidden batch of 1
    ((3, 510, 4095), 1),  # 4 does not divide R, and 2 rows are not full width: one pass
    ((3, 509, 4095), 1),  # no f divides R: one pass, as before
    ((2, 4096, 1023), 4),  # the task's own columns, R much longer
    ((4, 512, 4096), 1),  # full width already
    ((2, 64, 33), 1),  # too little data to repay a second launch
])
def test_a_folded_sum_is_the_sum_over_r(tmp_path, monkeypatch, shape, fold):
    cand, emu = _model_new(tmp_path, "sum_dim1_oddcols_fp32", monkeypatch)
    x = emu.keep(torch.randn(*shape))
    got = cand.ModelNew(1)(x)
    want = torch.sum(x.double(), dim=1, keepdim=True)
    assert got.shape == want.shape and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    b, r, c = shape
    if fold == 1:
        assert [launch[1:3] for launch in emu.launches] == [(r, c)]
        return
    first, second = emu.launches
    assert first[:6] == ("SumStrided", r // fold, fold * c, 4, "_prologue", "_ident_epi")
    assert second[:3] + second[4:6] == ("SumStrided", fold, c, "_ident_pro", "_epilogue")
    assert second[6]["count"] == fold


def test_the_fold_can_be_turned_off(tmp_path, monkeypatch):
    cand, emu = _model_new(tmp_path, "sum_dim1_oddcols_fp32", monkeypatch, s_fold="off")
    x = emu.keep(torch.randn(3, 512, 4095))
    torch.testing.assert_close(cand.ModelNew(1)(x), torch.sum(x, 1, keepdim=True),
                               rtol=1e-5, atol=1e-5)
    assert [launch[1:4] for launch in emu.launches] == [(512, 4095, 1)]


def test_a_folded_mean_divides_by_all_of_r_once(tmp_path, monkeypatch):
    """The first pass's partials are sums over R / f rows divided by R (the mean's count);
    the second pass sums them (no mean): x's scale runs in the first, the bias after."""
    cand, emu = _model_new(tmp_path, "mean_dim1_oddcols_bf16", monkeypatch)
    launches = []
    # the prologue (x * 2) and the chain's pointwise stage are CuTe code: record, do not run
    monkeypatch.setattr(cand, "_go", lambda fn, *a: launches.append(fn[1]))
    x = emu.keep(torch.randn(8, 512, 1535, dtype=torch.bfloat16))
    cand.ModelNew(1535)(x)
    first, second = launches[:2]
    assert (type(first).__name__, first.R, first.C, first.vec) == ("SumStrided", 64, 8 * 1535, 8)
    assert first.opts.get("mean") and first.count == 512
    assert first.prologue.__name__.endswith("_prologue") and first.epilogue.__name__ == "_ident_epi"
    assert (second.R, second.C, second.opts.get("mean", False)) == (8, 1535, False)
    assert second.prologue.__name__ == "_ident_pro"


def test_which_plans_fold():
    from cutegen.codegen.families.render_strided import FOLDS

    assert FOLDS == {"sum": "sum", "mean": "sum", "amax": "amax", "amin": "amin"}


@pytest.mark.parametrize("shape", [(5, 1024, 1023), (1, 4096, 4095), (5, 1021, 1023)])
def test_a_folded_argmin_gives_the_first_smallest_row(tmp_path, monkeypatch, shape):
    cand, emu = _model_new(tmp_path, "argmin_dim1_oddcols_fp32", monkeypatch, s_fold="auto")
    x = torch.randn(*shape)
    x[:, 7, :] = x[:, 3, :] = -100.0  # ties: the first row wins, across sub-rows 3 and 7 % 4
    x = emu.keep(x)
    got = cand.ModelNew(1)(x)
    assert torch.equal(got, torch.argmin(x, dim=1)) and got.dtype == torch.int64
    b, r, c = shape
    if r % 4:
        assert [launch[0] for launch in emu.launches] == ["ArgStrided"]
        assert not cand._fold_rows(b, r, c, x) > 1
    else:
        assert emu.launches == [("ArgStrided", r // 4, 4 * c, 4), ("StridedFinish", c, 4, 1)]


def test_an_argmin_fold_is_off_by_default(tmp_path, monkeypatch):
    cand, emu = _model_new(tmp_path, "argmin_dim1_oddcols_fp32", monkeypatch)
    assert cand.TUNABLES["s_fold"] == "off" and "auto" in cand.TUNABLE_CHOICES["s_fold"]
    assert cand._fold_rows(5, 1024, 1023, torch.empty(5, 1024, 1023)) == 1


@pytest.fixture(scope="module")
def arg_fold_compiled(tmp_path_factory):
    from functools import partial

    name = "argmin_dim1_oddcols_fp32"
    shapes = fd.shapes(name)[:2]  # the main shape (folds) and the batch of 1 (too small to)
    make = partial(fd.rendered, name, extra=(("s_fold", "auto"),))
    cases = [{"name": name, "shape": sh} for sh in shapes]
    return fd.compile_rendered(tmp_path_factory.mktemp("arg_fold"), cases,
                               [((name, "fold"), make, sh) for sh in shapes])


def test_a_folded_argmin_compiles_with_full_width_loads_and_its_finish(arg_fold_compiled):
    loads = []
    for res in arg_fold_compiled:
        assert res["error"] is None, res["error"]
        kernels = [k for comp in res["compiles"] for k in comp["kernels"].values()]
        assert len(kernels) == 2  # the pass and StridedFinish (folded; split at the batch of 1)
        for k in kernels:
            assert not [op for op in k["ops"] if op.startswith(("LDL", "STL"))], k
        loads.append("LDG.E.128" in {op for k in kernels for op in k["ops"]})
    assert loads == [True, False]  # 1023 columns read 128 bits an access only folded
