"""Edge semantics of docs/semantics.md, each pinned by a deterministic test that the anchors' known
behaviour fails: SGLang (norm_sum == 0 -> token V-1, `<=` accepting a zero-probability draft at
u = 0, q = -inf accepted), vLLM (norm_sum == 0 -> token 0, NaN rows giving out-of-vocab ids),
FlashInfer (garbage / -1 on norm_sum == 0, out-of-bounds reads of -1 padded ids)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.kernels.chain import _launch, chain_rejection_sample

NAN, INF = float("nan"), float("inf")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # inputs are built on the CPU, run here


# The emit's three ways of finding its token (_emit_rows), each run by every test that takes `path`:
EMIT_PATHS = {
    "one-chunk": {},  # the interpreter's default plan: each row in one chunk
    # several programs per row, one chunk each (T = 1): a prefix over the chunk sums, the GPU's plan in
    # the latency regime (e.g. B = 1 at V = 32000)
    "chunks": {"block_v": 2, "tiles": 1},
    # programs of two chunks, one row each: the span, then the chunk inside it (TILES_POW2 > 0), the
    # GPU's plan wherever a program streams several chunks (e.g. B >= 16 at V = 128256)
    "spans": {"block_v": 2, "tiles": 2, "block_rows": 1},
}


@pytest.fixture(params=list(EMIT_PATHS))
def path(request):
    return request.param


def launch(p, x, q, n, u, seeds, offsets, path="one-chunk", block_v=None):
    """_launch with every tensor moved to DEVICE (views already there keep their strides), on the
    emit path `path` (EMIT_PATHS; `block_v` replaces its chunk width)."""
    args = (None if t is None else t.to(DEVICE) for t in (p, x, q, n, u, seeds, offsets))
    overrides = dict(EMIT_PATHS[path], **({"block_v": block_v} if block_v else {}))
    return _launch(*args, **overrides)


def run(p, x, q=None, u=None, n=None, path="one-chunk"):
    p = torch.as_tensor(p, dtype=torch.float32)
    x = torch.as_tensor(x, dtype=torch.int64).reshape(p.shape[0], p.shape[1] - 1)
    q = None if q is None else torch.as_tensor(q, dtype=torch.float32)
    u = torch.as_tensor(u, dtype=torch.float32)
    n = None if n is None else torch.as_tensor(n, dtype=torch.int64)
    return launch(p, x, q, n, u, None, None, path=path)


def test_norm_sum_zero_falls_back_to_p_not_last_or_first_token(path):
    """Classic, q = 2p (p <= q everywhere, unnormalised): the draft is rejected at u = 0.7 and the
    residual has no mass. SGLang emits V-1, vLLM 0, FlashInfer -1/garbage; all three have p = 0
    there. We emit the inverse CDF of p itself and set `fallback`."""
    p_row = [0.0, 0.2, 0.5, 0.3, 0.0]
    cases = ((0.0, 1), (0.3, 2), (0.69, 2), (0.71, 3), (1.0 - 2**-24, 3))
    rows = len(cases)
    p = [[p_row, p_row]] * rows
    q = [[[2 * v for v in p_row]]] * rows
    res = run(p, [[2]] * rows, q, [[0.7, u_last] for u_last, _ in cases], path=path)
    assert res.tokens.tolist() == [[want, -1] for _, want in cases]
    assert res.num_accepted.tolist() == [0] * rows and res.fallback.tolist() == [True] * rows
    assert res.valid.tolist() == [True] * rows


def test_one_hot_norm_sum_zero_emits_the_draft_from_p(path):
    """One-hot, p = 0.5 * delta_x (after rounding p has no mass besides x): u = 0.7 rejects x, the
    residual p with x zeroed is empty, so the token comes from p: it is x, with `fallback`."""
    p = [[[0.0, 0.0, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25]]]
    res = run(p, [[2]], None, [[0.7, 0.99]], path=path)
    assert res.tokens.tolist() == [[2, -1]] and res.fallback.tolist() == [True]
    assert res.valid.tolist() == [True] and res.num_accepted.tolist() == [0]


@pytest.mark.parametrize("classic", [True, False])
def test_zero_probability_draft_is_rejected_at_u_zero(classic, path):
    """p(x) = 0, u = 0: `u * q < p` is 0 < 0, false (SGLang's `<=` accepted here, #35771)."""
    p = [[[0.0, 0.5, 0.5], [0.0, 0.5, 0.5]]]
    q = [[[1.0, 0.0, 0.0]]] if classic else None
    res = run(p, [[0]], q, [[0.0, 0.0]], path=path)
    assert res.num_accepted.tolist() == [0]
    assert res.tokens.tolist() == [[1, -1]]


def test_draft_with_no_draft_mass_is_rejected(path):
    """q(x) = 0 / negative / NaN / +-inf: rejected whatever u (a q = -inf draft was accepted by
    SGLang; u * 0 < p would accept a naive kernel)."""
    q_values = [0.0, -1.0, NAN, INF, -INF]
    rows = len(q_values)
    p = [[[0.1, 0.9], [0.5, 0.5]]] * rows
    q = [[[1.0, q_x]] for q_x in q_values]
    res = run(p, [[1]] * rows, q, [[0.0, 0.0]] * rows, path=path)
    assert res.num_accepted.tolist() == [0] * rows
    assert res.tokens.tolist() == [[1, -1]] * rows  # residual max(0, p - clean q) = (0, 0.9)
    assert res.fallback.tolist() == [False] * rows


@pytest.mark.parametrize("classic", [True, False])
def test_out_of_range_draft_id_is_rejected_without_reading(classic, path):
    """Ids outside [0, V) (the -1 padding included) are rejected and never used as an address:
    p and q are views into buffers whose neighbouring columns hold mass 1 (an out-of-bounds read
    at x = -1 or x = V would see it and accept; FlashInfer #879 reads -1 ids out of bounds)."""
    vocab = 4
    bad_ids = [-1, 4, 5, 2**31 - 1, 2**40, -(2**40)]
    rows = len(bad_ids)
    buf = torch.ones(rows, 2, vocab + 2, device=DEVICE)  # built in place: the views keep their strides
    buf[..., 1:-1] = torch.tensor([0.1, 0.2, 0.3, 0.4], device=DEVICE)
    p = buf[..., 1:-1]
    q = buf[:, :1, 1:-1] if classic else None
    x = torch.tensor(bad_ids, dtype=torch.int64)[:, None]
    res = launch(p, x, q, None, torch.tensor([[0.0, 0.5]] * rows), None, None, path=path)
    assert res.num_accepted.tolist() == [0] * rows
    # residual: classic max(0, p - q) = 0 -> fallback to p; one-hot: p (no id to zero)
    assert res.tokens.tolist() == [[2, -1]] * rows
    assert res.fallback.tolist() == [classic] * rows


def test_ragged_counts_clamp_and_unused_ids_are_never_read(path):
    """n_b = 0 emits the bonus from p[b, 0]; n_b > K is clamped to K and n_b < 0 to 0; ids past n_b
    (here wild values) are never read or emitted."""
    vocab, num_k = 3, 3
    p = torch.tensor([[0.0, 1.0, 0.0]]).expand(4, num_k + 1, vocab).contiguous()
    p[:, num_k] = torch.tensor([0.0, 0.0, 1.0])  # row K differs from the draft rows
    x = torch.tensor([[1, 10**9, -7], [1, 1, 1], [1, 1, 10**12], [1, 1, 1]])
    n = torch.tensor([0, 5, 2, -3])
    res = launch(p, x, None, n, torch.zeros(4, num_k + 1), None, None, path=path)
    # u = 0 < p(x = 1) = 1 accepts every used draft; the token after them comes from row n_b
    assert res.num_accepted.tolist() == [0, 3, 2, 0]
    assert res.tokens.tolist() == [[1, -1, -1, -1], [1, 1, 1, 2], [1, 1, 1, -1], [1, -1, -1, -1]]


def test_equal_draft_and_target_accepts_everything(path):
    """p == q: u * q(x) < p(x) holds for every u < 1, so all K drafts are accepted and the bonus
    comes from p[K]."""
    rng = np.random.default_rng(0)
    p = torch.from_numpy(rng.dirichlet(np.ones(9), size=(64, 4)).astype(np.float32))
    q = p[:, :3].clone()
    x = torch.from_numpy(rng.integers(0, 9, size=(64, 3)))
    u = torch.full((64, 4), 1.0 - 2**-24)
    res = launch(p, x, q, None, u, None, None, path=path)
    assert res.num_accepted.tolist() == [3] * 64
    assert torch.equal(res.tokens[:, :3].cpu(), x.to(torch.int32))


@pytest.mark.parametrize("classic", [True, False])
def test_non_finite_probabilities_carry_no_mass(classic, path):
    """NaN / +-inf / negative target entries are never emitted (vLLM: NaN logits gave
    out-of-vocab ids); a row with no valid mass emits -1 with valid = False."""
    bad_row = [NAN, INF, -INF, -1.0, 0.0]
    mixed = [NAN, 0.25, INF, -0.5, 0.25]
    p = torch.tensor([[mixed, mixed], [bad_row, bad_row], [mixed, bad_row]])
    q = (
        torch.tensor([[[0.0, 0.0, 0.0, 0.0, 1.0]], [[0.2] * 5], [[0.0, 1.0, 0.0, 0.0, 0.0]]])
        if classic
        else None
    )
    x = torch.tensor([[0], [1], [1]])
    u_values = (0.0, 0.3, 0.7, 1.0 - 2**-24)
    reps = len(u_values)
    u = torch.tensor([[0.5, u_last] for u_last in u_values for _ in range(3)])
    res = launch(p.repeat(reps, 1, 1), x.repeat(reps, 1), None if q is None else q.repeat(reps, 1, 1),
                  None, u, None, None, path=path)  # fmt: skip
    tokens = res.tokens.tolist()
    for r in range(0, 3 * reps, 3):
        # row 0: x = 0 has NaN target mass -> rejected; residual only on {1, 4}
        assert tokens[r][0] in (1, 4) and tokens[r][1] == -1, tokens
        # row 1: no valid mass anywhere: rejected, residual empty -> fallback -> p empty -> invalid
        assert tokens[r + 1] == [-1, -1]
        # row 2: x = 1 rejected (0.5 * q(1) = 0.5 >= 0.25; one-hot 0.5 >= 0.25); the residual
        # (p - q)^+ or p with x zeroed keeps only token 4; the invalid bonus row is never used
        assert tokens[r + 2] == [4, -1]
    assert res.valid.tolist() == [True, False, True] * reps
    assert res.fallback.tolist()[1::3] == [True] * reps


def test_bonus_row_without_mass_is_invalid_not_fallback(path):
    """All drafts accepted and p[K] has no valid mass: token -1, valid False, fallback False."""
    p = torch.tensor([[[0.0, 1.0], [NAN, -1.0]]])
    res = launch(p, torch.tensor([[1]]), None, None, torch.tensor([[0.5, 0.5]]), None, None, path=path)
    assert res.tokens.tolist() == [[1, -1]]
    assert res.num_accepted.tolist() == [1]
    assert res.valid.tolist() == [False] and res.fallback.tolist() == [False]


@pytest.mark.parametrize("block_v", [None, 4])
@pytest.mark.parametrize("vocab", [5, 7, 9])
def test_tile_tail_lanes_never_win(vocab, block_v, path):
    """V not a multiple of the chunk: the masked lanes past V carry no mass and no index >= V is
    ever returned (vLLM GHSA-8wr5-jm2h-8r4f: tail lanes won an argmax and emitted id >= V)."""
    u_values = (0.0, 0.5, 1.0 - 2**-24)
    p = torch.zeros(3, 1, vocab)
    p[0, 0, vocab - 1] = 1.0  # only the last real lane
    p[1, 0, 0] = 1.0  # only the first lane
    p[2, 0, vocab - 2 :] = 0.5
    u = torch.tensor([[u_last] for u_last in u_values for _ in range(3)])
    res = launch(p.repeat(3, 1, 1), torch.empty(9, 0, dtype=torch.int64), None, None, u, None, None,
                  path=path, block_v=block_v)  # fmt: skip
    want = [[vocab - 1, 0, vocab - 2 if u_last < 0.5 else vocab - 1] for u_last in u_values]
    assert res.tokens[:, 0].tolist() == [t for row in want for t in row]


def test_denormal_mass_and_u_near_one_pick_the_last_positive_token(path):
    """Denormal float32 probabilities are positive mass (the row is valid), and at u_K = 1 - 2^-24
    the token is the last positive one: never the zero-mass token after it, never V (a count of
    cumsum <= target that rounding pushed past every boundary would return V = 3 or, clamped, the
    zero-mass token 2; the kernel's guard returns the largest v with r_v > 0)."""
    tiny = 2.0**-149
    p = torch.tensor([[[tiny, tiny, 0.0]], [[0.0, tiny, 0.0]]])
    res = launch(p, torch.empty(2, 0, dtype=torch.int64), None, None, torch.full((2, 1), 1.0 - 2**-24),
                  None, None, path=path)  # fmt: skip
    assert res.tokens[:, 0].tolist() == [1, 1] and res.valid.tolist() == [True, True]


@pytest.mark.parametrize("classic", [True, False])
def test_exact_ties_reject_the_draft(classic, path):
    """The acceptance tests are strict (docs/semantics.md): m_0 q(x) < p(x), one-hot m_0 < p(x). At u_0 = 0
    (m_0 = 2^-25) with q(x) = 1 and p(x) = 2^-25 both sides are equal in float64, so the draft is rejected;
    a `<=` accepts it. The float64 reference agrees on the whole output."""
    from specsample.reference.chain import chain_rejection_reference

    tie = 2.0**-25
    p = torch.tensor([[[tie, 0.5, 0.5 - tie], [0.25, 0.5, 0.25]]])
    q = torch.tensor([[[1.0, 0.0, 0.0]]]) if classic else None
    x, u = torch.tensor([[0]]), torch.tensor([[0.0, 0.5]])
    res = launch(p, x, q, None, u, None, None, path=path)
    ref = chain_rejection_reference(
        p.numpy(), x.numpy(), None if q is None else q.numpy(), uniforms=u.numpy()
    )
    assert res.num_accepted.tolist() == [0]
    assert res.tokens.tolist() == ref.tokens.tolist()


def test_inverse_cdf_ties_go_to_the_next_token(path):
    """The token is the smallest v with cumsum(r)[v] > m_K sum(r), strictly. u_K = 0.5 - 2^-25 (a float32
    off the 2^-24 grid) makes m_K = 0.5 exactly, and each row's prefix reaches half its total exactly at a
    boundary: between two chunks of 2 columns inside one span (row 0: token 2) and between two spans of
    2 x 2 columns (row 1: token 4), and between lanes of the one-chunk plan (both). A `>=` at the lanes,
    the chunks or the spans, or a mass-before-the-chunk that leaves out the chunk at the tie, emits an
    earlier token. The float64 reference agrees."""
    from specsample.reference.chain import chain_rejection_reference

    p = torch.tensor([[[0.5, 0.0, 0.25, 0.25, 0.0, 0.0]], [[0.5, 0.0, 0.0, 0.0, 0.25, 0.25]]])
    u = torch.full((2, 1), 0.5 - 2.0**-25)
    assert float(u[0, 0]) + 2.0**-25 == 0.5  # the design: m_K = 0.5 exactly
    x = torch.empty(2, 0, dtype=torch.int64)
    res = launch(p, x, None, None, u, None, None, path=path)
    ref = chain_rejection_reference(p.numpy(), x.numpy(), None, uniforms=u.numpy())
    assert res.tokens[:, 0].tolist() == [2, 4]
    assert ref.tokens[:, 0].tolist() == [2, 4]


@pytest.mark.parametrize("classic", [True, False])
def test_u_one_takes_the_rounding_guard_to_the_last_positive_token(classic, path):
    """docs/semantics.md: if no v has cumsum(r)[v] > m_K sum(r), the token is the largest v with r[v] > 0.
    For uniforms in [0, 1) rounding never gets there (m_K sum(r) stays 2^-25 sum(r) below the total), so
    the guard is reached only by u_K = 1.0, which `validate=True` refuses; without it the token is still
    one of positive mass, never a later zero-mass token, never V. Bonus rows (n = 0) and a rejected draft
    whose residual is empty (the fallback to p); the float64 reference agrees."""
    from specsample.reference.chain import chain_rejection_reference

    rows = [[0.0, 0.3, 0.0, 0.7, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0, 0.0], [0.0] * 5 + [1.0],
            [0.0, 0.2, 0.3, 0.0, 0.0, 0.0]]  # fmt: skip
    want = [3, 1, 5, 2]
    p = torch.tensor([[row, row] for row in rows])
    q = 2 * p[:, :1] if classic else None  # classic: q = 2p, the residual is empty -> fallback
    # n = 0: the bonus row p[0]; n = 1: x = 1 is rejected at u_0 = 0.9 (p/q = 1/2; one-hot p(1) = 0.2)
    n = torch.tensor([0, 0, 0, 1])
    x = torch.ones(4, 1, dtype=torch.int64)
    u = torch.tensor([[0.9, 1.0]] * 4)
    res = launch(p, x, q, n, u, None, None, path=path)
    ref = chain_rejection_reference(p.numpy(), x.numpy(), None if q is None else q.numpy(),
                                    num_draft_tokens=n.numpy(), uniforms=u.numpy())  # fmt: skip
    emitted = res.tokens.cpu()[torch.arange(4), res.num_accepted.cpu().long()].tolist()  # DEVICE may be cuda
    assert emitted == want, res.tokens.tolist()
    assert res.tokens.tolist() == ref.tokens.tolist()
    assert res.fallback.tolist() == [False, False, False, classic]
    assert res.valid.tolist() == [True] * 4


@pytest.mark.parametrize("classic", [True, False])
def test_largest_finite_probability_is_mass_not_infinity(classic, path):
    """The clean keeps a <= FLT_MAX (it compares with the largest float32, not with inf, for speed):
    FLT_MAX itself is finite mass. Request 0 accepts its draft and draws the bonus row (FLT_MAX, 1,
    0); request 1 rejects x = 2 (p(x) = 0) and draws the residual, whose token 0 holds FLT_MAX. At
    u_K = 0.5 both emit token 0; a clean that dropped FLT_MAX (a < FLT_MAX) emits token 1 (the
    mutation sweep's survivor `_clean32:93:<=`, ci/mutation_results/)."""
    big = float(np.finfo(np.float32).max)
    p = [[[0.5, 0.5, 0.0], [big, 1.0, 0.0]], [[big, 1.0, 0.0], [0.5, 0.5, 0.0]]]
    q = [[[1.0, 0.0, 0.0]], [[0.0, 0.5, 0.5]]] if classic else None
    res = run(p, [[0], [2]], q, [[0.1, 0.5], [0.1, 0.5]], path=path)
    assert res.tokens.tolist() == [[0, 0], [0, -1]]
    assert res.num_accepted.tolist() == [1, 0]
    assert res.valid.tolist() == [True, True] and res.fallback.tolist() == [False, False]


def test_output_layout_accepted_prefix_then_token_then_padding(path):
    """tokens = [x_0 .. x_{a-1}, emitted, -1 ...] with a = first rejection."""
    vocab, num_k = 6, 4
    p = torch.full((1, num_k + 1, vocab), 1.0 / vocab)
    x = torch.tensor([[3, 5, 1, 2]])
    u = torch.tensor([[0.0, 0.1, 0.9, 0.0, 0.0]])  # accept, accept, reject (0.9 >= 1/6)
    res = launch(p, x, None, None, u, None, None, path=path)
    assert res.num_accepted.tolist() == [2]
    assert res.tokens.tolist() == [[3, 5, 0, -1, -1]]  # residual drops x_2 = 1: first token 0


@pytest.mark.skipif(
    DEVICE == "cuda", reason="ci/gpu/chain_gpu.py checks > 2^31-element batches in device memory"
)
def test_index_arithmetic_is_int64(tmp_path):
    """Element offsets beyond 2^31: row 1 of p starts at element 2^31 of a sparse memory-mapped
    buffer (only the touched pages exist). int32 offsets would wrap and read row 0's zeros."""
    vocab, num_k = 1000, 1
    size = 2**31 + 2 * vocab * (num_k + 1)
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as handle:
        handle.truncate(size * 2)
    storage = torch.from_file(str(path), shared=True, size=size, dtype=torch.float16)
    p = storage.as_strided((2, num_k + 1, vocab), (2**31, vocab, 1))
    q = storage.as_strided((2, num_k, vocab), (2**31 + vocab, vocab, 1))  # q[b] = p[b, 1]
    p[1, 0, 700] = 1.0  # target: all mass on 700
    p[1, 1, 123] = 1.0  # bonus row of request 1 and its draft row
    x = torch.tensor([[0], [700]])
    res = chain_rejection_sample(p, x, q, uniforms=torch.tensor([[0.5, 0.5], [0.5, 0.5]]))
    # request 1: q(700) = 0 -> rejected; residual max(0, p - q) = delta_700
    assert res.tokens[1].tolist() == [700, -1] and res.num_accepted[1].item() == 0
    assert res.tokens[0].tolist() == [-1, -1] and res.valid.tolist() == [False, True]


@pytest.mark.parametrize("rejected", [True, False])
def test_u_zero_does_not_emit_a_negligible_first_token(rejected, path):
    """The inverse CDF is evaluated at u_K + 2^-25 (the midpoint of u_K's 2^-24 cell): at u_K = 0 the
    token is the one holding mass fraction 2^-25, not the first token of positive mass. Residual
    (0, 1e-30, 0.5, 0.5), or (0, 1e-30, 0.5, 0) after a rejection: token 2. Evaluating at u_K
    itself emits token 1, of mass 1e-30, whenever u_K = 0 (probability 2^-24 per row): the bias
    `specsample verify --budget full` found on the H200 (run 16). Kernel and float64 reference both;
    the rejected row draws from max(0, p - q)."""
    from specsample.reference.chain import chain_rejection_reference

    row = [0.0, 1e-30, 0.5, 0.5]
    if rejected:  # draft 3 rejected at u = 0.9 (p/q = 0.5): residual max(0, p - q) = (0, 1e-30, 0.5, 0)
        p, x, q = [[row, row]], [[3]], [[[0.0, 0.0, 0.0, 1.0]]]
    else:  # no drafts: the bonus row
        p, x, q = [[row]], [[]], None
    u = [[0.9, 0.0]] if rejected else [[0.0]]
    res = run(p, x, q, u, path=path)
    ref = chain_rejection_reference(
        np.asarray(p, np.float32), np.asarray(x, np.int64).reshape(1, -1),
        None if q is None else np.asarray(q, np.float32), uniforms=np.asarray(u, np.float32),
    )  # fmt: skip
    emitted = res.tokens[0, res.num_accepted[0]].item()
    assert res.num_accepted.tolist() == [0] and emitted == 2, res.tokens.tolist()
    assert ref.tokens[0].tolist() == res.tokens[0].tolist()


@pytest.mark.parametrize("classic", [True, False])
def test_u_zero_rejects_a_draft_of_negligible_ratio(classic, path):
    """Acceptance compares the uniform's cell midpoint u + 2^-25 (docs/semantics.md): at u_0 = 0 a
    draft with p(x) = 1e-30 (q(x) = 0.5) is rejected, and the residual draws token 2 or 3. Comparing
    u itself accepts it (0 * q < p), a bias of 2^-24 towards negligible events. Kernel and float64
    reference both."""
    from specsample.reference.chain import chain_rejection_reference

    p = [[[0.0, 1e-30, 0.5, 0.5], [0.25, 0.25, 0.25, 0.25]]]
    q = [[[0.0, 0.5, 0.5, 0.0]]] if classic else None
    u = [[0.0, 0.5]]
    res = run(p, [[1]], q, u, path=path)
    ref = chain_rejection_reference(np.asarray(p, np.float32), np.array([[1]]),
                                    None if q is None else np.asarray(q, np.float32),
                                    uniforms=np.asarray(u, np.float32))  # fmt: skip
    assert res.num_accepted.tolist() == [0] and ref.num_accepted.tolist() == [0]
    assert res.tokens[0].tolist() == ref.tokens[0].tolist() and res.tokens[0, 0].item() in (2, 3)
