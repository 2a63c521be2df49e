"""Pretrained rotary (Llama-family) checkpoints: xtrap's per-token NLL against float64 references, and hostile files.

    rotary_check.py EXPORT_LOGITS [--table FILE]

The references (rotary_reference.py) are written from Hugging Face transformers' main branch (5.x),
not from xtrap.

The tests write tiny random checkpoints (config.json and tensor names as the real checkpoints),
run `export_logits DIR TOKENS OUT` past the original context and past the sliding window, and
compare the NLL of every next token to 1e-5 (a bf16-stored one also evaluated in bfloat16, to a
bound derived below). The reference is itself checked against a literal numpy forward and against
hand-worked inverse frequencies. Hostile configs and weights must fail with one line.
"""
import csv, math, os, shutil, sys, tempfile
import numpy as np
import torch

from hf_checkpoint import NAMES, check, finish, run, write_model
from rotary_reference import checkpoint, config, hostile_models, nll, reference_logits, rope_parameters

EXPORT_LOGITS = sys.argv[1]
TABLE = sys.argv[sys.argv.index("--table") + 1] if "--table" in sys.argv else None


def rotate_interleaved(x):  # the GPT-J pairing (2i, 2i + 1): a wrong reference, to show a bound discriminates
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


# ---- self-checks of the reference ----
def literal_llama(tensors, cfg, ids, window=None):
    """Llama / Mistral with default rope, written apart from the reference in numpy: one explicit
    (D, D) rotation matrix per position rotating channel pairs (i, i + D/2) by t * base^(-2i/D), query
    head h reading kv head h // (H / KV), loops over queries and keys."""
    W = {n: v.double().numpy() for n, v in tensors.items()}
    H, KV, C, L = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"], cfg["num_hidden_layers"]
    D, T, eps = C // H, len(ids), cfg["rms_norm_eps"]
    R = np.zeros((T, D, D))
    for t in range(T):
        for i in range(D // 2):
            a = t * cfg["rope_theta"] ** (-2 * i / D)
            R[t, i, i], R[t, i, i + D // 2] = math.cos(a), -math.sin(a)
            R[t, i + D // 2, i], R[t, i + D // 2, i + D // 2] = math.sin(a), math.cos(a)

    def norm(x, w):
        return np.stack([w * r / math.sqrt(np.mean(r * r) + eps) for r in x])

    x = W["model.embed_tokens.weight"][ids.numpy()]
    for l in range(L):
        p = f"model.layers.{l}."
        h = norm(x, W[p + "input_layernorm.weight"])
        q, k, v = (h @ W[p + f"self_attn.{n}_proj.weight"].T for n in "qkv")
        out = np.zeros((T, H * D))
        for head in range(H):
            g = head // (H // KV)
            qh = np.stack([R[t] @ q[t, head * D:(head + 1) * D] for t in range(T)])
            kh = np.stack([R[t] @ k[t, g * D:(g + 1) * D] for t in range(T)])
            for i in range(T):
                js = [j for j in range(i + 1) if window is None or j > i - window]
                s = np.array([qh[i] @ kh[j] / math.sqrt(D) for j in js])
                w = np.exp(s - s.max())
                out[i, head * D:(head + 1) * D] = (w / w.sum()) @ v[js, g * D:(g + 1) * D]
        x = x + out @ W[p + "self_attn.o_proj.weight"].T
        h = norm(x, W[p + "post_attention_layernorm.weight"])
        gate, up = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ W[p + "mlp.down_proj.weight"].T
    x = norm(x, W["model.norm.weight"])
    return torch.from_numpy(x @ W["lm_head.weight"].T)


def self_check():
    for family, extra in (("llama", {}), ("mistral", {"sliding_window": 6})):
        cfg = config(family, 32, 4, 2, 2, 16, **extra)
        t = checkpoint(5, cfg)
        ids = torch.randint(0, cfg["vocab_size"], (24,))
        diff = (reference_logits(t, cfg, ids) - literal_llama(t, cfg, ids, extra.get("sliding_window"))).abs().max().item()
        check(diff < 1e-10, f"reference = literal numpy forward ({family}, GQA 4:2, window {extra.get('sliding_window')}): "
                            f"max |logit diff| {diff:.1e}")
    # inverse frequencies worked out by hand (d = 16)
    cfg = config("llama", 64, 4, 4, 1, 32, rope_theta=1000.0)
    inv = 1000.0 ** (-torch.arange(8, dtype=torch.float64) / 8)
    # yarn s = 4, L_orig 32: low = floor(16 ln(32 / 64 pi) / (2 ln 1000)) = floor(-2.12) -> 0,
    # high = ceil(16 ln(32 / 2 pi) / (2 ln 1000)) = ceil(1.88) = 2; ramp (0, 1/2, 1, ...);
    # attention factor 0.1 ln 4 + 1
    got, factor = rope_parameters(cfg, 1000.0, {"rope_type": "yarn", "factor": 4.0}, 64)
    want = torch.cat((inv[:1], inv[1:2] * (0.5 / 4 + 0.5), inv[2:] / 4))
    check((got - want).abs().max() < 1e-15 and abs(factor - (0.1 * math.log(4) + 1)) < 1e-15,
          "yarn inverse frequencies and attention factor = hand-worked values")
    # llama3 s = 4, L_orig 32, low 1, high 4: wavelengths 2 pi 1000^(i/8) = 6.28 (< 32/4: kept), 14.9 (in
    # [8, 32]: smoothed), 35.3, 83.8 ... (> 32/1: divided by s)
    got, _ = rope_parameters(cfg, 1000.0, {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 32}, 64)
    m = (32 / (2 * math.pi / inv[1]) - 1) / 3
    want = torch.cat((inv[:1], (1 - m) * inv[1:2] / 4 + m * inv[1:2], inv[2:] / 4))
    check((got - want).abs().max() < 1e-15, f"llama3 inverse frequencies = hand-worked values (smooth {float(m):.3f})")


# ---- the cases ----
def yarn(factor, **more):
    return {"rope_type": "yarn", "factor": factor, **more}


def cases():
    """(family, label, config, lengths, seed): every family, every scaling type, GQA 4:2 and 6:1, tied and
    untied, windows of 8 shorter than the lengths, lengths past max_position_embeddings 16."""
    short, long = [0.5 + 0.25 * i for i in range(4)], [1.0 + 1.5 * i for i in range(4)]  # Phi-3: rotary dim 8 -> 4
    return [
        ("llama", "default", config("llama", 32, 4, 2, 2, 16), [48], 1),
        ("llama", "linear", config("llama", 48, 6, 1, 2, 16, tied=True,
                                   rope_scaling={"rope_type": "linear", "factor": 2.0}), [48], 2),
        ("llama", "dynamic", config("llama", 32, 4, 2, 2, 16, rope_scaling={"type": "dynamic", "factor": 2.0}),
         [12, 48], 3),
        ("llama", "yarn mscale", config("llama", 32, 4, 2, 2, 64, rope_theta=1000.0, rope_scaling=yarn(
            4.0, original_max_position_embeddings=16, mscale=0.707, mscale_all_dim=1.0)), [80], 4),
        ("llama", "llama3", config("llama", 64, 4, 2, 2, 128, rope_theta=1000.0, rope_scaling={
            "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32}), [64], 5),
        ("llama", "linear, transformers 5 rope_parameters", {
            k: v for k, v in config("llama", 32, 4, 2, 2, 16, transformers_version="5.0.0", rope_parameters={
                "rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}).items()
            if k not in ("rope_theta", "rope_scaling")}, [48], 17),
        ("mistral", "default window 8", config("mistral", 32, 4, 2, 2, 16, sliding_window=8), [40], 6),
        ("qwen2", "default window 8", config("qwen2", 32, 4, 2, 3, 16, tied=True, rope_theta=1000000.0,
                                             use_sliding_window=True, sliding_window=8, max_window_layers=1), [40], 7),
        ("qwen2", "yarn", config("qwen2", 48, 6, 1, 2, 16, tied=True, rope_theta=1000.0, rope_scaling=yarn(4.0)),
         [48], 8),
        ("qwen3", "default", config("qwen3", 32, 4, 2, 2, 16, tied=True, head_dim=16, rope_theta=1000000.0), [48], 9),
        ("qwen3", "yarn attention_factor truncate false", config(
            "qwen3", 32, 4, 2, 2, 16, head_dim=16, rope_theta=1000.0, rope_scaling=yarn(
                2.0, attention_factor=1.25, beta_fast=4, beta_slow=1, truncate=False)), [48], 10),
        ("phi3", "longrope partial 0.5", config(
            "phi3", 64, 4, 2, 2, 64, original_max_position_embeddings=16, partial_rotary_factor=0.5,
            rope_scaling={"type": "longrope", "short_factor": short, "long_factor": long}), [12, 48], 11),
        ("phi3", "default window 8", config("phi3", 32, 4, 4, 2, 16, sliding_window=8), [40], 12),
        ("gemma", "default", config("gemma", 32, 4, 1, 2, 16, tied=True, head_dim=16), [48], 13),
        ("gemma2", "softcaps window 8", config(
            "gemma2", 32, 4, 2, 3, 16, tied=True, head_dim=16, query_pre_attn_scalar=24, sliding_window=8,
            attn_logit_softcapping=5.0, final_logit_softcapping=3.0), [40], 14),
        ("gemma3_text", "two bases, linear global, window 8", config(
            "gemma3_text", 32, 4, 2, 3, 16, tied=True, head_dim=16, sliding_window=8, sliding_window_pattern=3,
            rope_theta=1000.0, rope_scaling={"rope_type": "linear", "factor": 8.0}), [40], 15),
        ("gemma3_text", "layer_types", config(
            "gemma3_text", 32, 4, 2, 3, 16, tied=True, head_dim=16, sliding_window=8, rope_theta=1000.0,
            layer_types=["full_attention", "sliding_attention", "full_attention"]), [40], 16),
    ]


def export(d, ids, *extra):
    """xtrap's logits (T, V) as float64, or the one-line error."""
    tokens, out = os.path.join(work, "tokens.txt"), os.path.join(work, "logits.f32")
    open(tokens, "w").write(" ".join(str(int(i)) for i in ids))
    r = run([EXPORT_LOGITS, d, tokens, out, *extra])
    if r.returncode != 0:
        return None, r.stderr.strip()
    return torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).view(len(ids), -1).double(), ""


work = tempfile.mkdtemp()
torch.manual_seed(0)
rows = []
self_check()

# ---- float32: max |dNLL| <= 1e-5 past the original context and the windows ----
for family, label, cfg, lengths, seed in cases():
    tensors = checkpoint(seed, cfg)
    d = os.path.join(work, f"{family}-{seed}")
    write_model(d, cfg, tensors, shards=2 if seed == 1 else 1)
    for T in lengths:
        ids = torch.randint(0, cfg["vocab_size"], (T,))
        ours, err = export(d, ids)
        what = f"{family:12s} {label:38s} T={T:3d} (max_pos {cfg['max_position_embeddings']})"
        if ours is None:
            check(False, f"{what}: {err}")
            continue
        diff = (nll(ours, ids) - nll(reference_logits(tensors, cfg, ids), ids)).abs().max().item()
        rows.append((family, label, T, "float32", diff))
        check(diff <= 1e-5, f"{what}: max |dNLL| {diff:.2e}")

# ---- bf16-stored weights: evaluated in float32 (exact on the stored values) and in bfloat16 ----
# In bfloat16 xtrap holds the matrices in bf16 (run/pretrained_weights.h) and rounds their inputs and
# outputs to 8 significant bits (u = 2^-8): about 8 rounded products lie on the path to a logit, so
# |d logit| <= 8 u max|logit| (pretrained_check.py's bound); NLL = logsumexp(z) - z_target moves by at most
# max|dz| through each term, so |dNLL| <= 16 u max|logit| (about 0.25 here; rounding every Linear's input,
# weight and output to bf16 in this reference moves the NLL by about 0.04). The reference with GPT-J's
# interleaved pairing (a plausible bug) must lie outside the bound, or the bound would test nothing.
for family, cfg in (("llama", config("llama", 32, 4, 2, 2, 16, dtype="bfloat16")),
                    ("gemma", config("gemma", 48, 4, 1, 2, 16, tied=True, head_dim=16, dtype="bfloat16"))):
    tensors = {n: v.to(torch.bfloat16) for n, v in checkpoint(20, cfg).items()}
    d = os.path.join(work, f"{family}-bf16")
    write_model(d, cfg, tensors)
    ids = torch.randint(0, cfg["vocab_size"], (48,))
    for dtype, extra in ((torch.float32, ()), (torch.bfloat16, ("none", "1", "all", "bfloat16"))):
        ref = reference_logits(tensors, cfg, ids, dtype)
        bound = 1e-5 if dtype == torch.float32 else 16 * 2 ** -8 * ref.abs().max().item()
        what = f"{family:12s} {'default, BF16 checkpoint':38s} T= 48 in {NAMES[dtype]}"
        if dtype == torch.bfloat16:
            wrong = (nll(reference_logits(tensors, cfg, ids, dtype, rotate_interleaved), ids) - nll(ref, ids)).abs().max()
            check(wrong > bound, f"{what}: the bound {bound:.3g} excludes interleaved pairing ({wrong:.3g})")
        ours, err = export(d, ids, *extra)
        if ours is None:
            check(False, f"{what}: {err}")
            continue
        diff = (nll(ours, ids) - nll(ref, ids)).abs().max().item()
        rows.append((family, "default", 48, str(dtype).replace("torch.", ""), diff))
        check(diff <= bound, f"{what}: max |dNLL| {diff:.2e} <= {bound:.3g}")

print("\nfamily        scaling                                 length  dtype     max |dNLL|")
for family, label, T, dtype, diff in rows:
    print(f"{family:12s}  {label:38s}  {T:6d}  {dtype:8s}  {diff:.2e}")
if TABLE:
    with open(TABLE, "w", newline="") as f:
        table = csv.writer(f)
        table.writerow(("family", "scaling", "length", "dtype", "max_abs_dnll"))
        table.writerows((family, label, T, dtype, f"{diff:.3e}") for family, label, T, dtype, diff in rows)


# ---- hostile files: rc != 0, one line naming the key or tensor, no traceback ----
for name, d, needles in hostile_models(work):
    _, err = export(d, torch.arange(20))
    check(len(err.splitlines()) == 1 and "Traceback" not in err and any(n in err for n in needles),
          f"hostile {name}: {err!r}")

shutil.rmtree(work)
finish()
