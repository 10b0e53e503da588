"""The scan family's host path emulated on the CPU, for the results that are not x's shape:
KernelBench's original exclusive cumsum (``torch.cat((zeros, x), 1)[:-1]``: one row shorter,
one column wider than x; a padded scan) and its current spelling (the cumsum of all but the
last value behind a zero: ``cumsum(x) - x``, an exclusive scan).

No GPU here: the rendered candidate's ``ModelNew`` runs on the CPU with the kernel compile
replaced by the kernel object itself and the launch by an emulation of its documented
contract, read from the kernel's own fields and the launch's arguments: rows of ``N`` results
written with row stride ``N``, x read with row stride ``n_in`` (``N - pad``), zero past it,
scanned exclusively. What is checked is what the host decides (the result's shape, the rows
kept, the views and pointers handed to the kernel, the row count) against the task's own
reference at its hidden shapes."""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest
import torch

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")


_int = fd.launch_int


class _Emulator(fd.HostEmulator):
    def go(self, fn, vptrs, rptrs, o_ptr, n_rows, scalars, stream):
        op = fn[1]
        assert type(op).__name__ == "ScanKernel" and len(vptrs) == 1
        rows = _int(n_rows)
        self.launches.append((rows, op.N, op.pad, op.exclusive))
        x = self.flat(vptrs[0])[:rows * op.n_in].view(rows, op.n_in).double()
        padded = torch.zeros(rows, op.N, dtype=torch.float64)
        padded[:, :op.n_in] = x
        y = torch.cumsum(padded, 1)
        if op.exclusive:
            y = y - padded
        out = self.flat(o_ptr)
        out[:rows * op.N] = y.reshape(-1).to(out.dtype)


def _model_new(tmp_path, name, monkeypatch):
    return fd.emulated_module(tmp_path, name, monkeypatch, _Emulator, "_scan_compiled")


def _reference(name):
    return fd.task_module(name)


@pytest.mark.parametrize("shape", [(6, 40), (127, 4097), (1, 1000), (5, 1), (2, 3, 16)])
def test_original_spelling_one_row_shorter_one_column_wider(tmp_path, monkeypatch, shape):
    cand, emu = _model_new(tmp_path, "cumsum_exclusive_cut_fp32", monkeypatch)
    ref = _reference("cumsum_exclusive_cut_fp32").Model(len(shape) - 1)
    x = emu.keep(torch.rand(*shape))
    want = ref(x)
    got = cand.ModelNew(len(shape) - 1)(x)
    assert got.shape == want.shape  # (B - 1, ..., N + 1)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    rows = (shape[0] - 1) * (shape[1] if len(shape) == 3 else 1)
    if rows:
        assert emu.launches == [(rows, shape[-1] + 1, 1, True)]
    else:
        assert emu.launches == []  # an empty result: no launch


@pytest.mark.parametrize("shape", [(2, 5, 64), (3, 7, 4099), (1, 1, 1)])
def test_current_spelling_is_an_exclusive_scan_of_x(tmp_path, monkeypatch, shape):
    cand, emu = _model_new(tmp_path, "cumsum_exclusive_cat_bf16", monkeypatch)
    ref = _reference("cumsum_exclusive_cat_bf16").Model(2)
    x = emu.keep(torch.rand(*shape).to(torch.bfloat16))
    want = ref(x.float())  # the sums in fp32, as the kernel (and eager bf16 on a GPU) keeps them
    got = cand.ModelNew(2)(x)
    assert got.shape == x.shape and got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.to(torch.bfloat16).float(), rtol=1e-2,
                               atol=1e-2)
    assert emu.launches == [(shape[0] * shape[1], shape[-1], 0, True)]


def test_a_padded_scan_refuses_other_operands(tmp_path, monkeypatch):
    """The launcher's guard: a padded scan reads x alone, its rows pad values shorter."""
    cand, emu = _model_new(tmp_path, "cumsum_exclusive_cut_fp32", monkeypatch)
    x, out = emu.keep(torch.rand(4, 10)), emu.keep(torch.zeros(3, 10))
    ident = cand._prologue if hasattr(cand, "_prologue") else None
    with pytest.raises(ValueError, match="reads x alone"):
        cand._scan_launch(ident, ident, [x], (True,), [], (), [], out, False, True, pad=1)
