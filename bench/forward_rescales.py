"""How often the fused ALiBi forward rescales its running sums, for the benchmark's cases.

The forward (forwardKernel in src/model/position/linear_bias_attention_forward.cu) walks each 64-row query
tile's key tiles from the last to the first, and a warp (16 query rows) moves its rows' running max,
rescaling their sums and O, only at a tile where one of its rows finds a base-2 logit more than 8
(kRescaleSlack) above its max. That step costs a warp 42 more instructions than one that does not
rescale (SASS, sm_90a, D 64). This script replays those walks on the CPU for q and k drawn as
bench_attention draws them (randn, bf16), H 16 with ALiBi's slopes, one sequence per case, the
negligible pairs left out as the kernel leaves them (bench/negligible_pairs.py), and prints the
share of a warp's steps that rescale: walking from the last tile (the kernel) and, for comparison,
from the first. Another draw gives other counts; trained models' q and k differ.

  python3 bench/forward_rescales.py [--seed N] [--cases NAME,...]
"""
import argparse
import math

import torch

from negligible_pairs import HEADS, TILE, alibi_slopes, bias_can_reach, draw, walk

RESCALE_SLACK = 8.0  # kRescaleSlack, base 2
ROWS_PER_WARP = 16
CASES = [("causal-B32-L512", 512, True), ("causal-B8-L2048", 2048, True), ("causal-B2-L8192", 8192, True),
         ("causal-B1-L16384", 16384, True), ("encoder-symmetric-B8-L2048", 2048, False)]


def tile_maxes(q, k, slope, r, keys, causal, scale):
    """(warps, 16, len(keys)): each query row's largest base-2 logit in each key tile (-inf: none)."""
    T = q.shape[0]
    rows = torch.arange(r * TILE, min(T, (r + 1) * TILE))
    cols = torch.arange(keys[0] * TILE, min(T, (keys[-1] + 1) * TILE))
    logits = scale * (q[rows].float() @ k[cols].float().T) - slope * (rows[:, None] - cols[None, :]).abs().float()
    if causal:
        logits = logits.masked_fill(cols[None, :] > rows[:, None], -math.inf)
    logits = logits * (1.0 / math.log(2.0))
    pad_rows, pad_cols = TILE - len(rows), len(keys) * TILE - len(cols)
    logits = torch.nn.functional.pad(logits, (0, pad_cols, 0, pad_rows), value=-math.inf)
    return logits.view(TILE // ROWS_PER_WARP, ROWS_PER_WARP, len(keys), TILE).amax(-1)


def rescaling_steps(maxes):
    """Steps of the walk, in the order of maxes' last axis, at which each warp rescales."""
    row_max = torch.full(maxes.shape[:2], -float(torch.finfo(torch.float32).max))
    steps = 0
    for t in range(maxes.shape[2]):
        grows = (maxes[:, :, t] > row_max + RESCALE_SLACK).any(dim=1)  # (warps,)
        steps += int(grows.sum())
        row_max = torch.where(grows[:, None], torch.maximum(row_max, maxes[:, :, t]), row_max)
    return steps


def count(T, causal, seed):
    """(warp steps, rescaling from the last tile, rescaling from the first) over one sequence."""
    q, k, scale, (qn, kn, diag) = draw(T, seed)
    tiles = (T + TILE - 1) // TILE
    steps = descending = ascending = 0
    for h, slope in enumerate(alibi_slopes(HEADS)):
        reads = bias_can_reach(slope, T)
        for r in range(tiles):
            keys = list(walk(slope, r, tiles, causal, reads, scale, (qn[h], kn[h], diag[h])))
            maxes = tile_maxes(q[h], k[h], slope, r, keys, causal, scale)
            steps += maxes.shape[0] * maxes.shape[2]
            descending += rescaling_steps(maxes.flip(2))
            ascending += rescaling_steps(maxes)
    return steps, descending, ascending


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="the draw of q and k")
    ap.add_argument("--cases", default=",".join(case[0] for case in CASES), help="comma-separated case names")
    args = ap.parse_args()
    cases = {name: (T, causal) for name, T, causal in CASES}
    chosen = args.cases.split(",")
    unknown = [name for name in chosen if name not in cases]
    if unknown:
        raise SystemExit(f"forward_rescales.py: unknown case {unknown[0]!r} (known: {', '.join(cases)})")
    print("| case | warp steps | rescaling, last tile first (the kernel) | rescaling, first tile first |")
    print("|---|---:|---:|---:|")
    for name in chosen:
        steps, descending, ascending = count(*cases[name], args.seed)
        print(f"| {name} | {steps} | {100.0 * descending / steps:.1f}% | {100.0 * ascending / steps:.1f}% |")


if __name__ == "__main__":
    main()
