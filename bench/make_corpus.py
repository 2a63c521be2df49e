#!/usr/bin/env python3
"""Writes a synthetic WikiText-format corpus of a given size (for load-time and memory benchmarks).

    bench/make_corpus.py OUTDIR TRAIN_TOKENS [--types N] [--seed S]

wiki.train.tokens gets TRAIN_TOKENS tokens (words + one <eos> per line), wiki.valid.tokens and
wiki.test.tokens about 240k each, like WikiText-103. Words are drawn from a Zipf(1) law over N
types (default 267,735, WikiText-103's vocabulary), each a random lowercase string of 1-9
letters, longer for rarer ones, so the text has about WikiText-103's size in bytes per token
(5.3) and, at 100M tokens, nearly every type appears; lines hold 1-120 words, a tenth of them
empty.
"""
import argparse
import os

import numpy as np


def words_for(types, rng):
    # Frequent words are short, as in English: 1-3 letters for the top ranks, 7-9 for the rarest.
    lengths = 1 + np.log2(np.arange(1, types + 1)).astype(int) // 3 + rng.integers(0, 3, size=types)
    letters = rng.integers(ord("a"), ord("z") + 1, size=int(lengths.sum()), dtype=np.uint8).tobytes().decode()
    out, seen, pos = [], set(), 0
    for k, n in enumerate(lengths):
        w = letters[pos:pos + n]
        pos += n
        if w in seen or w == "<unk>":
            w = f"{w}{k}"  # keep types distinct
        seen.add(w)
        out.append(w)
    return out


def write_split(path, tokens, words, cdf, rng):
    with open(path, "w") as f:
        left = tokens
        while left > 0:
            # One block of lines at a time: line lengths, then the words of all of them.
            lengths = rng.integers(1, 121, size=4096)
            lengths[rng.random(4096) < 0.1] = 0
            ids = np.searchsorted(cdf, rng.random(int(lengths.sum())))
            lines, pos = [], 0
            for n in lengths:
                if left <= 0:
                    break
                n = int(min(n, left - 1))  # the line's <eos> is a token too
                lines.append(" " + " ".join(map(words.__getitem__, ids[pos:pos + n].tolist())) + " \n" if n else " \n")
                pos += n
                left -= n + 1
            f.write("".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("train_tokens", type=int)
    ap.add_argument("--types", type=int, default=267735)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.train_tokens < 1 or a.types < 1:
        ap.error("train_tokens and --types must be positive")
    rng = np.random.default_rng(a.seed)
    words = words_for(a.types, rng)
    weights = 1.0 / np.arange(1, a.types + 1)
    cdf = np.cumsum(weights) / weights.sum()
    cdf[-1] = 1.0
    os.makedirs(a.outdir, exist_ok=True)
    for split, tokens in (("train", a.train_tokens), ("valid", 217646 + 22000), ("test", 245569)):
        write_split(os.path.join(a.outdir, f"wiki.{split}.tokens"), tokens, words, cdf, rng)


if __name__ == "__main__":
    main()
