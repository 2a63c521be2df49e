"""Per-head attention statistics of two runs from `xtrap probe --stats-only` dumps: a markdown
table (mean over queries) and a gnuplot plot of mean attention distance vs query position.
Usage: python3 compare_stats.py OUT_DIR NAME=FILE.h5 [NAME=FILE.h5 ...]"""
import subprocess
import sys

import h5py
import numpy as np

out_dir, pairs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
rows, curves = [], []
for name, path in pairs:
    with h5py.File(path) as f:
        L, N = int(f.attrs["L_train"]), int(f.attrs["Lvalid"])
        dist, ent, first = (f["stats/" + k][:] for k in ("mean_distance", "entropy", "first_token_mass"))
    for layer in range(dist.shape[0]):
        for h in range(dist.shape[1]):
            beyond = slice(L, N)  # queries with more than L_train tokens of context
            rows.append(f"| {name} | {layer} | {h} | {dist[layer, h].mean():.1f} | {dist[layer, h, beyond].mean():.1f} "
                        f"| {ent[layer, h].mean():.2f} | {first[layer, h].mean():.3f} |")
    smooth = np.convolve(dist.mean(axis=(0, 1)), np.ones(16) / 16, mode="valid")
    curves.append((name, smooth))

with open(f"{out_dir}/stats_table.md", "w") as t:
    t.write(f"L_train = {L}, window N = {N}; means over all queries (and over queries i >= L_train)\n\n")
    t.write("| run | layer | head | mean distance | mean distance, i >= L | entropy (nats) | first-token mass |\n")
    t.write("|---|---|---|---|---|---|---|\n")
    t.write("\n".join(rows) + "\n")
with open(f"{out_dir}/mean_distance.dat", "w") as d:
    for name, c in curves:
        d.write(f"# {name}\n" + "".join(f"{i + 8} {v:.4f}\n" for i, v in enumerate(c)) + "\n\n")
plots = ", ".join(f"'{out_dir}/mean_distance.dat' index {k} with lines lw 2 title '{n}'" for k, (n, _) in enumerate(curves))
script = (f"set terminal png size 900,550\nset output '{out_dir}/mean_distance.png'\nset grid\n"
          f"set xlabel 'query position i'\nset ylabel 'expected |i-j| under attention (all layers, heads)'\n"
          f"set arrow from {L},graph 0 to {L},graph 1 nohead dt 2\n"
          f"set title 'Mean attention distance vs query position (trained at L={L})'\nplot {plots}\n")
subprocess.run(["gnuplot"], input=script.encode(), check=True)
