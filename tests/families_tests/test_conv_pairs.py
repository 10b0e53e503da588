"""3xTF32 convs with the packed input and filter stored as (hi, lo) pairs (knob ``paired``).

The implicit GEMM reads K' = 3 Kp k tiles: per filter tap and tile_k block of channels, A's
slots (hi, lo, hi) against B's (hi, hi, lo). Stored as the slots, the packed input holds 12
bytes a value: KernelBench L1 76's 8.6 GB input became a 25.8 GB pack (this CPU could not
even allocate it), and the conv moved ~3x the bytes it needs. Stored as pairs (8 bytes a
value), the producer maps each K' tile to the stored tile of the part its slot reads with the
GEMM's own ``_stored_k`` (GPU-checked for the GEMM). Checked here on the CPU: the host plan
the candidate builds (parts, channel extent, the launch geometry's C'), and that every K'
tile's stored A and B tiles, decoded with the pack's documented layout (per tap, block b of
tile_k channels holds its hi tile at 2b and its lo tile at 2b + 1), are the same tap and block
with the three products of 3xTF32. The kernels' results: ``test_conv_gpu.py -k paired``."""

from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest
import torch

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")


@pytest.mark.parametrize("paired", [True, False])
def test_the_plan_stores_pairs_only_when_asked(tmp_path, paired):
    cand = fd.rendered_module(tmp_path, "conv2d_fp32", paired=paired, block_stages=False)
    conv = torch.nn.Conv2d(20, 24, 3, padding=1)
    x_shape, w_shape = (2, 20, 9, 10), tuple(conv.weight.shape)
    plan = cand._conv_plan(conv, x_shape, w_shape, torch.float32, "3xtf32", cand._conv_spec())
    tk, cgp = plan["tk"], plan["cgp"]
    assert cgp % tk == 0 and cgp >= 20
    if paired:
        assert plan["paired"] and plan["parts_x"] == plan["parts_w"] == ("hi", "lo")
    else:
        assert not plan["paired"]
        assert plan["parts_x"] == ("hi", "lo", "hi") and plan["parts_w"] == ("hi", "hi", "lo")
    stored = len(plan["parts_x"]) * cgp
    assert plan["xp_shape"][-1] == stored  # the packed input's channels
    assert fd.launch_int(plan["runs"][0]["geo"][4]) == stored  # the GEMM's C'
    # bf16 and TF32 are never paired
    tf32 = cand._conv_plan(conv, x_shape, w_shape, torch.float32, "tf32", cand._conv_spec())
    assert not tf32["paired"] and tf32["parts_x"] == ("x",)


@pytest.mark.parametrize("blocks,taps", [(1, 1), (1, 9), (3, 9), (2, 27), (5, 7)])
def test_every_k_slot_reads_its_taps_block_and_part(tmp_path_factory, blocks, taps):
    cand = fd.rendered_module(tmp_path_factory.mktemp("pairs"), "conv2d_fp32", paired=True,
                              block_stages=False)
    stored_per_tap = 2 * blocks  # k tiles of one tap in the packed (hi, lo) channels
    seen: dict[tuple[int, int], list[tuple[str, str]]] = {}
    k_tiles = 3 * blocks * taps  # K' as the kernel counts it: size(gA, k) // 2 * 3
    assert (stored_per_tap * taps) // 2 * 3 == k_tiles
    for k in range(k_tiles):
        ka = cand._stored_k(k, True, 0)
        kb = cand._stored_k(k, True, 1)
        assert 0 <= ka < stored_per_tap * taps and 0 <= kb < stored_per_tap * taps
        tap_a, within_a = divmod(ka, stored_per_tap)
        tap_b, within_b = divmod(kb, stored_per_tap)
        want_tap, slot = divmod(k, 3 * blocks)
        assert tap_a == tap_b == want_tap  # the same filter tap on both sides
        assert within_a // 2 == within_b // 2 == slot // 3  # the same channel block
        part = ("hi", "lo")
        seen.setdefault((want_tap, slot // 3), []).append((part[within_a % 2],
                                                            part[within_b % 2]))
    assert len(seen) == blocks * taps
    for products in seen.values():  # A_hi B_hi + A_lo B_hi + A_hi B_lo, each once
        assert sorted(products) == [("hi", "hi"), ("hi", "lo"), ("lo", "hi")]


def test_blocked_stages_store_pairs_and_plan_blocked(tmp_path):
    """``block_stages`` implies the pairs its stages load (each block's hi and lo tiles)."""
    cand = fd.rendered_module(tmp_path, "conv2d_fp32", block_stages=True)
    conv = torch.nn.Conv2d(20, 24, 3, padding=1)
    plan = cand._conv_plan(conv, (2, 20, 9, 10), tuple(conv.weight.shape), torch.float32,
                           "3xtf32", cand._conv_spec())
    assert plan["blocked"] and plan["paired"] and plan["parts_x"] == ("hi", "lo")
    tf32 = cand._conv_plan(conv, (2, 20, 9, 10), tuple(conv.weight.shape), torch.float32,
                           "tf32", cand._conv_spec())
    assert not tf32["blocked"] and not tf32["paired"]


@pytest.mark.parametrize("blocks,taps", [(1, 1), (1, 9), (3, 9), (5, 7)])
def test_every_blocked_stage_reads_one_taps_block_and_its_three_products(tmp_path_factory,
                                                                        blocks, taps):
    """A blocked stage (the kernel's main-loop tile kt: stored tiles 2 kt and 2 kt + 1 of A
    and of B) holds one tap's channel block, and BLOCK_SLOTS makes its three products."""
    cand = fd.rendered_module(tmp_path_factory.mktemp("blocked"), "conv2d_fp32",
                              block_stages=True)
    stored_per_tap = 2 * blocks
    n_stages = stored_per_tap * taps // 2  # size(gA, k) // 2, as the kernel counts them
    for kt in range(n_stages):
        tiles = [2 * kt, 2 * kt + 1]
        taps_in = {t // stored_per_tap for t in tiles}
        assert taps_in == {kt // blocks}  # one filter tap
        assert {(t % stored_per_tap) // 2 for t in tiles} == {kt % blocks}  # one block
        part = ("hi", "lo")
        products = [(part[(2 * kt + pa) % 2], part[(2 * kt + pb) % 2])
                    for pa, pb in cand.BLOCK_SLOTS]
        assert sorted(products) == [("hi", "hi"), ("hi", "lo"), ("lo", "hi")]


def test_split_a_stores_the_input_once_and_the_filter_as_pairs(tmp_path):
    """``split_a``: the packed input once in fp32 (C' = Cgp, the launch geometry's C' too),
    the filter as (hi, lo) pairs (the kernel reads its C' as twice the input's), blocked."""
    cand = fd.rendered_module(tmp_path, "conv2d_fp32", split_a=True)
    conv = torch.nn.Conv2d(20, 24, 3, padding=1)
    plan = cand._conv_plan(conv, (2, 20, 9, 10), tuple(conv.weight.shape), torch.float32,
                           "3xtf32", cand._conv_spec())
    assert plan["split_a"] and plan["blocked"] and plan["paired"]
    assert plan["parts_x"] == ("x",) and plan["parts_w"] == ("hi", "lo")
    assert plan["xp_shape"][-1] == plan["cgp"] == fd.launch_int(plan["runs"][0]["geo"][4])
    tf32 = cand._conv_plan(conv, (2, 20, 9, 10), tuple(conv.weight.shape), torch.float32,
                           "tf32", cand._conv_spec())
    assert not tf32["split_a"] and not tf32["blocked"]
    with pytest.raises(ValueError, match="split A takes blocked stages"):
        cand.GemmKernel(cand.TFloat32, cand.Float32, True, True, (128, 64, 32), (1, 1), 0,
                        True, 1, "direct", 132, None, (), (), 0, pairs=(True, True),
                        blocked=True, split_a=True)
    # each consumer warp group writes the lo parts of the 64 rows it reads: a 256-row tile
    # (the atom repeated along M) would leave half of them unwritten
    with pytest.raises(ValueError, match="split A takes tile_m 64 or 128"):
        cand.GemmKernel(cand.TFloat32, cand.Float32, True, True, (256, 64, 32), (1, 1), 0,
                        True, 1, "direct", 132, None, (), (), 0, pairs=(False, True),
                        blocked=True, split_a=True)


def test_split_a_parts_make_the_products_of_3xtf32():
    """The arithmetic GemmKernel._split_lo does (written again here on fp32 bits, to check
    the claims its doc makes): A_hi is the stored word's top 19 bits (written back for the
    tensor cores), lo = x - A_hi exactly, rounded to tf32; A_hi + lo is x within 2^-22 |x|,
    and each is a tf32 value."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(200_000, generator=g) * 10 ** torch.randint(-6, 7, (200_000,),
                                                                       generator=g),
                   torch.tensor([0.0, -0.0, 1.0, -3.0, 1e-30, 3.4e38])]).float()
    bits = x.view(torch.int32)
    hi = (bits & -8192).view(torch.float32)
    d = x - hi
    assert torch.equal((hi.double() + d.double()).float(), x)  # exact
    lo = ((d.view(torch.int32) + 0x1000) & -8192).view(torch.float32)
    for part in (hi, lo):  # tf32 values: the tensor cores drop nothing more
        assert torch.equal(part.view(torch.int32) & 8191, torch.zeros_like(bits))
    err = (hi.double() + lo.double() - x.double()).abs()
    assert (err <= 2.0 ** -22 * x.double().abs()).all()
