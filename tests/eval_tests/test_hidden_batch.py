"""The hidden batch sizes of a task without VERIFY_SHAPES: 1, and a prime just above the main
batch (127 from a main batch of 127 up). Before, 1 and 127 whatever the main batch: KernelBench
level 1's convolutions run a batch of 16 over 512 x 512 images, and 127 of them (8x the main
shape's bytes, with the float64 reference beside) ran the H200 out of memory while checking a
correct depthwise-separable conv."""

from pathlib import Path

import pytest

from cutegen.codegen.eval.refworker import Reference, hidden_batch


@pytest.mark.parametrize(("main", "want"), [(1, 2), (2, 3), (16, 17), (32, 37), (64, 67),
                                            (120, 127), (126, 127), (127, 127), (128, 127),
                                            (4096, 127)])
def test_a_prime_just_above_the_main_batch_up_to_127(main, want):
    got = hidden_batch(main)
    assert got == want
    assert all(got % d for d in range(2, got)), "a prime"
    assert got <= max(2 * main, 127)


def test_the_reference_offers_them_for_a_task_without_verify_shapes(tmp_path):
    task = Path(tmp_path) / "t.py"
    task.write_text("import torch\nimport torch.nn as nn\nbatch_size = 16\n\n\n"
                    "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
                    "def get_inputs():\n    return [torch.randn(batch_size, 8)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    ref = Reference(str(task), gpu=False, scratch=Path(tmp_path))
    configs, note = ref.shape_configs(True)
    assert configs == [{}, {"batch_size": 1}, {"batch_size": 17}]
    assert "batch_size" in note


@pytest.mark.parametrize(("sizes", "varied"), [("N = 4096\n", "N"),
                                               ("M = 1024\nK = 512\nN = 2048\n", "M"),
                                               ("b = 8\ni = 64\nj = 32\n", "b")])
def test_a_matrix_product_without_batch_size_varies_its_first_size(tmp_path, sizes, varied):
    """KernelBench's matrix products (level 1, 1-18) name their sizes M, K, N (or b for a
    4-D einsum) and no batch_size: they had no hidden shape at all, so a kernel fixed to the
    main shape passed. Now M (else N, else b) takes 1 and a prime, and the reference runs
    there (a square product of N = 127 included)."""
    task = Path(tmp_path) / "t.py"
    dims = {"N": "N, N", "M": "M, K", "b": "b, i, j"}[varied]
    task.write_text("import torch\nimport torch.nn as nn\n" + sizes + "\n\n"
                    "class Model(nn.Module):\n    def forward(self, a):\n        return a * 2\n\n\n"
                    f"def get_inputs():\n    return [torch.randn({dims})]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    ref = Reference(str(task), gpu=False, scratch=Path(tmp_path))
    configs, note = ref.shape_configs(True)
    main = {"N": 4096, "M": 1024, "b": 8}[varied]
    assert configs == [{}, {varied: 1}, {varied: hidden_batch(main)}]
    assert f"vary {varied} only" in note
    ref.load(hidden=True, seed_init=0)
    firsts = [sh["specs"][0]["shape"][0] for sh in ref.shapes]
    assert firsts == [main, 1, hidden_batch(main)]
