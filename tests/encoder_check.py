"""Pretrained BERT-layout encoders (MosaicBERT, JinaBERT, BERT, RoBERTa): xtrap's masked-token NLL
against float64 references written from the authors' modeling code (encoder_reference.py), and
hostile configs and directories.

    encoder_check.py EXPORT_LOGITS [--table FILE]

Tiny random checkpoints (4 and 6 heads, 6 not a power of two; float32 and float16 storage) are run
through `export_logits DIR TOKENS OUT` on a sequence longer than MosaicBERT's alibi_starting_size
(the bias rebuilt, never clipped) with 15% of its tokens replaced by a mask id; the NLL of every
masked token and the largest logit difference are compared to 1e-5.
"""
import csv, math, os, struct, sys, tempfile
import torch
import torch.nn.functional as F

from hf_checkpoint import check, finish, run, write_model
from encoder_reference import checkpoint, config, logits

EXPORT_LOGITS = sys.argv[1]
TABLE = sys.argv[sys.argv.index("--table") + 1] if "--table" in sys.argv else None
MASK = 3
rows = []  # (name, family, heads, length, stored as, masked tokens, max |dNLL|, max |dlogit|) for --table


def xtrap_logits(d, ids, V, work):
    tokens, out = os.path.join(work, "tokens.txt"), os.path.join(work, "logits.bin")
    with open(tokens, "w") as f:
        f.write(" ".join(str(i) for i in ids.tolist()))
    r = run([EXPORT_LOGITS, d, tokens, out])
    if r.returncode != 0:
        return None, r.stderr.strip()
    raw = open(out, "rb").read()
    return torch.tensor(struct.unpack(f"<{len(raw) // 4}f", raw)).view(len(ids), V).double(), ""


def masked(seed, V, T):
    """(inputs, targets, positions): a random sequence of real ids (4..V-1) with 15% of positions masked."""
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(4, V, (T,), generator=g)
    positions = torch.randperm(T, generator=g)[:max(1, int(0.15 * T))].sort().values
    inputs = targets.clone()
    inputs[positions] = MASK
    return inputs, targets, positions


def swapped_gate(tensors, F_):
    """The gated layers' halves exchanged: a reference that gates the second half (a wrong one)."""
    return {k: torch.cat([v[F_:], v[:F_]]) if "gated_layers" in k else v for k, v in tensors.items()}


def tensorflow_names(tensors):
    """LayerNorm parameters named gamma and beta, as bert-base-uncased's converted weights name them."""
    rename = lambda k: k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
    return {rename(k): v for k, v in tensors.items()}


def compare(work, name, family, cfg, tensors, T, dtype=torch.float32, tol=1e-5, wrong=None, stored=None):
    d = os.path.join(work, name)
    write_model(d, cfg, {k: v.to(dtype) for k, v in (stored or tensors).items()})
    V = cfg["vocab_size"]
    inputs, targets, positions = masked(len(name), V, T)
    ours, err = xtrap_logits(d, inputs, V, work)
    if ours is None:
        check(False, f"{name}: export_logits failed: {err}")
        return
    ref = logits({k: v.to(dtype) for k, v in tensors.items()}, family, cfg, inputs)
    nll = lambda z: F.cross_entropy(z[positions], targets[positions], reduction="none")
    diff = (nll(ours) - nll(ref)).abs().max().item()
    logit_diff = (ours - ref).abs().max().item()
    rows.append((name, family, cfg["num_attention_heads"], T, str(dtype).replace("torch.", ""), len(positions),
                 f"{diff:.3e}", f"{logit_diff:.3e}"))
    check(diff < tol, f"{name}: masked-token NLL of {len(positions)} tokens at T={T} within {tol:g} "
                      f"(max |diff| {diff:.1e}, max |logit diff| {logit_diff:.1e})")
    if wrong is not None:  # the bound discriminates: a reference with one detail wrong is far outside it
        far = (nll(ours) - nll(logits(wrong, family, cfg, inputs))).abs().max().item()
        check(far > 1e-3, f"{name}: a reference gating the second half differs by {far:.1e}")


def hostile(work, name, family, cfg, tensors, expect):
    d = os.path.join(work, name)
    write_model(d, cfg, tensors)
    ours, err = xtrap_logits(d, torch.tensor([5, 6, 7]), cfg["vocab_size"], work)
    check(ours is None and expect in err and "\n" not in err, f"{name}: refused with one line naming '{expect}' ({err})")


def main():
    torch.manual_seed(0)
    work = tempfile.mkdtemp(prefix="xtrap-encoders-")
    # MosaicBERT past its alibi_starting_size (16), 4 and 6 heads; float16 storage.
    for H in (4, 6):
        cfg = config("mosaicbert", 48, H, 2, 53, 40)
        t = checkpoint(H, "mosaicbert", cfg)
        compare(work, f"mosaicbert-h{H}", "mosaicbert", cfg, t, T=40, wrong=swapped_gate(t, 40))
    cfg = config("mosaicbert", 32, 4, 2, 53, 24)
    compare(work, "mosaicbert-f16", "mosaicbert", cfg, checkpoint(9, "mosaicbert", cfg), T=24, dtype=torch.float16)
    # Recognised by its fused Wqkv alone (a config without alibi_starting_size).
    cfg = config("mosaicbert", 32, 4, 1, 53, 24)
    del cfg["alibi_starting_size"]
    compare(work, "mosaicbert-by-tensors", "mosaicbert", cfg, checkpoint(11, "mosaicbert", cfg), T=30)
    # JinaBERT: geglu and reglu, 6 heads.
    for ffn in ("geglu", "reglu"):
        cfg = config("jinabert", 48, 6, 2, 53, 40, feed_forward_type=ffn)
        compare(work, f"jinabert-{ffn}", "jinabert", cfg, checkpoint(12, "jinabert", cfg), T=40)
    # The learned-position controls, up to their tables.
    cfg = config("bert", 48, 4, 2, 53, 64)
    compare(work, "bert", "bert", cfg, checkpoint(13, "bert", cfg), T=64)
    t = checkpoint(21, "bert", cfg)
    compare(work, "bert-gamma-beta", "bert", cfg, t, T=48, stored=tensorflow_names(t))
    cfg = config("roberta", 48, 6, 2, 53, 64)
    compare(work, "roberta", "roberta", cfg, checkpoint(14, "roberta", cfg), T=64)

    # Hostile configs and directories: one line each.
    cfg = config("jinabert", 32, 4, 1, 53, 24)
    hostile(work, "jinabert-headless", "jinabert", cfg, checkpoint(15, "jinabert", cfg, head=False),
            "saved without its masked-LM head")
    cfg = config("mosaicbert", 32, 4, 1, 53, 24, hidden_act="gelu_new")
    hostile(work, "mosaicbert-gelu-new", "mosaicbert", cfg, checkpoint(16, "mosaicbert", cfg), "hidden_act")
    cfg = config("bert", 32, 4, 1, 53, 24, position_embedding_type="relative_key")
    hostile(work, "bert-relative", "bert", cfg, checkpoint(17, "bert", cfg), "position_embedding_type")
    cfg = config("jinabert", 32, 4, 1, 53, 24, feed_forward_type="original")
    hostile(work, "jinabert-original", "jinabert", cfg, checkpoint(18, "jinabert", cfg), "feed_forward_type")
    cfg = config("bert", 32, 4, 1, 53, 24)
    t = checkpoint(19, "bert", cfg)
    t["bert.encoder.layer.0.attention.self.distance_embedding.weight"] = torch.zeros(3, 8)
    hostile(work, "bert-extra-tensor", "bert", cfg, t, "distance_embedding")
    ours, err = xtrap_logits(os.path.join(work, "bert"), torch.arange(65) % 49 + 4, 53, work)
    check(ours is None and "exceeds the table" in err, f"bert past its 64 positions refused ({err})")
    if TABLE:
        with open(TABLE, "w", newline="") as f:
            table = csv.writer(f)
            table.writerow(("checkpoint", "family", "heads", "length", "stored_as", "masked_tokens", "max_abs_dnll",
                            "max_abs_dlogit"))
            table.writerows(rows)
    finish()


main()
