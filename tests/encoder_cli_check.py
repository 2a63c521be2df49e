"""Pretrained BERT-layout encoders end to end through the xtrap CLI, against encoder_reference.py's
float64 forward (written from the authors' code) and the protocol docs/pretrained.md states:

    encoder_cli_check.py XTRAP

- `eval --mode pll` (pseudo-log-likelihood) of a tiny MosaicBERT with a WordPiece tokenizer.json:
  non-overlapping windows of [CLS] + Lvalid - 2 tokens + [SEP], every token masked alone; the summed
  NLL equals the reference's over the ids xtrap cached for the text, at Lvalid = L and 2L, as is
  and with --interp linear (slopes / 2, the sweep's fixed a = 32 / 16), to 1e-5 per token; bits
  per byte from the text's bytes.
- `eval` masked-LM rows: the same tokens scored at every Lvalid and in sliding windows (the masked
  positions depend on the stream position alone), about 15% of them, no per-byte figures.
- a JinaBERT saved without its masked-LM head: eval refused in one line; `probe --dump-attn` dumps
  the window wrapped in [CLS] ... [SEP], rows summing to 1, equal to the reference's attention.
- the family detected is said on stderr.
"""
import math, os, sys, tempfile
import h5py
import torch
import torch.nn.functional as F

from hf_checkpoint import cached_ids, check, csv_rows, finish, run, text_counts, write_model
from encoder_reference import checkpoint, config, logits

XTRAP = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
WORDPIECE = os.path.join(HERE, "tokenizer", "wordpiece-bert_tokenizer.json")
CLS, SEP, MASK = 2, 3, 4  # the WordPiece tokenizer's [CLS], [SEP], [MASK]
TEXT = ("The tower was built in 1887 beside the river, and it stood 42 metres high until the storm of 1921.\n"
        "Its keeper, a quiet man from the northern valley, wrote every evening about the ships and the weather.\n"
        "Later the town grew around it: a market, two churches and a school.\n")
EVAL = ["--no-progress", "--threads", "1"]


def pll_reference(t, family, cfg, ids, Lvalid, slope_divisor=1.0):
    """Summed NLL of every token: windows of Lvalid - 2 tokens wrapped in [CLS] ... [SEP], each token
    masked alone."""
    words, total = Lvalid - 2, 0.0
    for s in range(0, len(ids), words):
        w = ids[s:s + words]
        x = torch.cat([torch.tensor([CLS]), w, torch.tensor([SEP])])
        for i in range(len(w)):
            masked = x.clone()
            masked[1 + i] = MASK
            z = logits(t, family, cfg, masked, slope_divisor=slope_divisor)
            total += F.cross_entropy(z[1 + i:2 + i], w[i:i + 1]).item()
    return total


def main():
    work = tempfile.mkdtemp(prefix="xtrap-encoder-cli-")
    text_file = os.path.join(work, "text.txt")
    open(text_file, "w").write(TEXT)
    # MosaicBERT: L = alibi_starting_size = 16; its 2,008 rows hold the tokenizer's 2,000 ids and padding rows.
    cfg = config("mosaicbert", 32, 4, 2, 2008, 48)
    t = checkpoint(3, "mosaicbert", cfg)
    d = os.path.join(work, "mosaic")
    write_model(d, cfg, t, tokenizer=WORDPIECE)

    # train --init takes pretrained decoders only: one line, nothing written.
    r = run([XTRAP, "train", "--init", d, "--L", "64", "--out", os.path.join(work, "init-encoder")] + EVAL)
    err = r.stderr.strip()
    check(r.returncode != 0 and len(err.splitlines()) == 1 and "encoder" in err and
          not os.path.exists(os.path.join(work, "init-encoder")), f"train --init of a pretrained encoder: {err!r}")

    out = os.path.join(work, "pll.csv")
    r = run([XTRAP, "eval", d, "--text", text_file, "--mode", "pll", "--Lvalid", "16,32", "--interp", "none,linear",
             "--out", out] + EVAL)
    if r.returncode != 0:
        check(False, f"eval --mode pll: {r.stderr.strip()}")
        finish()
    check("read as mosaicbert" in r.stderr, f"the family detected is said ({r.stderr.strip().splitlines()[0]})")
    ids = cached_ids(text_file + ".xtrap")
    nbytes, nwords = text_counts(TEXT)
    rows = {(row["interp"], int(row["Lvalid"])): row for row in csv_rows(out)}
    for (interp, Lvalid), row in sorted(rows.items()):
        a = 32 / 16 if interp == "linear" else 1.0  # one fixed a for the sweep: largest Lvalid / L_train
        want = pll_reference(t, "mosaicbert", cfg, ids, Lvalid, slope_divisor=a)
        got = float(row["nll"]) * int(row["tokens_scored"])
        check(int(row["tokens_scored"]) == len(ids) and abs(got - want) <= 1e-5 * len(ids),
              f"pll {interp} Lvalid={Lvalid}: {row['tokens_scored']} of {len(ids)} tokens, summed NLL {got:.6f} "
              f"against the reference's {want:.6f}")
        bpb = want / math.log(2) / nbytes
        check(row["bits_per_byte"] != "" and abs(float(row["bits_per_byte"]) - bpb) <= 1e-6,
              f"pll {interp} Lvalid={Lvalid}: bits per byte {row['bits_per_byte']} = {bpb:.6f} ({nbytes} bytes)")

    # Masked-LM rows: the same tokens at every Lvalid and stride.
    out = os.path.join(work, "mlm.csv")
    r = run([XTRAP, "eval", d, "--text", text_file, "--mode", "both", "--Lvalid", "16,24,48", "--out", out] + EVAL)
    if r.returncode != 0:
        check(False, f"eval masked LM: {r.stderr.strip()}")
    else:
        rows = csv_rows(out)
        scored = {int(row["tokens_scored"]) for row in rows}
        check(len(scored) == 1 and 0.05 * len(ids) <= scored.pop() <= 0.3 * len(ids),
              f"masked LM: every row scores the same tokens, about 15% of {len(ids)} "
              f"({[row['tokens_scored'] for row in rows]})")
        check(all(row["bits_per_byte"] == "" for row in rows), "masked-LM rows have no per-byte figures")
        check(all(math.isfinite(float(row["nll"])) for row in rows), "masked-LM NLLs are finite")

    # JinaBERT without its head: eval refused, probe works.
    cfg = config("jinabert", 32, 4, 2, 2000, 48)
    t = checkpoint(4, "jinabert", cfg, head=False)
    d = os.path.join(work, "jina")
    write_model(d, cfg, t, tokenizer=WORDPIECE)
    r = run([XTRAP, "eval", d, "--text", text_file, "--Lvalid", "16"] + EVAL)
    err = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    check(r.returncode != 0 and "without its masked-LM head" in err, f"a headless encoder's eval is refused ({err})")
    h5 = os.path.join(work, "jina.h5")
    N, offset = 20, 3
    r = run([XTRAP, "probe", d, "--dump-attn", h5, "--text", text_file, "--Lvalid", str(N), "--offset", str(offset),
             "--threads", "1", "--store-dtype", "float32"])
    if r.returncode != 0:
        check(False, f"probe --dump-attn of a headless JinaBERT: {r.stderr.strip()}")
        finish()
    ids = cached_ids(text_file + ".xtrap")
    window = torch.cat([torch.tensor([CLS]), ids[offset:offset + N - 2], torch.tensor([SEP])])
    probs = []
    logits(t, "jinabert", cfg, window, probs=probs)
    with h5py.File(h5, "r") as f:
        check(list(f["tokens"][:]) == window.tolist(), "the dump's window is [CLS] + 18 tokens + [SEP]")
        for l, want in enumerate(probs):
            got = torch.tensor(f[f"layer_{l:02d}/attn"][:]).double()  # (H, N, N)
            diff = (got - want).abs().max().item() if got.shape == want.shape else float("inf")
            sums = (got.sum(-1) - 1).abs().max().item()
            check(diff <= 1e-5 and sums <= 1e-5,
                  f"jinabert layer {l}: max |p - reference| {diff:.1e}, max |row sum - 1| {sums:.1e}")
    finish()


main()
