"""Descriptors of tensors handed between workers (pure parts; the IPC itself needs a GPU)."""

from __future__ import annotations

import pytest

from cutegen.codegen.eval.ipc import IpcError, TensorDesc


def _d(**kw):
    base = {"handle": "ab" * 64, "offset": 0, "dtype": "float32", "shape": [4, 3],
            "stride": [3, 1]}
    base.update(kw)
    return base


def test_a_descriptor_round_trips_and_knows_its_extent():
    d = TensorDesc.parse(_d(offset=256))
    assert d.to_dict() == _d(offset=256)
    assert d.extent_bytes() == 12 * 4
    assert TensorDesc.parse(_d(shape=[4, 3], stride=[1, 4])).extent_bytes() == (3 + 2 * 4 + 1) * 4
    assert TensorDesc.parse(_d(shape=[0, 3])).extent_bytes() == 0
    assert TensorDesc.parse(_d(shape=[], stride=[])).extent_bytes() == 4  # a 0-d tensor


@pytest.mark.parametrize("bad", [
    "not a dict", _d(dtype="object"), _d(shape=[4, -1]), _d(stride=[3]), _d(offset=-8),
    _d(handle="zz"), {"offset": 0}, _d(shape=[1] * 17, stride=[1] * 17),
])
def test_descriptors_from_an_untrusted_worker_are_checked(bad):
    with pytest.raises(IpcError):
        TensorDesc.parse(bad)
