"""How many tile pairs the fused ALiBi kernel leaves out as negligible, for the benchmark's cases.

The kernel (src/model/position/linear_bias_attention_forward.cu) computes per 64-row tile of each head the
largest |q_i|, the largest |k_i| and the smallest diagonal logit scale q_i.k_i, calls a pair
negligible where scale max|q| max|k| (1 + 2^-10) + (the bias of its nearest cell) - (that smallest
diagonal logit) < -136 ln 2 (tile::negligibleTile in linear_bias_tile.h), and walks each query
tile's key tiles from the first pair that is open and not negligible to the last; a head whose bias
cannot fall that low within T (tile::biasCanReachNegligible) has no bounds computed and skips
nothing. This script does the same arithmetic on the CPU for q and k drawn as bench_attention draws them (randn, bf16), at
bench/attention_anchors.py's cases (H 16, D 64, ALiBi's slopes), and prints the share of the open
pairs that the walks leave out: what the benchmark's fused rows save against its -dense rows,
before any timing. Another draw of q and k gives another count; trained models' norms differ.

  python3 bench/negligible_pairs.py [--seed N]
"""
import argparse
import math

import torch

TILE, HEADS, HEAD_DIM = 64, 16, 64
NEGLIGIBLE_LOGIT = -136.0 * math.log(2.0)  # tile::kNegligibleLogit: 2^-136 in natural units
CASES = [("causal-B32-L512", 512, "causal"), ("causal-B8-L2048", 2048, "causal"),
         ("causal-B2-L8192", 8192, "causal"), ("causal-B1-L16384", 16384, "causal"),
         ("encoder-symmetric-B8-L2048", 2048, "symmetric")]


def alibi_slopes(n):
    """Press et al.'s slopes for a power of 2 heads: geometric, start = ratio = 2^(-8/n)."""
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


def tile_bounds(q, k, scale):
    """Per head and tile (H, tiles): max |q_i|, max |k_i|, min scale q_i.k_i, in float32."""
    H, T, D = q.shape
    tiles = (T + TILE - 1) // TILE
    pad = tiles * TILE - T
    qf, kf = q.float(), k.float()
    qn, kn = qf.norm(dim=-1), kf.norm(dim=-1)  # (H, T)
    diag = scale * (qf * kf).sum(-1)
    if pad:
        qn = torch.cat([qn, torch.zeros(H, pad)], 1)
        kn = torch.cat([kn, torch.zeros(H, pad)], 1)
        diag = torch.cat([diag, torch.full((H, pad), math.inf)], 1)
    return (qn.view(H, tiles, TILE).amax(-1), kn.view(H, tiles, TILE).amax(-1),
            diag.view(H, tiles, TILE).amin(-1))


def negligible(slope, r, c, scale, qn, kn, diag):
    """tile::negligibleTile for query tile r and key tile c of one head (symmetric slopes)."""
    if c < r:
        max_bias = -slope * ((r - c) * TILE - (TILE - 1))
    elif c > r:
        max_bias = -slope * ((c - r) * TILE - (TILE - 1))
    else:
        return False
    bound = scale * qn[r] * kn[c] * (1 + 2.0 ** -10) + max_bias - diag[r]
    return bound < NEGLIGIBLE_LOGIT


def bias_can_reach(slope, T):
    """tile::biasCanReachNegligible (no first-token bias, one slope both ways): whether the farthest
    pair's nearest cell has a bias below 136 ln 2 below 0. The kernel reads no bounds of a head where
    it has not, and skips none of its pairs."""
    apart = (T + TILE - 1) // TILE - 1
    return apart >= 1 and -slope * (apart * TILE - (TILE - 1)) < NEGLIGIBLE_LOGIT


def draw(T, seed):
    """One sequence's q and k (H, T, D) drawn as bench_attention draws them (randn, bf16), the
    softmax scale, and each head's tile bounds (qn, kn, diag of tile_bounds, as lists)."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(HEADS, T, HEAD_DIM, generator=gen).bfloat16()
    k = torch.randn(HEADS, T, HEAD_DIM, generator=gen).bfloat16()
    scale = 1.0 / math.sqrt(HEAD_DIM)
    return q, k, scale, [x.tolist() for x in tile_bounds(q, k, scale)]


def open_tiles(r, tiles, causal):
    """Query tile r's key tiles that are not blocked (ALiBi's slopes: causal or symmetric)."""
    return range(r + 1) if causal else range(tiles)


def walk(slope, r, tiles, causal, reads, scale, bounds):
    """Query tile r's walk, ascending: every open key tile from the first whose pair is not
    negligible to the last; bounds: the head's (qn, kn, diag); reads: bias_can_reach."""
    visited = [c for c in open_tiles(r, tiles, causal) if not (reads and negligible(slope, r, c, scale, *bounds))]
    return range(visited[0], visited[-1] + 1)


def left_out(T, kind, seed):
    """(pairs left out, open pairs, heads whose bounds are read) over the heads of one sequence of T
    tokens."""
    _, _, scale, (qn, kn, diag) = draw(T, seed)
    tiles, causal = (T + TILE - 1) // TILE, kind == "causal"
    skipped = total = read = 0
    for h, slope in enumerate(alibi_slopes(HEADS)):
        reads = bias_can_reach(slope, T)
        read += reads
        for r in range(tiles):
            opened = len(open_tiles(r, tiles, causal))
            total += opened
            skipped += opened - len(walk(slope, r, tiles, causal, reads, scale, (qn[h], kn[h], diag[h])))
    return skipped, total, read


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="the draw of q and k")
    args = ap.parse_args()
    print(f"| case | tile pairs left out | of the open pairs | share | heads whose bounds are read, of {HEADS} |")
    print("|---|---:|---:|---:|---:|")
    for name, T, kind in CASES:
        skipped, total, read = left_out(T, kind, args.seed)
        print(f"| {name} | {skipped} | {total} | {100.0 * skipped / total:.1f}% | {read} |")


if __name__ == "__main__":
    main()
