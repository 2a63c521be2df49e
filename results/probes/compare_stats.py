"""Per-head attention statistics of runs from `xtrap probe --stats-only` dumps: a markdown table
(mean over queries). The pictures come from `xtrap probe RUN... --plot FILE.png`.
Usage: python3 compare_stats.py OUT_DIR NAME=FILE.h5 [NAME=FILE.h5 ...]"""
import sys

import h5py
import numpy as np

out_dir, pairs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
rows = []
for name, path in pairs:
    with h5py.File(path) as f:
        L, N = int(f.attrs["L_train"]), int(f.attrs["Lvalid"])
        dist, ent, first = (f["stats/" + k][:] for k in ("mean_distance", "entropy", "first_token_mass"))
    for layer in range(dist.shape[0]):
        for h in range(dist.shape[1]):
            beyond = slice(L, N)  # queries with more than L_train tokens of context
            rows.append(f"| {name} | {layer} | {h} | {dist[layer, h].mean():.1f} | {dist[layer, h, beyond].mean():.1f} "
                        f"| {ent[layer, h].mean():.2f} | {first[layer, h].mean():.3f} |")

with open(f"{out_dir}/stats_table.md", "w") as t:
    t.write(f"L_train = {L}, window N = {N}; means over all queries (and over queries i >= L_train)\n\n")
    t.write("| run | layer | head | mean distance | mean distance, i >= L | entropy (nats) | first-token mass |\n")
    t.write("|---|---|---|---|---|---|---|\n")
    t.write("\n".join(rows) + "\n")
