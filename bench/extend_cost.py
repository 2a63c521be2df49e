"""What each context extension costs (issue 80): time per scored token at L..16L for one run, every
extension of --extends, one `xtrap eval` per extension so that the rows are timed alone:

  /usr/bin/python3 bench/extend_cost.py RUN [--lengths 128..2048] [--tokens 32768] [--threads 1] \\
      [--extends none,sinks,lambda,self-extend,rerope,leaky-rerope,logn] [--out results/extend_cost.csv]

Writes OUT: one row per (extension, Lvalid) with the seconds of the scoring pass, tokens scored and
microseconds per token (the eval rows' own `seconds` and `tokens_scored`). sinks and lambda attend
each query block to its sinks and recent keys only, so their time per token should stay near L's;
the others see every key, and self-extend and the rerope pair compute two products per block.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--lengths", default="128..2048")
    p.add_argument("--tokens", type=int, default=32768, help="eval --max-tokens")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--extends", default="none,sinks,lambda,self-extend,rerope,leaky-rerope,logn")
    p.add_argument("--xtrap", default=os.path.join(ROOT, "build", "xtrap"))
    p.add_argument("--out", default=os.path.join(ROOT, "results", "extend_cost.csv"))
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for extend in a.extends.split(","):
            out = os.path.join(tmp, "rows.csv")
            r = subprocess.run([a.xtrap, "eval", a.run, "--Lvalid", a.lengths, "--extend", extend, "--max-tokens",
                                str(a.tokens), "--threads", str(a.threads), "--no-progress", "--out", out],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"{extend}: {r.stderr.strip()}")
            for row in csv.DictReader(open(out)):
                tokens = int(row["tokens_scored"])
                rows.append(dict(run=os.path.basename(os.path.normpath(a.run)), pos=row["pos"], extend=row["extend"],
                                 L_train=row["L_train"], Lvalid=row["Lvalid"], threads=a.threads, tokens=tokens,
                                 seconds=row["seconds"], us_per_token=f"{1e6 * float(row['seconds']) / tokens:.2f}",
                                 ppl=row["ppl"]))
            print(f"{extend}: " + ", ".join(f"{r['Lvalid']} {r['us_per_token']} us" for r in rows
                                            if r["extend"].split(" ")[0] == extend.split("+")[0]), flush=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


main()
