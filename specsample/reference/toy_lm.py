"""A toy target/draft language-model pair with explicit conditional tables, the speculative
decoding loop over it, and the exact laws of the sequences both produce.

The lossless property of speculative decoding: the first L tokens produced by repeated rounds
(K drafts from the draft model, verified against the target by a chain sampler, the accepted
drafts plus the emitted token appended) have exactly the law of L tokens sampled from the target
model one by one. `target_sequence_law` gives the latter; `speculative_sequence_law` computes the
former exactly by enumerating drafts and decisions with the exact per-round law
(`laws.chain_conditional_law`); `speculative_generate` runs the process with any sampler that has
`chain_rejection_reference`'s signature, vectorised over many independent sequences.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from specsample.reference.laws import chain_conditional_law

# How drafts are proposed and verified:
#   "classic"          x_i ~ q_i, the sampler receives q (classic chain rejection)
#   "one_hot_sampled"  x_i ~ q_i, the sampler receives no q (one-hot verification)
#   "greedy"           x_i = argmax q_i (first maximum), the sampler receives no q
DRAFT_MODES = ("classic", "one_hot_sampled", "greedy")


class ToyLanguageModel(NamedTuple):
    """An order-m Markov language model over V tokens.

    table  [V] * m + [V] float64: table[c_1, ..., c_m] is the law of the next token after the
           context (c_1, ..., c_m) (the last m tokens, oldest first); every row sums to 1.
    """

    table: np.ndarray

    @property
    def order(self) -> int:
        return self.table.ndim - 1

    @property
    def vocab_size(self) -> int:
        return self.table.shape[-1]

    def next_token_probs(self, context) -> np.ndarray:
        """[..., V]: the next-token law for contexts [..., m] (int, the last m tokens)."""
        context = np.asarray(context, dtype=np.int64)
        if context.shape[-1] != self.order:
            raise ValueError(f"context: expected last dim {self.order}, got shape {context.shape}")
        return self.table[tuple(np.moveaxis(context, -1, 0))]


def random_toy_lm(vocab_size: int, order: int, rng: np.random.Generator, *, concentration=1.0, zero_prob=0.0):
    """A model with Dirichlet(concentration) rows; each entry is then zeroed with probability
    `zero_prob` (never a whole row) and the row renormalised, so tables contain zero-probability
    tokens that a correct sampler must never emit."""
    if vocab_size < 1 or order < 1:
        raise ValueError(f"vocab_size and order: expected >= 1, got {vocab_size}, {order}")
    shape = (vocab_size,) * order
    table = rng.dirichlet(np.full(vocab_size, concentration), size=shape)
    if zero_prob > 0:
        drop = rng.random(table.shape) < zero_prob
        keep_one = rng.integers(0, vocab_size, size=shape)
        drop[(*np.indices(shape), keep_one)] = False
        table = np.where(drop, 0.0, table)
        table /= table.sum(axis=-1, keepdims=True)
    return ToyLanguageModel(table)


def _check_prompt(model: ToyLanguageModel, prompt) -> tuple:
    prompt = tuple(int(t) for t in np.asarray(prompt, dtype=np.int64).reshape(-1))
    if len(prompt) < model.order:
        raise ValueError(f"prompt: expected at least {model.order} tokens, got {len(prompt)}")
    if any(not 0 <= t < model.vocab_size for t in prompt):
        raise ValueError(f"prompt: token ids must lie in [0, {model.vocab_size}), got {prompt}")
    return prompt


def target_sequence_law(model: ToyLanguageModel, prompt, length: int) -> np.ndarray:
    """[V] * length: P(first `length` generated tokens = (t_1, ..., t_L)) when sampling the model
    token by token after `prompt` (at least `order` tokens)."""
    prompt = _check_prompt(model, prompt)
    vocab, m = model.vocab_size, model.order
    law = np.zeros((vocab,) * length)
    for seq in itertools.product(range(vocab), repeat=length):
        full = prompt + seq
        prob = 1.0
        for t in range(length):
            pos = len(prompt) + t
            prob *= model.table[full[pos - m : pos]][full[pos]]
            if prob == 0.0:
                break
        law[seq] = prob
    return law


def _draft_tuples(draft: ToyLanguageModel, context: tuple, num_drafts: int, mode: str):
    """(x, P(x), q rows [K, V]) for every draft tuple x the draft model proposes after context."""
    m = draft.order
    if mode == "greedy":
        ctx, xs, rows = context, [], []
        for _ in range(num_drafts):
            row = draft.table[ctx[len(ctx) - m :]]
            xs.append(int(np.argmax(row)))
            rows.append(row)
            ctx = ctx + (xs[-1],)
        yield tuple(xs), 1.0, np.array(rows).reshape(num_drafts, draft.vocab_size)
        return
    for xs in itertools.product(range(draft.vocab_size), repeat=num_drafts):
        ctx, prob, rows = context, 1.0, []
        for x in xs:
            row = draft.table[ctx[len(ctx) - m :]]
            prob *= row[x]
            rows.append(row)
            ctx = ctx + (x,)
        if prob > 0:
            yield xs, prob, np.array(rows).reshape(num_drafts, draft.vocab_size)


def speculative_sequence_law(
    target: ToyLanguageModel,
    draft: ToyLanguageModel,
    prompt,
    length: int,
    num_draft_tokens: int,
    *,
    mode: str = "classic",
    round_law: Callable = chain_conditional_law,
) -> np.ndarray:
    """[V] * length: the exact law of the first `length` tokens of the speculative process,
    computed by enumerating, for every reachable prefix, every draft tuple (with its draft-model
    probability) and every (a, emitted token) outcome of the round with its probability
    `round_law(p [K+1, V], q [K, V] or None, x [K])` (default: the exact chain law).

    Cost ~ V^length * V^K * K * V: meant for V <= 4, K <= 3, length <= 5. Raises ValueError if a
    round can emit -1 (a target row without mass: impossible for a ToyLanguageModel).
    """
    if mode not in DRAFT_MODES:
        raise ValueError(f"mode: expected one of {DRAFT_MODES}, got {mode!r}")
    prompt = _check_prompt(target, prompt)
    _check_prompt(draft, prompt)
    if target.vocab_size != draft.vocab_size:
        raise ValueError(f"draft: vocab {draft.vocab_size} != target vocab {target.vocab_size}")
    vocab, m_t = target.vocab_size, target.order
    law = np.zeros((vocab,) * length)
    frontier = [{} for _ in range(length)]  # frontier[s][prefix] = P(the process reaches prefix)
    frontier[0][()] = 1.0
    for size in range(length):
        for prefix, mass in frontier[size].items():
            context = prompt + prefix
            for xs, p_drafts, q_rows in _draft_tuples(draft, context, num_draft_tokens, mode):
                full = context + xs
                start = len(context)
                p_rows = np.array(
                    [target.table[full[start + i - m_t : start + i]] for i in range(len(xs) + 1)]
                )
                out = round_law(p_rows, q_rows if mode == "classic" else None, np.array(xs, dtype=np.int64))
                if np.any(out.invalid > 0):
                    raise ValueError(f"round_law: emits -1 with positive probability after {context}")
                for j, v in zip(*np.nonzero(out.joint), strict=True):
                    grown = (prefix + xs[:j] + (int(v),))[:length]
                    weight = mass * p_drafts * out.joint[j, v]
                    if len(grown) == length:
                        law[grown] += weight
                    else:
                        frontier[len(grown)][grown] = frontier[len(grown)].get(grown, 0.0) + weight
    return law


def speculative_generate(
    target: ToyLanguageModel,
    draft: ToyLanguageModel,
    prompt,
    length: int,
    num_draft_tokens: int,
    sampler: Callable,
    rng: np.random.Generator,
    num_sequences: int,
    *,
    mode: str = "classic",
) -> np.ndarray:
    """[num_sequences, length] int64: independent runs of the speculative process.

    Each round, for every unfinished sequence: K drafts from `draft` (per `mode`), the target
    rows p [N, K+1, V] at the K+1 positions, then
    `sampler(p, x, q or None, uniforms=rng.random((N, K+1)))`, which must return a result with
    `tokens` [N, K+1] and `num_accepted` [N] (chain_rejection_reference's signature); the
    accepted drafts and the emitted token are appended. Raises ValueError if the sampler emits
    an id outside [0, V).
    """
    if mode not in DRAFT_MODES:
        raise ValueError(f"mode: expected one of {DRAFT_MODES}, got {mode!r}")
    prompt = np.asarray(_check_prompt(target, prompt), dtype=np.int64)
    _check_prompt(draft, prompt)
    vocab, k = target.vocab_size, int(num_draft_tokens)
    start = prompt.shape[0]
    buf = np.empty((num_sequences, start + length + k + 1), dtype=np.int64)
    buf[:, :start] = prompt
    filled = np.zeros(num_sequences, dtype=np.int64)
    while True:
        rows = np.flatnonzero(filled < length)
        if rows.size == 0:
            break
        seq = buf[rows]
        pos = start + filled[rows]  # the next free slot of each active sequence
        local = np.arange(rows.size)
        q = np.empty((rows.size, k, vocab))
        for i in range(k):
            q[:, i] = draft.next_token_probs(_context(seq, local, pos + i, draft.order))
            if mode == "greedy":
                x_i = np.argmax(q[:, i], axis=1)
            else:
                cum = np.cumsum(q[:, i], axis=1)
                x_i = np.argmax(cum > rng.random(rows.size)[:, None] * cum[:, -1:], axis=1)
            seq[local, pos + i] = x_i
        p = np.stack(
            [target.next_token_probs(_context(seq, local, pos + i, target.order)) for i in range(k + 1)],
            axis=1,
        )
        drafts = seq[local[:, None], pos[:, None] + np.arange(k)[None, :]]
        result = sampler(p, drafts, q if mode == "classic" else None, uniforms=rng.random((rows.size, k + 1)))
        tokens = np.asarray(result.tokens, dtype=np.int64)
        accepted = np.asarray(result.num_accepted, dtype=np.int64)
        emitted = tokens[local, accepted]
        if np.any((emitted < 0) | (emitted >= vocab)):
            raise ValueError(f"sampler: emitted ids outside [0, {vocab}): {np.unique(emitted)}")
        buf[rows[:, None], pos[:, None] + np.arange(k + 1)[None, :]] = tokens
        filled[rows] += accepted + 1
    return buf[:, start : start + length].copy()


def _context(seq: np.ndarray, local: np.ndarray, pos: np.ndarray, order: int) -> np.ndarray:
    """[N, order]: the `order` tokens before slot pos of each sequence."""
    return seq[local[:, None], pos[:, None] - order + np.arange(order)[None, :]]


def sequence_index(sequences: np.ndarray, vocab_size: int) -> np.ndarray:
    """[N] int64: the flat (C-order) index of each sequence in a [V] * L law array, so
    np.bincount(sequence_index(s, V), minlength=V**L) counts the sequences."""
    sequences = np.asarray(sequences, dtype=np.int64)
    return np.ravel_multi_index(tuple(sequences.T), (vocab_size,) * sequences.shape[1])
