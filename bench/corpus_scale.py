#!/usr/bin/env python3
"""Load time and memory of xtrap on WikiText-103-sized data (synthetic, bench/make_corpus.py).

    bench/corpus_scale.py XTRAP WORKDIR OUT.csv [--tokens 10000000 100000000] [--data DIR ...] [--steps 10]

For each size: generates WORKDIR/corpus-N (kept for the next call); for each --data DIR uses that
directory as it is (e.g. the shipped WikiText-2, for comparison). Then measures
  first-load   `xtrap data DIR` with no token cache (parsing, cache written)
  cached-load  `xtrap data DIR` again
  train-1      `xtrap train --data DIR --steps S` with the quickstart model, one process
  train-2      the same with --nproc 2 (two data-parallel ranks on this machine)
  train-1-adaptive-input, train-2-adaptive-input
               the same two with --adaptive-input (the quickstart model's input embedding tied to
               its adaptive softmax, as in the paper's WikiText-103 model, instead of V x d floats)
Memory is sampled every 20 ms from /proc/PID/smaps_rollup of every process of the command:
peak RSS of the largest process (file pages of the shared cache included), peak sum of PSS
(shared pages split between the processes mapping them: what the command costs the machine)
and peak sum of anonymous memory (what each process holds privately). Writes OUT.csv.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def descendants(root):
    children = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(ppid, []).append(int(pid))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def rollup(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    fields[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        pass
    return fields


def measure(cmd, log):
    """Runs cmd; returns (seconds, peak RSS of one process, peak sum PSS, peak sum anonymous) in MiB."""
    peaks = {"rss": 0, "pss": 0, "anon": 0}
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    done = threading.Event()

    def sample():
        while not done.is_set():
            stats = [rollup(p) for p in descendants(proc.pid)]
            peaks["rss"] = max([peaks["rss"]] + [s.get("Rss", 0) for s in stats])
            peaks["pss"] = max(peaks["pss"], sum(s.get("Pss", 0) for s in stats))
            peaks["anon"] = max(peaks["anon"], sum(s.get("Anonymous", 0) for s in stats))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    done.set()
    sampler.join()
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(cmd)}; see {log}")
    # ru_maxrss (kB) of the direct child: the kernel's own peak, which sampling may miss by a little.
    return seconds, max(peaks["rss"], usage.ru_maxrss) / 1024, peaks["pss"] / 1024, peaks["anon"] / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("xtrap")
    ap.add_argument("workdir")
    ap.add_argument("out_csv")
    ap.add_argument("--tokens", type=int, nargs="+", default=[10_000_000, 100_000_000])
    ap.add_argument("--data", nargs="*", default=[], help="existing WikiText-format directories to measure too")
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    rows = []
    corpora = []
    for n in a.tokens:
        corpus = os.path.join(a.workdir, f"corpus-{n}")
        if not os.path.exists(os.path.join(corpus, "wiki.test.tokens")):
            subprocess.run([sys.executable, os.path.join(HERE, "make_corpus.py"), corpus, str(n)], check=True)
        corpora.append((corpus, f"synthetic {n}"))
    corpora += [(os.path.abspath(d), os.path.basename(os.path.normpath(d))) for d in a.data]
    for k, (corpus, label) in enumerate(corpora):
        for name in (".xtrap-cache.bin", ".xtrap-cache.lock"):
            if os.path.exists(os.path.join(corpus, name)):
                os.remove(os.path.join(corpus, name))
        train = [a.xtrap, "train", "--data", corpus, "--steps", str(a.steps), "--warmup", "1", "--no-progress",
                 "--eval-tokens", "4096"]
        phases = [("first-load", [a.xtrap, "data", corpus], 1), ("cached-load", [a.xtrap, "data", corpus], 1),
                  ("train-1", train + ["--out", os.path.join(a.workdir, f"run-{k}-1")], 1),
                  ("train-2", train + ["--out", os.path.join(a.workdir, f"run-{k}-2"), "--nproc", "2"], 2),
                  ("train-1-adaptive-input", train + ["--out", os.path.join(a.workdir, f"run-{k}-1a"), "--adaptive-input"],
                   1),
                  ("train-2-adaptive-input",
                   train + ["--out", os.path.join(a.workdir, f"run-{k}-2a"), "--nproc", "2", "--adaptive-input"], 2)]
        for phase, cmd, ranks in phases:
            run_dir = cmd[cmd.index("--out") + 1] if "--out" in cmd else None
            if run_dir:
                shutil.rmtree(run_dir, ignore_errors=True)
            log = os.path.join(a.workdir, f"{phase}-{k}.log")
            seconds, rss, pss, anon = measure(cmd, log)
            if phase == "first-load":  # `xtrap data` prints "DIR: N train, ..."
                n = int(re.search(r": (\d+) train, ", open(log).read()).group(1))
            row = {"corpus": label, "train_tokens": n, "phase": phase, "ranks": ranks, "seconds": round(seconds, 2),
                   "peak_rss_mib": round(rss), "peak_pss_mib": round(pss), "peak_anon_mib": round(anon),
                   "command": " ".join("xtrap" if c == a.xtrap else "DIR" if c == corpus else
                                       "RUN" if c.startswith(a.workdir) else c for c in cmd)}
            print(row, flush=True)
            rows.append(row)
    with open(a.out_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
