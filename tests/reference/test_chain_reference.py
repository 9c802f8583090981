"""The float64 chain reference: its outputs follow the exact laws (designed chi-square), its
inverse CDF is exact on a stratified grid, and it follows every edge semantic of DESIGN.md §1 /
docs/semantics.md. Each edge test is one that SGLang's (norm_sum == 0 -> V-1), vLLM's (-> token 0)
or FlashInfer's (garbage / -1, unguarded reads) behaviour fails."""

import tracemalloc

import numpy as np
import pytest

from specsample.reference.chain import (
    UNIFORM_HALF_STEP,
    chain_rejection_reference,
    chain_seeded_uniforms,
    clean_mass,
)
from specsample.reference.laws import chain_conditional_law, chain_marginal_law
from specsample.reference.philox import chain_uniforms
from specsample.stats import assert_gof, chi2_min_samples, test_seed

ALPHA, BETA, EPS = 1e-6, 1e-6, 0.01


def _design_n(cells: int) -> int:
    """Rows for a chi-square over `cells` cells: detects TV >= EPS with power >= 1 - BETA at a
    nominal level 1e-7 (below ALPHA, leaving room for the sparse-cell split of assert_gof)."""
    return int(1.2 * chi2_min_samples(cells, EPS, 1e-7, BETA))


def _joint_counts(res, vocab: int, num_k: int) -> np.ndarray:
    """Counts of (a, token) cells, cell a * (V+1) + token, token V standing for an emitted -1."""
    emitted = res.tokens[np.arange(res.tokens.shape[0]), res.num_accepted]
    column = np.where(res.valid, emitted, vocab)
    return np.bincount(res.num_accepted * (vocab + 1) + column, minlength=(num_k + 1) * (vocab + 1))


def _rows(rng, vocab, num_k):
    p = rng.dirichlet(np.full(vocab, 0.7), size=num_k + 1)
    q = rng.dirichlet(np.full(vocab, 0.7), size=num_k)
    p[:, 0] = 0.0  # a zero-probability token in every target row: never emitted
    p /= p.sum(axis=1, keepdims=True)
    return p, q


def _broadcast(p, q, x, rows):
    num_k = x.shape[0]
    return (
        np.broadcast_to(p.astype(np.float32), (rows, num_k + 1, p.shape[1])),
        None if q is None else np.broadcast_to(q.astype(np.float32), (rows, num_k, q.shape[1])),
        np.broadcast_to(x, (rows, num_k)),
    )


@pytest.mark.parametrize("draft", ["classic", "one_hot"])
def test_fixed_drafts_follow_conditional_law(draft, request):
    """Fixed drafts, float32 inputs, stride-0 rows, float64 uniforms: the (a, token) counts over
    (K+1)(V+1) = 28 cells follow chain_conditional_law. alpha = 1e-6, power 1 - 1e-6 at TV
    eps = 0.01, n = _design_n(28) (~5e5 rows)."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    vocab, num_k = 6, 3
    p, q = _rows(rng, vocab, num_k)
    x = np.array([1, 2, 3])
    if draft == "one_hot":
        q = None
    p32, q32, _ = _broadcast(p, q, x, 1)
    law = chain_conditional_law(p32[0], None if q is None else q32[0], x)
    n = _design_n((num_k + 1) * (vocab + 1))
    pb, qb, xb = _broadcast(p, q, x, n)
    res = chain_rejection_reference(pb, xb, qb, uniforms=rng.random((n, num_k + 1)))
    counts = _joint_counts(res, vocab, num_k)
    assert_gof(
        counts, law.joint_with_invalid().ravel(), eps=EPS, alpha=ALPHA, beta=BETA, seed=seed, label=draft
    )


def test_drafts_from_q_follow_marginal_law_with_ragged_counts(request):
    """Drafts x_i ~ q_i per row, num_draft_tokens n_b uniform on {0..K}: the (n_b, a, token)
    counts follow (1/(K+1)) chain_marginal_law(p, q, n) over sum_n (n+1)(V+1) = 50 cells.
    alpha = 1e-6, power 1 - 1e-6 at TV eps = 0.01, n = _design_n(50)."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    vocab, num_k = 4, 3
    p, q = _rows(rng, vocab, num_k)
    laws = [chain_marginal_law(p, q, m).joint_with_invalid().ravel() / (num_k + 1) for m in range(num_k + 1)]
    offsets = np.cumsum([0] + [law.size for law in laws])
    n = _design_n(int(offsets[-1]))
    cum_q = np.cumsum(q, axis=1)
    x = np.stack([np.argmax(cum_q[i][None, :] > rng.random((n, 1)), axis=1) for i in range(num_k)], axis=1)
    counts_n = rng.integers(0, num_k + 1, size=n)
    pb, qb = np.broadcast_to(p, (n, num_k + 1, vocab)), np.broadcast_to(q, (n, num_k, vocab))
    res = chain_rejection_reference(pb, x, qb, uniforms=rng.random((n, num_k + 1)), num_draft_tokens=counts_n)
    counts = np.zeros(offsets[-1], dtype=np.int64)
    for m in range(num_k + 1):
        rows = counts_n == m
        sub = res._replace(**{f: getattr(res, f)[rows] for f in ("tokens", "num_accepted", "valid")})
        counts[offsets[m] : offsets[m + 1]] = _joint_counts(sub, vocab, m)
    assert_gof(
        counts, np.concatenate(laws), eps=EPS, alpha=ALPHA, beta=BETA, seed=seed, label="ragged marginal"
    )


def test_seeded_uniforms_follow_conditional_law(request):
    """The seeded path: uniforms from the Philox chain stream (one seed per row, offsets 0..n-1)
    drive the reference; (a, token) counts follow chain_conditional_law over 28 cells.
    alpha = 1e-6, power 1 - 1e-6 at TV eps = 0.01, n = _design_n(28)."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    vocab, num_k = 6, 3
    p, q = _rows(rng, vocab, num_k)
    x = np.array([4, 1, 5])
    n = _design_n((num_k + 1) * (vocab + 1))
    seeds = np.full(n, seed & ((1 << 62) - 1), dtype=np.int64) + np.arange(n) % 7
    uniforms = chain_seeded_uniforms(seeds, np.arange(n, dtype=np.int64), num_k)
    pb, qb, xb = _broadcast(p, q, x, n)
    res = chain_rejection_reference(pb, xb, qb, uniforms=uniforms)
    law = chain_conditional_law(pb[0], qb[0], x)
    assert_gof(
        _joint_counts(res, vocab, num_k),
        law.joint_with_invalid().ravel(),
        eps=EPS,
        alpha=ALPHA,
        beta=BETA,
        seed=seed,
    )


def test_seeded_uniforms_are_the_philox_chain_stream():
    """chain_seeded_uniforms(seeds, offsets, K) is reference.philox.chain_uniforms with K+1 columns:
    multiples of 2^-24 in [0, 1)."""
    seeds = np.array([0, 1234, 2**40 + 7, 2**63 - 1], dtype=np.int64)
    offsets = np.array([0, 5, 2**33, 17], dtype=np.int64)
    u = chain_seeded_uniforms(seeds, offsets, 3)
    np.testing.assert_array_equal(u, chain_uniforms(seeds, offsets, 4))
    assert u.shape == (4, 4) and np.all((u >= 0) & (u < 1)) and np.all(u * 2**24 == np.floor(u * 2**24))


@pytest.mark.parametrize("path", ["bonus", "fallback"])
def test_inverse_cdf_exact_on_stratified_grid(path):
    """Deterministic: with u_K = (k + 1/2)/N, k = 0..N-1, the emitted counts satisfy
    |count_v - N r_v| < 1 for the normalised distribution r drawn from (bonus row with n = 0; or
    the target row after a norm_sum == 0 rejection). No randomness."""
    big_n = 20_000
    p = np.array([0.0, 0.1, 0.0, 0.25, 0.15, 0.5, 0.0])
    r = p / p.sum()
    u = np.zeros((big_n, 2))
    u[:, 1] = (np.arange(big_n) + 0.5) / big_n
    target = np.broadcast_to(p, (big_n, 2, 7))
    if path == "bonus":
        res = chain_rejection_reference(
            target, np.full((big_n, 1), 3), uniforms=u, num_draft_tokens=np.zeros(big_n, np.int64)
        )
    else:
        u[:, 0] = 0.75  # u q(x) = 0.75 * 2 p(x) >= p(x): rejected, max(0, p - 2p) = 0
        res = chain_rejection_reference(
            target, np.full((big_n, 1), 3), np.broadcast_to(2 * p, (big_n, 1, 7)), uniforms=u
        )
        assert res.fallback.all() and (res.num_accepted == 0).all()
    counts = np.bincount(res.tokens[:, 0], minlength=7)
    assert np.all(np.abs(counts - big_n * r) < 1.0), counts


# ------------------------------------------------------------------------------------------------
# Edge semantics (DESIGN.md §1, docs/semantics.md)


def test_never_emits_a_zero_probability_token(request):
    """Sparse targets (token 0 and V-1 always zero, ~half the rest zero), random drafts and
    uniforms including 0 and 1 - 2^-24: every emitted token has positive cleaned mass in the
    row it was drawn from (residual, or target on fallback / bonus). vLLM returns 0 and SGLang
    V-1 on an empty residual: both are zero-mass tokens here."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    rows, num_k, vocab = 20_000, 3, 9
    p = rng.random((rows, num_k + 1, vocab)) * (rng.random((rows, num_k + 1, vocab)) < 0.5)
    p[:, :, [0, vocab - 1]] = 0.0
    p[:, :, 4] += 1e-3
    q = rng.random((rows, num_k, vocab)) * (rng.random((rows, num_k, vocab)) < 0.7)
    q[:, :, 4] += 1e-3
    x = rng.integers(0, vocab, size=(rows, num_k))
    u = rng.random((rows, num_k + 1))
    u[rng.random(u.shape) < 0.2] = 0.0
    u[rng.random(u.shape) < 0.2] = 1 - 2**-24
    for draft_probs in (q, None):
        res = chain_rejection_reference(p, x, draft_probs, uniforms=u)
        assert res.valid.all()
        idx = np.arange(rows)
        a, token = res.num_accepted, res.tokens[idx, res.num_accepted]
        assert np.all(p[idx, a, token] > 0)
        rejected = (a < num_k) & ~res.fallback
        if draft_probs is None:
            assert np.all(token[rejected] != x[idx, np.minimum(a, num_k - 1)][rejected])
        else:
            residual = p[idx, a, token] - q[idx, np.minimum(a, num_k - 1), token]
            assert np.all(residual[rejected] > 0)


def test_empty_residual_falls_back_to_target_not_first_or_last_token():
    """norm_sum == 0 (classic: q = 2p so max(0, p - q) = 0; one-hot: p = 0.5 delta_x): the token
    is drawn from p and fallback is set. p(0) = p(V-1) = 0, so vLLM's token 0 and SGLang's V-1
    both fail; the fallback draw equals the inverse CDF of p at u_K."""
    p = np.array([0.0, 0.2, 0.3, 0.5, 0.0])
    u_k = np.array([0.1, 0.3, 0.6, 0.99])
    rows = u_k.size
    u = np.stack([np.full(rows, 0.75), u_k], axis=1)
    target = np.broadcast_to(p, (rows, 2, 5))
    classic = chain_rejection_reference(
        target, np.full((rows, 1), 2), np.broadcast_to(2 * p, (rows, 1, 5)), uniforms=u
    )
    np.testing.assert_array_equal(classic.tokens[:, 0], [1, 2, 3, 3])
    assert classic.fallback.all() and classic.valid.all() and (classic.num_accepted == 0).all()
    point = np.broadcast_to(np.array([0.0, 0.0, 0.5, 0.0, 0.0]), (rows, 2, 5))
    one_hot = chain_rejection_reference(point, np.full((rows, 1), 2), uniforms=u)
    np.testing.assert_array_equal(one_hot.tokens[:, 0], [2, 2, 2, 2])
    assert one_hot.fallback.all() and (one_hot.num_accepted == 0).all()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_out_of_range_draft_ids_are_rejected_without_indexing(dtype):
    """Ids -1 (padding), V, 2^31-1 (and int64 extremes) are rejected even at u = 0 where any
    gathered value would be accepted, raise no IndexError, and the emitted token comes from the
    position's residual: classic max(0, p - q), one-hot p unchanged."""
    vocab = 4
    info = np.iinfo(dtype)
    ids = np.array([-1, vocab, 2**31 - 1, info.min, info.max], dtype=dtype)
    rows = ids.size
    p = np.broadcast_to(np.array([[0.1, 0.2, 0.3, 0.4], [0.25] * 4]), (rows, 2, vocab))
    q = np.broadcast_to(np.array([[0.4, 0.3, 0.2, 0.1]]), (rows, 1, vocab))
    u = np.zeros((rows, 2))
    u[:, 1] = 0.35
    classic = chain_rejection_reference(p, ids[:, None], q, uniforms=u)
    assert (classic.num_accepted == 0).all() and not classic.fallback.any()
    np.testing.assert_array_equal(classic.tokens[:, 0], 3)  # residual [0, 0, .1, .3]: cdf > 0.14 at 3
    one_hot = chain_rejection_reference(p, ids[:, None], uniforms=u)
    assert (one_hot.num_accepted == 0).all()
    np.testing.assert_array_equal(one_hot.tokens[:, 0], 2)  # p: cdf [.1, .3, .6, 1] > 0.35 at 2
    assert (classic.tokens[:, 1] == -1).all() and (one_hot.tokens[:, 1] == -1).all()


def test_zero_draft_probability_is_rejected():
    """q(x) = 0 (or NaN / inf, cleaned to 0) with p(x) = 0.9 and u = 0: rejected. A sampler that
    tests u < p/q (division) or u q < p without the q > 0 guard accepts it."""
    p = np.broadcast_to(np.array([[0.9, 0.05, 0.05], [1.0, 0.0, 0.0]]), (3, 2, 3))
    q = np.array([[[0.0, 0.5, 0.5]], [[np.nan, 0.5, 0.5]], [[np.inf, 0.5, 0.5]]])
    res = chain_rejection_reference(p, np.zeros((3, 1), np.int64), q, uniforms=np.zeros((3, 2)))
    assert (res.num_accepted == 0).all()
    assert (res.tokens[:, 0] == 0).all()  # residual max(0, p - clean(q)) = [0.9, 0, 0]


def test_nonfinite_and_negative_entries_carry_no_mass():
    """NaN, +inf, -inf and negative target entries are zero mass: a draft sitting on one is
    rejected at u = 0 (u < inf would accept it), and no such token is ever emitted over a
    stratified grid of u_K; their finite neighbours are drawn in proportion."""
    row = np.array([np.nan, 0.3, np.inf, -0.5, 0.7, -np.inf])
    big_n = 1000
    p = np.broadcast_to(row, (big_n, 2, 6))
    u = np.zeros((big_n, 2))
    u[:, 1] = (np.arange(big_n) + 0.5) / big_n
    for x in (0, 2, 3):
        res = chain_rejection_reference(p, np.full((big_n, 1), x), uniforms=u)
        assert (res.num_accepted == 0).all()
        counts = np.bincount(res.tokens[:, 0], minlength=6)
        np.testing.assert_array_equal(counts, [0, 300, 0, 0, 700, 0])
    res = chain_rejection_reference(
        p, np.full((big_n, 1), 1), np.broadcast_to(row[None], (big_n, 1, 6)), uniforms=u
    )
    assert (res.num_accepted == 1).all()  # q(1) = p(1): always accepted; bonus from cleaned row
    np.testing.assert_array_equal(np.bincount(res.tokens[:, 1], minlength=6), [0, 300, 0, 0, 700, 0])


def test_row_without_mass_emits_minus_one_and_invalid():
    """A bonus row of NaN / 0 / negatives emits -1 with valid False (fallback False); a rejected
    row whose residual and target both lack mass emits -1 with fallback True, valid False. The
    anchors emit an id here (0, V-1 or uninitialised memory)."""
    dead = np.array([np.nan, 0.0, -1.0, -np.inf])
    alive = np.array([0.25, 0.25, 0.25, 0.25])
    bonus = chain_rejection_reference(
        np.stack([alive, dead])[None], np.array([[1]]), uniforms=np.array([[0.1, 0.5]])
    )  # accepted (0.1 < 0.25), bonus row dead
    np.testing.assert_array_equal(bonus.tokens, [[1, -1]])
    assert bonus.num_accepted[0] == 1 and not bonus.valid[0] and not bonus.fallback[0]
    rejected = chain_rejection_reference(
        np.stack([dead, alive])[None], np.array([[1]]), dead[None, None], uniforms=np.array([[0.1, 0.5]])
    )
    np.testing.assert_array_equal(rejected.tokens, [[-1, -1]])
    assert rejected.num_accepted[0] == 0 and not rejected.valid[0] and rejected.fallback[0]


def test_ragged_counts_zero_and_full():
    """n_b = 0: no draft is tested even if it would be accepted, the bonus comes from p[0];
    n_b = K: all accepted, bonus from p[K]; counts outside [0, K] are clamped."""
    p = np.broadcast_to(np.eye(3)[[0, 1, 2]], (4, 3, 3))  # p_i = delta_i: draft i is certain
    x = np.broadcast_to(np.array([0, 1]), (4, 2))
    u = np.full((4, 3), 0.5)
    res = chain_rejection_reference(p, x, uniforms=u, num_draft_tokens=np.array([0, 2, -3, 9]))
    np.testing.assert_array_equal(res.num_accepted, [0, 2, 0, 2])
    np.testing.assert_array_equal(res.tokens, [[0, -1, -1], [0, 1, 2], [0, -1, -1], [0, 1, 2]])
    assert res.valid.all() and not res.fallback.any()
    np.testing.assert_array_equal(res.emit_position, [0, 2, 0, 2])


def test_zero_uniform_rejects_zero_probability_draft():
    """u = 0 and p(x) = 0: rejected (strict u q(x) < p(x); the `<=` bug accepts it and emits a
    zero-probability draft), classic and one-hot."""
    p = np.array([[[0.0, 0.6, 0.4], [0.0, 0.5, 0.5]]])
    x = np.array([[0]])
    u = np.array([[0.0, 0.5]])
    for q in (np.array([[[0.5, 0.25, 0.25]]]), None):
        res = chain_rejection_reference(p, x, q, uniforms=u)
        assert res.num_accepted[0] == 0 and res.tokens[0, 0] != 0 and not res.ambiguous[0]


def test_stride0_inputs_match_materialised_and_are_not_copied(request):
    """np.broadcast_to inputs (stride 0 over the batch) give exactly the outputs of materialised
    copies, and the reference never allocates the B (K+1) V float64 tensor: peak traced memory
    stays below a tenth of it."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    rows, num_k, vocab = 1500, 3, 4096
    p1 = rng.dirichlet(np.ones(vocab), size=(1, num_k + 1)).astype(np.float32)
    q1 = rng.dirichlet(np.ones(vocab), size=(1, num_k)).astype(np.float32)
    p, q = np.broadcast_to(p1, (rows, num_k + 1, vocab)), np.broadcast_to(q1, (rows, num_k, vocab))
    x = np.broadcast_to(np.argmax(p1[0, :num_k], axis=1), (rows, num_k))
    u = rng.random((rows, num_k + 1))
    tracemalloc.start()
    res = chain_rejection_reference(p, x, q, uniforms=u)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < rows * (num_k + 1) * vocab * 8 / 10, peak
    dense = chain_rejection_reference(
        np.ascontiguousarray(p), np.ascontiguousarray(x), np.ascontiguousarray(q), uniforms=u
    )
    for field in res._fields:
        np.testing.assert_array_equal(getattr(res, field), getattr(dense, field), err_msg=field)


def test_rounding_guard_returns_last_token_with_mass():
    """If no v has cumsum(r)[v] > u_K sum(r) (u_K = 1 is outside the contract but reachable by a
    buggy caller), the token is the largest v with r[v] > 0, never V-1 when p(V-1) = 0."""
    p = np.array([[[0.0, 0.4, 0.6, 0.0, 0.0]]])
    res = chain_rejection_reference(p, np.zeros((1, 0), np.int64), uniforms=np.array([[1.0]]))
    assert res.tokens[0, 0] == 2 and res.valid[0]


def test_ambiguity_flags_boundary_decisions(request):
    """ambiguous marks rows whose decision sits within relative tol of a boundary: m q = p
    exactly (m = u + 2^-25; tol = 0), a near-tie under tol = 1e-6 but not under tol = 0, an
    inverse-CDF tie m_K sum(r) = cumsum(r)[v]; it stays False for decisions no perturbation can flip
    (p(x) = 0)."""
    p = np.array([[[0.25, 0.75], [0.5, 0.5]]])
    q = np.array([[[0.5, 0.5]]])
    x = np.array([[0]])
    tie = chain_rejection_reference(p, x, q, uniforms=np.array([[0.5 - UNIFORM_HALF_STEP, 0.9]]))
    assert tie.num_accepted[0] == 0 and tie.ambiguous[0]
    near = np.array([[0.5 * (1 + 1e-8) - UNIFORM_HALF_STEP, 0.9]])
    assert chain_rejection_reference(p, x, q, uniforms=near, tol=1e-6).ambiguous[0]
    assert not chain_rejection_reference(p, x, q, uniforms=near, tol=0.0).ambiguous[0]
    cdf_tie = chain_rejection_reference(p, x, q, uniforms=np.array([[0.9, 0.0]]))  # residual [0, 1]
    assert not cdf_tie.ambiguous[0]
    # (u_K + 2^-25) * sum(r) = 0.25 = cumsum(r)[0]: the inverse CDF sits exactly on a boundary
    bonus_u = np.array([[0.25 - UNIFORM_HALF_STEP]])
    bonus_tie = chain_rejection_reference(p[:, :1], np.zeros((1, 0), np.int64), uniforms=bonus_u)
    assert bonus_tie.tokens[0, 0] == 1 and bonus_tie.ambiguous[0]
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    random = chain_rejection_reference(
        np.broadcast_to(p, (10_000, 2, 2)),
        np.zeros((10_000, 1), np.int64),
        np.broadcast_to(q, (10_000, 1, 2)),
        uniforms=rng.random((10_000, 2)),
    )
    assert not random.ambiguous.any()


def test_clean_mass():
    """clean(a) = a if finite and > 0 else 0."""
    np.testing.assert_array_equal(
        clean_mass([np.nan, np.inf, -np.inf, -1.0, 0.0, 2.5, 1e-300]), [0, 0, 0, 0, 0, 2.5, 1e-300]
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"target_probs": np.zeros((2, 3))}, ValueError, "target_probs"),
        ({"target_probs": np.zeros((2, 3, 4), np.int64)}, TypeError, "target_probs"),
        ({"draft_token_ids": np.zeros((2, 3), np.int64)}, ValueError, "draft_token_ids"),
        ({"draft_token_ids": np.zeros((2, 2))}, TypeError, "draft_token_ids"),
        ({"draft_probs": np.zeros((2, 2, 5))}, ValueError, "draft_probs"),
        ({"uniforms": np.zeros((2, 2))}, ValueError, "uniforms"),
        ({"num_draft_tokens": np.zeros(3, np.int64)}, ValueError, "num_draft_tokens"),
        ({"num_draft_tokens": np.zeros(2)}, TypeError, "num_draft_tokens"),
        ({"tol": -1.0}, ValueError, "tol"),
    ],
)
def test_metadata_errors_name_the_argument(kwargs, error, name):
    """Shape and dtype errors raise ValueError / TypeError naming the argument."""
    args = {
        "target_probs": np.zeros((2, 3, 4)),
        "draft_token_ids": np.zeros((2, 2), np.int64),
        "draft_probs": np.zeros((2, 2, 4)),
        "uniforms": np.zeros((2, 3)),
        "num_draft_tokens": None,
        "tol": 0.0,
    }
    args.update(kwargs)
    with pytest.raises(error, match=name):
        chain_rejection_reference(
            args.pop("target_probs"), args.pop("draft_token_ids"), args.pop("draft_probs"), **args
        )


def _literal_row(p, q, x, u, n):
    """docs/semantics.md transcribed line by line for one row, scalar Python floats (float64)."""
    clean = [[v if np.isfinite(v) and v > 0 else 0.0 for v in row] for row in p]
    clean_q = None if q is None else [[v if np.isfinite(v) and v > 0 else 0.0 for v in row] for row in q]
    vocab, num_k = len(p[0]), len(x)
    n = min(max(n, 0), num_k)
    a = 0
    for i in range(n):
        ok = 0 <= x[i] < vocab
        if clean_q is None:
            accept = ok and u[i] + 2.0**-25 < clean[i][x[i]]
        else:
            accept = ok and clean_q[i][x[i]] > 0 and (u[i] + 2.0**-25) * clean_q[i][x[i]] < clean[i][x[i]]
        if not accept:
            break
        a += 1
    fallback = False
    if a < n:
        if clean_q is None:
            r = list(clean[a])
            if 0 <= x[a] < vocab:
                r[x[a]] = 0.0
        else:
            r = [max(0.0, pv - qv) for pv, qv in zip(clean[a], clean_q[a], strict=True)]
        if sum(r) == 0:
            r, fallback = list(clean[a]), True
    else:
        r = list(clean[n])
    if sum(r) == 0:
        token, valid = -1, False
    else:
        valid, cum, token = True, 0.0, None
        total = float(np.cumsum(r)[-1])
        for v, rv in enumerate(r):
            cum += rv
            if cum > (u[num_k] + 2.0**-25) * total:
                token = v
                break
        if token is None:
            token = max(v for v, rv in enumerate(r) if rv > 0)
    return list(x[:a]) + [token] + [-1] * (num_k - a), a, fallback, valid


def test_vectorised_reference_matches_literal_semantics(request):
    """Adversarial rows (entries from {0, 0.25, 0.5, 1, 2, 1e-45, NaN, +-inf, -1}, ids from
    [-2, V+1] and 2^31-1, uniforms from {0, 0.25, 0.5, 0.75, 1 - 2^-24, random}, ragged counts in
    [-1, K+1]) so that ties u q = p, empty residuals and dead rows occur often: the vectorised
    reference equals a line-by-line transcription of docs/semantics.md on every row."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    rows, num_k, vocab = 3000, 3, 5
    values = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 1e-45, np.nan, np.inf, -np.inf, -1.0])
    weights = np.array([4, 5, 5, 3, 1, 1, 1, 1, 1, 1], dtype=float)
    p = rng.choice(values, size=(rows, num_k + 1, vocab), p=weights / weights.sum())
    q = rng.choice(values, size=(rows, num_k, vocab), p=weights / weights.sum())
    ids = np.array([-2, -1, 0, 1, 2, 3, 4, vocab, vocab + 1, 2**31 - 1])
    x = rng.choice(ids, size=(rows, num_k), p=np.array([1, 1, 4, 4, 4, 4, 4, 1, 1, 1]) / 25)
    u = rng.choice(
        np.array([0.0, 0.25, 0.5, 0.75, 1 - 2**-24]), size=(rows, num_k + 1), p=[0.3, 0.2, 0.2, 0.2, 0.1]
    )
    fresh = rng.random(u.shape) < 0.3
    u[fresh] = rng.random(int(fresh.sum()))
    n = rng.integers(-1, num_k + 2, size=rows)
    for draft_probs in (q, None):
        res = chain_rejection_reference(p, x, draft_probs, uniforms=u, num_draft_tokens=n)
        for b in range(rows):
            tokens, a, fallback, valid = _literal_row(
                p[b].tolist(),
                None if draft_probs is None else q[b].tolist(),
                x[b].tolist(),
                u[b].tolist(),
                int(n[b]),
            )
            got = (
                res.tokens[b].tolist(),
                int(res.num_accepted[b]),
                bool(res.fallback[b]),
                bool(res.valid[b]),
            )
            assert got == (tokens, a, fallback, valid), (
                b,
                draft_probs is None,
                got,
                (tokens, a, fallback, valid),
            )
