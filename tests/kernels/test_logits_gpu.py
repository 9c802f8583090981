"""GPU-only checks of `rejection_sample_logits` at production vocabularies: coupling with the float64
reference (device float32 math, approximate exp/log), CUDA-graph capture with replays that follow
new seeds/offsets copied into the captured inputs (the per-request arrival counters must reset), and
programmatic dependent launches against stream-ordered ones (bit-identical outputs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.kernels._launch import supports_pdl
from specsample.kernels.logits import launch_config, rejection_sample_logits
from specsample.reference.logits import rejection_sample_logits_reference
from specsample.stats import current_test_seed
from tests.kernels.test_logits_cases import make_batch, row_mismatch

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _cuda(case: dict) -> dict:
    return {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in case.items()}


# (classic, dtype, B, K, V): issue 6's (64, 4, 151936) (8 screened race tiles per program for classic
# drafts), and bf16 classic at V = 32000 where the race programs hold 2 and 4 unscreened tiles (_race_tiles),
# so race_p_in_merge and race_poll's spin compile together (GPU run 258 saw one such compile fail)
# (the first three keep their ids, and so their seeds, from before the V = 32000 cases were added)
PRODUCTION = [pytest.param(*c, id=f"{c[0]}-{c[1]}" + ("" if c[4] == 151936 else f"-B{c[2]}-V{c[4]}"))
              for c in [(False, "bf16", 64, 4, 151936), (True, "bf16", 64, 4, 151936),
                        (True, "fp32", 64, 4, 151936), (True, "bf16", 64, 3, 32000),
                        (True, "bf16", 128, 3, 32000)]]  # fmt: skip


@pytest.mark.parametrize("classic,dtype,batch,k,vocab", PRODUCTION)
def test_production_vocab_couples_with_reference(classic, dtype, batch, k, vocab):
    """Every edge case of make_batch at the shapes above: no mismatch outside the reference's ambiguity
    flags (tol 1e-4), ids in [-1, V)."""
    case = _cuda(make_batch(current_test_seed(), batch, k, vocab, classic=classic, dtype=dtype))
    res = rejection_sample_logits(**case)
    ref = rejection_sample_logits_reference(**case)
    kernel = tuple(t.cpu().numpy() for t in res)
    assert not np.any(row_mismatch(kernel, ref) & ~ref.ambiguous)
    assert np.all((kernel[0] >= -1) & (kernel[0] < vocab))


def test_cuda_graph_replays_follow_new_seeds():
    """Capture once; five replays with fresh seeds and advanced offsets equal eager calls."""
    seed = current_test_seed()
    case = _cuda(make_batch(seed, 32, 3, 32000, classic=True, dtype="bf16"))
    rejection_sample_logits(**case)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        rejection_sample_logits(**case)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = rejection_sample_logits(**case)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    for step in range(5):
        case["seeds"].copy_(torch.randint(0, 2**62, (32,), generator=gen, device="cuda"))
        case["offsets"].add_(step + 1)
        graph.replay()
        eager = rejection_sample_logits(**case)
        for name, a, b in zip(eager._fields, captured, eager, strict=True):
            assert torch.equal(a, b), f"replay {step}: {name} differs from eager"


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_dependent_launches_equal_serialised_launches(classic):
    """Programmatic dependent launch (the GPU default: the accept and race / pick kernels start before
    their predecessor ends and wait for it in griddepcontrol.wait) changes no output bit, eagerly and
    replayed from a CUDA graph, at a shape whose stats pass takes several waves. Every dependent call
    follows a call on other logits, so a read of the statistics before the wait would see that call's
    (stale scratch) and show as differing rows; so would a store before it."""
    if not supports_pdl(torch.device("cuda", torch.cuda.current_device())):
        pytest.skip("no programmatic dependent launch here (it needs sm_90+ and SPECSAMPLE_PDL != 0)")
    assert launch_config(64, 5, 151936, logit_bytes=2)["pdl"]
    seed = current_test_seed()
    cases = [_cuda(make_batch(seed + i, 64, 4, 151936, classic=classic, dtype="bf16")) for i in (0, 1)]
    serial = [rejection_sample_logits(**case, _config={"pdl": False}) for case in cases]
    for step in range(4):  # A, B, A, B: each call's scratch holds the other case's statistics
        dependent = rejection_sample_logits(**cases[step % 2])
        for name, a, b in zip(dependent._fields, serial[step % 2], dependent, strict=True):
            assert torch.equal(a, b), f"eager call {step}: {name} differs with dependent launches"
    live = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in cases[0].items()}
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = rejection_sample_logits(**live)
    for step in range(4):  # A, B, A, B: the eager loop ended on B, and each replay follows the other case
        for k, v in cases[step % 2].items():
            if isinstance(v, torch.Tensor):
                live[k].copy_(v)
        graph.replay()
        for name, a, b in zip(captured._fields, serial[step % 2], captured, strict=True):
            assert torch.equal(a, b), f"replay {step}: {name} differs from serialised eager launches"
