"""How many race tiles the screened classic race reads, simulated in float64 numpy (no GPU).

    python benchmarks/diagnostics/screen_simulation.py [--rows 64] [--vocab 151936] [--tiles 8]

Rows like the benchmark's (benchmarks/inputs.py): target logits N(0, 3^2), draft logits perturbed by
N(0, 1), temperature 0.8; the residual r = max(0, p - q) of a rejected row, cut into groups of 256
tokens with masses R_g <= P_g and Exp(1) noise E_g (numpy's, not the kernel's Philox: the law is
what matters). The race's winner is argmax_g log R_g - log E_g; a group's bound is log P_g - log E_g.
Race programs hold `tiles` tiles of 512 tokens (two groups each), read their tile of largest bound
first, then every tile whose bound reaches the best score read so far or the threshold tau
(kernels/logits.py `_screened_race`). Printed per threshold rule: the share of tiles read and of
programs reading any tile. Session 19 (benchmarks/NOTES.md) used it to choose `_screen_threshold`'s
rule (the best-bound group of each of 4 segments of the row's 1024 group slots). Last, per row, the
groups whose bound reaches the winner's score (what any exact screened race must read, in whatever
program) and those reaching the 4-segment tau: mean and percentiles (session 22).
Two rules model race_tau "shared" (session 46), where each program publishes its lead tile's best score
and screens its later tiles with the largest published so far: "shared, all published" (every program's
lead score known before any later tile: the best case) and "shared, earlier programs" (programs publish
in a random order and each sees only those before it: the order carries no information, as when all
programs start together and the atomics land in any order). A third, "shared, argmax group seeded"
(session 47, not built) adds a seed that the classic tail's emitter could publish before the race
starts: the score of the group holding row j's target argmax; then every tile, the lead tile too, is read
only where its bound reaches the seed or what was published before it.
"""

from __future__ import annotations

import argparse
import collections

import numpy as np

GROUP = 256
TILE = 512
TEMPERATURE = 0.8


def row_scores(rng, vocab: int):
    """(bound, score) per group of one rejected benchmark-like row, and the group of its target argmax."""
    z = rng.normal(0.0, 3.0, vocab)
    d = z + rng.normal(0.0, 1.0, vocab)
    p = np.exp((z - z.max()) / TEMPERATURE)
    p /= p.sum()
    q = np.exp((d - d.max()) / TEMPERATURE)
    q /= q.sum()
    starts = np.arange(0, vocab, GROUP)
    big_p = np.add.reduceat(p, starts)
    big_r = np.add.reduceat(np.maximum(p - q, 0.0), starts)
    log_e = np.log(rng.exponential(size=len(starts)))
    with np.errstate(divide="ignore"):
        return np.log(big_p) - log_e, np.log(big_r) - log_e, int(np.argmax(z)) // GROUP


def thresholds(bound, score) -> dict:
    """tau per rule: a score that some group attains (or -inf: each program's own reads only)."""
    slots = 1 << (len(bound) - 1).bit_length()
    b = np.concatenate([bound, np.full(slots - len(bound), -np.inf)])
    s = np.concatenate([score, np.full(slots - len(score), -np.inf)])

    def segments(n):
        w = slots // n
        return max(s[i * w + np.argmax(b[i * w : (i + 1) * w])] for i in range(n))

    return {
        "own reads only": -np.inf,
        "best-bound group": score[np.argmax(bound)],
        "best-bound group of 4 segments": segments(4),
        "best-bound group of 8 segments": segments(8),
        "4 best-bound groups": score[np.argsort(-bound)[:4]].max(),
    }


def tiles_read(bound, score, tau: float, tiles: int) -> tuple[int, int, int]:
    """(tiles read, tiles, programs reading any) over the row's race programs."""
    per_tile = TILE // GROUP
    read = total = busy = 0
    for start in range(0, len(bound), per_tile * tiles):
        b, s = bound[start : start + per_tile * tiles], score[start : start + per_tile * tiles]
        n = -(-len(b) // per_tile)
        tb = np.array([b[t * per_tile : (t + 1) * per_tile].max() for t in range(n)])
        ts = np.array([s[t * per_tile : (t + 1) * per_tile].max() for t in range(n)])
        lead = int(np.argmax(tb))
        best, count = -np.inf, 0
        for t in [lead] + [t for t in range(n) if t != lead]:
            if tb[t] >= max(best, tau):
                count += 1
                best = max(best, ts[t])
        read, total, busy = read + count, total + n, busy + (count > 0)
    return read, total, busy


def _program_tiles(bound, score, tiles: int):
    """Per race program of the row: (tile bounds, tile best scores, lead tile)."""
    per_tile = TILE // GROUP
    out = []
    for start in range(0, len(bound), per_tile * tiles):
        b, s = bound[start : start + per_tile * tiles], score[start : start + per_tile * tiles]
        n = -(-len(b) // per_tile)
        tb = np.array([b[t * per_tile : (t + 1) * per_tile].max() for t in range(n)])
        ts = np.array([s[t * per_tile : (t + 1) * per_tile].max() for t in range(n)])
        out.append((tb, ts, int(np.argmax(tb))))
    return out


def tiles_read_shared(bound, score, tiles: int, rng, all_published: bool, seed: float | None = None
                      ) -> tuple[int, int, int]:  # fmt: skip
    """tiles_read for race_tau "shared": each program reads its lead tile, then the tiles whose bound
    reaches max(its best, tau), tau the largest lead score of every program (all_published) or of the
    programs before it in a random order. With a `seed` (a score some group attains, published before
    any program starts), tau is at least the seed, and the lead tile too is read only where its bound
    reaches tau."""
    programs = _program_tiles(bound, score, tiles)
    lead_scores = np.array([ts[lead] if tb[lead] > -np.inf else -np.inf for tb, ts, lead in programs])
    order = rng.permutation(len(programs))
    read = total = busy = 0
    for rank, c in enumerate(order):
        tb, ts, lead = programs[c]
        earlier = lead_scores if all_published else lead_scores[order[:rank]]
        tau = max(earlier.max(initial=-np.inf), -np.inf if seed is None else seed)
        lead_tau = -np.inf if seed is None else tau
        best, count = -np.inf, 0
        for t in [lead] + [t for t in range(len(tb)) if t != lead]:
            if tb[t] > -np.inf and tb[t] >= max(best, tau if t != lead else lead_tau):
                count += 1
                best = max(best, ts[t])
        read, total, busy = read + count, total + len(tb), busy + (count > 0)
    return read, total, busy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--tiles", type=int, default=8, help="race tiles per program (the GPU default: 8 here)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    sums = collections.defaultdict(lambda: np.zeros(4, dtype=np.int64))
    must, over_tau = [], []
    for _ in range(args.rows):
        bound, score, top = row_scores(rng, args.vocab)
        taus = thresholds(bound, score)
        for rule, tau in taus.items():
            read, total, busy = tiles_read(bound, score, tau, args.tiles)
            sums[rule] += (read, total, busy, -(-len(bound) // (TILE // GROUP * args.tiles)))
        shared = (("shared, all published", True, None), ("shared, earlier programs", False, None),
                  ("shared, argmax group seeded", False, score[top]))  # fmt: skip
        for rule, every, seed in shared:
            read, total, busy = tiles_read_shared(bound, score, args.tiles, rng, every, seed)
            sums[rule] += (read, total, busy, -(-len(bound) // (TILE // GROUP * args.tiles)))
        must.append(int((bound >= score.max()).sum()))
        over_tau.append(int((bound >= taus["best-bound group of 4 segments"]).sum()))
    for rule, (read, total, busy, programs) in sums.items():
        print(
            f"{rule:32s} tiles read {read}/{total} ({read / total:.1%}); programs reading any {busy}/{programs}"
        )
    for name, counts in (("bound >= the winner's score", must), ("bound >= 4-segment tau", over_tau)):
        c = np.array(counts)
        print(
            f"groups per row with {name:28s} mean {c.mean():.2f}, median {np.median(c):.0f}, "
            f"p90 {np.percentile(c, 90):.0f}, p99 {np.percentile(c, 99):.0f}, max {c.max()} (of {len(bound)})"
        )


if __name__ == "__main__":
    main()
