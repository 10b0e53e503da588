"""Cosine similarity and the triplet-margin loss (KernelBench level 1's CosineSimilarityLoss and
TripletMarginLoss, 2026-12-02: both were refused as ops no family has). Lowering writes them as
row sums and pointwise ops; recognition runs the sums as kernels of their own whose results a
last kernel combines (a chain cut at each anchor's output, :func:`.chains.dag_plan`).

The lowered graphs are also evaluated here with torch, op by op, against the task's Model."""

from __future__ import annotations

import pytest
import torch

from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.lower import lower
from cutegen.codegen.families.recognize import recognize

COSINE = '''
    def forward(self, predictions, targets):
        cosine_sim = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cosine_sim)
'''
COSINE_MODULE = '''
    def __init__(self):
        super().__init__()
        self.cos = nn.CosineSimilarity(dim=1, eps=1e-6)

    def forward(self, predictions, targets):
        return (1 - self.cos(predictions, targets)).sum()
'''
TRIPLET = '''
    def __init__(self, margin=1.0):
        super().__init__()
        self.loss_fn = torch.nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor, positive, negative):
        return self.loss_fn(anchor, positive, negative)
'''
TRIPLET_F = '''
    def forward(self, anchor, positive, negative):
        return torch.nn.functional.triplet_margin_loss(anchor, positive, negative, margin=0.5,
                                                       reduction="sum")
'''


def _task(tmp_path, body: str, n_inputs: int, init: str = "[]"):
    p = tmp_path / "t.py"
    ins = ", ".join(["torch.rand(64, 300)"] * n_inputs)
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):" + body +
                 f"\ndef get_inputs():\n    return [{ins}]\n\n"
                 f"def get_init_inputs():\n    return {init}\n")
    return p


def _run_lowered(cap, inputs: list[torch.Tensor]) -> torch.Tensor:
    """The lowered graph evaluated op by op with torch (the ops lowering emits here)."""
    vals: dict[int, object] = {}
    it = iter(inputs)

    def arg(n, k):
        return vals[n.tensors[k]] if k in n.tensors else n.consts[k]

    for n in cap.nodes:
        if n.kind == "input":
            vals[n.id] = next(it)
        elif n.kind == "call":
            if n.op in ("mul", "sub", "add", "div"):
                fn = {"mul": torch.mul, "sub": torch.sub, "add": torch.add, "div": torch.div}
                a, b = arg(n, "input"), arg(n, "other")
                vals[n.id] = fn[n.op](torch.as_tensor(a, dtype=torch.float64), b)
            elif n.op in ("sum", "mean"):
                fn = torch.sum if n.op == "sum" else torch.mean
                x, dim = arg(n, "input"), n.consts.get("dim")
                vals[n.id] = fn(x) if dim is None else fn(
                    x, dim=dim, keepdim=n.consts.get("keepdim", False))
            elif n.op == "sqrt":
                vals[n.id] = torch.sqrt(arg(n, "input"))
            elif n.op == "clamp":
                vals[n.id] = torch.clamp(arg(n, "input"), min=n.consts.get("min"),
                                         max=n.consts.get("max"))
    return vals[cap.output]


@pytest.mark.parametrize(("body", "n_inputs", "init", "kernels"), [
    (COSINE, 2, "[]", 4), (COSINE_MODULE, 2, "[]", 4), (TRIPLET, 3, "[1.0]", 3),
    (TRIPLET_F, 3, "[]", 3)])
def test_the_loss_is_a_chain_of_row_kernels(tmp_path, body, n_inputs, init, kernels):
    path = _task(tmp_path, body, n_inputs, init)
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert plan.family == "chain"
    stages = plan.param("stages")
    assert len(stages) == kernels and all(s.family == "row" for s in stages)
    assert stages[-1].op in ("mean", "sum") and "over all elements" in stages[-1].description


@pytest.mark.parametrize(("body", "n_inputs", "init"), [
    (COSINE, 2, "[]"), (COSINE_MODULE, 2, "[]"), (TRIPLET, 3, "[1.0]"), (TRIPLET_F, 3, "[]")])
def test_the_lowered_graph_computes_the_loss(tmp_path, body, n_inputs, init):
    path = _task(tmp_path, body, n_inputs, init)
    low = lower(capture_in_process(path))
    ns: dict = {}
    exec(path.read_text(), ns)  # noqa: S102 - the test's own task text
    g = torch.Generator().manual_seed(0)
    xs = [torch.rand(64, 300, generator=g, dtype=torch.float64) for _ in range(n_inputs)]
    xs[0] = xs[0] * 0.7  # anchors nearer: the hinge is neither all zero nor all positive
    want = ns["Model"](*eval(init))(*xs)  # noqa: S307
    got = _run_lowered(low, xs)
    assert torch.allclose(got, want, rtol=1e-9, atol=1e-9), (got, want)


def test_a_swapped_triplet_loss_is_still_refused(tmp_path):
    body = TRIPLET.replace("TripletMarginLoss(margin=margin)",
                           "TripletMarginLoss(margin=margin, swap=True)")
    rec = recognize(capture_in_process(_task(tmp_path, body, 3, "[1.0]")))
    assert not rec.covered
    assert "TripletMarginLoss" in rec.not_covered.reason or "triplet" in rec.not_covered.reason
