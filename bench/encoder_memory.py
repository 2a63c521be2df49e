"""Peak memory of scoring a pretrained encoder on a CPU, on random weights of the real shapes of
mosaic-bert-base (MosaicBERT: 30,528 rows, 12 layers of 768, gated MLP of 3,072) and
bert-base-uncased (30,522 rows, learned positions 512, MLP of 3,072), float32 as released:

  /usr/bin/python3 bench/encoder_memory.py --work /tmp/encoder-memory [--out results/encoder_memory.csv]

Each row is one `/usr/bin/time -v xtrap eval DIR --text TEXT --Lvalid T --max-tokens T --batch 1
--threads 1` (masked-LM, non-overlapping windows) in a fresh process: its maximum resident set,
against docs/pretrained.md's formula for encoders, R0 + 4 N + A with A the activations of one
window (printed beside it). The tokenizer is tests/tokenizer's 2,000-token WordPiece file (its ids
fit both vocabularies); the text WikiText-2's valid split.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from hf_checkpoint import write_model  # noqa: E402
from encoder_reference import checkpoint, config  # noqa: E402

WORDPIECE = os.path.join(ROOT, "tests", "tokenizer", "wordpiece-bert_tokenizer.json")
TEXT = os.path.join(ROOT, "data", "wikitext-2", "wiki.valid.tokens")
MODELS = {
    "mosaic-bert-base": ("mosaicbert", dict(alibi_starting_size=512, vocab_size=30528), [128, 512, 2048]),
    "bert-base-uncased": ("bert", dict(max_position_embeddings=512, vocab_size=30522), [128, 512]),
}
R0_MB = 197  # LibTorch, the tokenizer, the text: the T = 128 rows less 4 N and A


def parameters(t):
    return sum(v.numel() for k, v in t.items() if "pooler" not in k)


def formula_mb(n, cfg, T, gated):
    """R0 + 4 N + A: float32 weights, and one window's float32 activations, A = 4 T (8 C + 3 F),
    plus 4 T 2F for a gated MLP's first layer of 2F outputs. The attention is query-blocked (no
    H x T x T tensor), so A grows linearly in T."""
    C, F_ = cfg["hidden_size"], cfg["intermediate_size"]
    activations = 4 * T * (8 * C + 3 * F_ + (2 * F_ if gated else 0))
    return (R0_MB * 1e6 + 4 * n + activations) / 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--xtrap", default=os.path.join(ROOT, "build", "xtrap"))
    p.add_argument("--out", default=os.path.join(ROOT, "results", "encoder_memory.csv"))
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rows = []
    for name, (family, extra, lengths) in MODELS.items():
        V = extra.pop("vocab_size")
        cfg = config(family, 768, 12, 12, V, 3072, **extra)
        d = os.path.join(a.work, name)
        t = checkpoint(0, family, cfg)
        if not os.path.exists(os.path.join(d, "model.safetensors")):
            write_model(d, cfg, t, tokenizer=WORDPIECE)
        n = parameters(t)
        for T in lengths:
            with tempfile.TemporaryDirectory() as tmp:
                out, log = os.path.join(tmp, "eval.csv"), os.path.join(tmp, "time.txt")
                r = subprocess.run(["/usr/bin/time", "-v", "-o", log, a.xtrap, "eval", d, "--text", TEXT, "--Lvalid",
                                    str(T), "--max-tokens", str(T), "--batch", "1", "--threads", "1",
                                    "--no-progress", "--out", out], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"{name} T={T}: {r.stderr.strip()}")
                kb = next(int(line.split()[-1]) for line in open(log) if "Maximum resident set size" in line)
            rss = kb * 1024 / 1e6
            formula = formula_mb(n, cfg, T, family == "mosaicbert")
            rows.append(dict(model=name, parameters=n, length=T, peak_rss_mb=f"{rss:.1f}", formula_mb=f"{formula:.1f}"))
            print(f"{name:18s} N={n / 1e6:6.1f}M T={T:5d}: peak RSS {rss:7.1f} MB, formula {formula:7.1f}", flush=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


main()
