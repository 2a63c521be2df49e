"""Pretrained BLOOM and MPT checkpoints: xtrap's logits against PyTorch references, and hostile files.

    pretrained_check.py XTRAP EXPORT_LOGITS

The references are written here from the reference modeling code, not from xtrap:
  - BLOOM: Hugging Face transformers, src/transformers/models/bloom/modeling_bloom.py
    (build_alibi_tensor with its key-position ALiBi, fused query_key_value viewed as
    [B, T, heads, 3, head_dim], baddbmm with beta 1 and alpha 1/sqrt(head_dim), masked_fill with
    finfo.min, float32 softmax, bloom_gelu_forward, word_embeddings_layernorm, ln_f, tied lm_head).
  - MPT: mosaicml llm-foundry, llmfoundry/models/mpt/modeling_mpt.py and layers/attention.py
    (gen_slopes with alibi_bias_max and its non-power-of-two interleave, build_alibi_bias
    arange(1 - S, 1) * slopes, Wqkv clamped by clip_qkv then chunked, q k^T * softmax_scale + bias,
    exact GELU, LayerNorms without bias, norm_f, logits F.linear(x, wte.weight)).
The tests write tiny random checkpoints (several head counts, 6 not a power of two) in float32,
float16 and bfloat16, single-file and sharded, evaluate them beyond their configs' maximum
length with every ALiBi interpolation, and compare in float64 to 1e-5. The interpolated slopes
come from interpolation.h's formulas, computed here. `eval --extend` (lambda, sinks) on a BLOOM
directory against the reference with each paper's seen keys and distances.
"""
import json, math, os, re, shutil, struct, sys, tempfile
import torch
import torch.nn.functional as F

from hf_checkpoint import (NAMES, cached_ids, check, csv_rows, finish, model_scenario, rand, run, stream_nll, text_counts,
                           write_model, write_safetensors)

XTRAP, EXPORT_LOGITS = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
NEOX_TOKENIZER = os.path.join(HERE, "tokenizer", "gpt-neox-20b_tokenizer.json")


def bloom_checkpoint(seed, C, H, layers, V, seq_length):
    g = torch.Generator().manual_seed(seed)
    t = {"word_embeddings.weight": rand(g, V, C, scale=1.0),
         "word_embeddings_layernorm.weight": rand(g, C, scale=0.1, shift=1.0),
         "word_embeddings_layernorm.bias": rand(g, C, scale=0.1)}
    for l in range(layers):
        p = f"h.{l}."
        for ln in ("input_layernorm", "post_attention_layernorm"):
            t[p + ln + ".weight"] = rand(g, C, scale=0.1, shift=1.0)
            t[p + ln + ".bias"] = rand(g, C, scale=0.1)
        for name, (o, i) in {"self_attention.query_key_value": (3 * C, C), "self_attention.dense": (C, C),
                             "mlp.dense_h_to_4h": (4 * C, C), "mlp.dense_4h_to_h": (C, 4 * C)}.items():
            t[p + name + ".weight"] = rand(g, o, i, scale=1.0 / math.sqrt(i))
            t[p + name + ".bias"] = rand(g, o, scale=0.1)
    t["ln_f.weight"] = rand(g, C, scale=0.1, shift=1.0)
    t["ln_f.bias"] = rand(g, C, scale=0.1)
    config = {"model_type": "bloom", "architectures": ["BloomForCausalLM"], "vocab_size": V, "hidden_size": C,
              "n_layer": layers, "n_head": H, "layer_norm_epsilon": 1e-5, "seq_length": seq_length,
              "apply_residual_connection_post_layernorm": False, "bos_token_id": 1, "eos_token_id": 2}
    return config, t


def mpt_checkpoint(seed, C, H, layers, V, max_seq_len, alibi_bias_max, clip_qkv):
    g = torch.Generator().manual_seed(seed)
    t = {"transformer.wte.weight": rand(g, V, C, scale=1.0)}
    for l in range(layers):
        p = f"transformer.blocks.{l}."
        t[p + "norm_1.weight"] = rand(g, C, scale=0.1, shift=1.0)
        t[p + "norm_2.weight"] = rand(g, C, scale=0.1, shift=1.0)
        for name, (o, i) in {"attn.Wqkv": (3 * C, C), "attn.out_proj": (C, C), "ffn.up_proj": (4 * C, C),
                             "ffn.down_proj": (C, 4 * C)}.items():
            t[p + name + ".weight"] = rand(g, o, i, scale=1.0 / math.sqrt(i))
    t["transformer.norm_f.weight"] = rand(g, C, scale=0.1, shift=1.0)
    config = {"model_type": "mpt", "architectures": ["MPTForCausalLM"], "vocab_size": V, "d_model": C,
              "n_layers": layers, "n_heads": H, "expansion_ratio": 4, "max_seq_len": max_seq_len, "no_bias": True,
              "norm_type": "low_precision_layernorm", "learned_pos_emb": True, "logit_scale": None,
              "attn_config": {"alibi": True, "alibi_bias_max": alibi_bias_max, "clip_qkv": clip_qkv,
                              "attn_type": "multihead_attention", "qk_ln": False, "softmax_scale": None,
                              "prefix_lm": False, "attn_impl": "torch"}}
    return config, t


# ---- the references ----
def bloom_slopes(H):  # modeling_bloom.build_alibi_tensor
    closest = 2 ** math.floor(math.log2(H))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != H:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        remaining = min(closest, H - closest)
        slopes = torch.cat([slopes, torch.pow(extra_base, torch.arange(1, 1 + 2 * remaining, 2, dtype=torch.int32))])
    return slopes.double()


def mpt_slopes(H, alibi_bias_max):  # llm-foundry gen_slopes
    n = 2 ** math.ceil(math.log2(H))
    m = torch.arange(1, n + 1, dtype=torch.float32).mul(alibi_bias_max / n)
    slopes = 1.0 / torch.pow(2, m)
    if n != H:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:H]
    return slopes.double()


def interpolate(slopes, interp, a):  # interpolation.h: linear m/a; ntk m / a^((r-1)/(n-1)), r the rank, largest first
    if interp == "none":
        return slopes
    if interp == "linear":
        return slopes / a
    n = len(slopes)
    order = sorted(range(n), key=lambda h: -float(slopes[h]))
    out = slopes.clone()
    for r, h in enumerate(order):
        out[h] = slopes[h] / (a ** (r / (n - 1)) if n > 1 else 1.0)
    return out


def layer_norm(x, w, b, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def bloom_forward(t, cfg, ids, slopes, extension=None):
    """extension(T) (context extension, docs/position-methods.md): (seen (T, T) bool, distance (T, T)) from a
    paper's formula, replacing the causal mask and the distances of BLOOM's bias."""
    W = {k: v.double() for k, v in t.items()}
    H, C = cfg["n_head"], cfg["hidden_size"]
    D = C // H
    B, T = ids.shape
    h = layer_norm(F.embedding(ids, W["word_embeddings.weight"]), W["word_embeddings_layernorm.weight"],
                   W["word_embeddings_layernorm.bias"])
    mask = torch.ones(B, T, dtype=torch.long)
    arange_tensor = ((mask.cumsum(dim=-1) - 1) * mask)[:, None, :]
    alibi = (slopes[..., None] * arange_tensor).reshape(B * H, 1, T)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    if extension is not None:  # -m d' (BLOOM's m j differs from -m (i - j) by a constant per row)
        seen, distance = extension(T)
        alibi = (-slopes.double()[:, None, None] * distance[None]).repeat(B, 1, 1)  # (B H, T, T)
        causal = causal | ~seen
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        ln = layer_norm(h, W[p + "input_layernorm.weight"], W[p + "input_layernorm.bias"])
        fused = F.linear(ln, W[p + "self_attention.query_key_value.weight"], W[p + "self_attention.query_key_value.bias"])
        fused = fused.view(B, T, H, 3, D)
        q = fused[..., 0, :].transpose(1, 2).reshape(B * H, T, D)
        k = fused[..., 1, :].permute(0, 2, 3, 1).reshape(B * H, D, T)
        v = fused[..., 2, :].transpose(1, 2).reshape(B * H, T, D)
        scores = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=1.0 / math.sqrt(D)).view(B, H, T, T)
        scores = scores.masked_fill(causal, torch.finfo(scores.dtype).min)
        probs = F.softmax(scores, dim=-1)
        ctx = torch.bmm(probs.view(B * H, T, T), v).view(B, H, T, D).permute(0, 2, 1, 3).reshape(B, T, C)
        h = F.linear(ctx, W[p + "self_attention.dense.weight"], W[p + "self_attention.dense.bias"]) + h
        ln = layer_norm(h, W[p + "post_attention_layernorm.weight"], W[p + "post_attention_layernorm.bias"])
        x = F.linear(ln, W[p + "mlp.dense_h_to_4h.weight"], W[p + "mlp.dense_h_to_4h.bias"])
        x = x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))  # bloom_gelu_forward
        h = F.linear(x, W[p + "mlp.dense_4h_to_h.weight"], W[p + "mlp.dense_4h_to_h.bias"]) + h
    h = layer_norm(h, W["ln_f.weight"], W["ln_f.bias"])
    return F.linear(h, W["word_embeddings.weight"])


def mpt_forward(t, cfg, ids, slopes):
    W = {(k[len("transformer."):] if k.startswith("transformer.") else k): v.double() for k, v in t.items()}
    H, C = cfg["n_heads"], cfg["d_model"]
    D = C // H
    B, S = ids.shape
    attn = cfg["attn_config"]
    clip = attn["clip_qkv"]
    eps = cfg.get("norm_eps", 1e-5)
    softcap, window = attn.get("attn_logit_softcapping"), attn.get("sliding_window_size", -1)
    x = F.embedding(ids, W["wte.weight"])
    attn_bias = torch.arange(1 - S, 1, dtype=torch.int32).view(1, 1, 1, S) * slopes.view(1, H, 1, 1)
    causal = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
    for l in range(cfg["n_layers"]):
        p = f"blocks.{l}."
        a = layer_norm(x, W[p + "norm_1.weight"], None, eps)
        qkv = F.linear(a, W[p + "attn.Wqkv.weight"])
        if clip:
            qkv = qkv.clamp(min=-clip, max=clip)
        q, k, v = qkv.chunk(3, dim=2)
        q = q.view(B, S, H, D).permute(0, 2, 1, 3)
        k = k.view(B, S, H, D).permute(0, 2, 3, 1)
        v = v.view(B, S, H, D).permute(0, 2, 1, 3)
        w = q.matmul(k) * (1 / math.sqrt(D))
        if softcap is not None:  # attention.py: on q.k, before the ALiBi bias
            w = softcap * torch.tanh(w / softcap)
        w = w + attn_bias
        w = w.masked_fill(causal.view(1, 1, S, S), torch.finfo(w.dtype).min)
        if window != -1:  # attention.py: tril(window) & triu(-window), the rest masked
            keep = torch.triu(torch.tril(torch.ones(S, S, dtype=torch.bool), window), -window)
            w = w.masked_fill(~keep.view(1, 1, S, S), torch.finfo(w.dtype).min)
        out = torch.softmax(w, dim=-1).matmul(v).permute(0, 2, 1, 3).reshape(B, S, C)
        x = x + F.linear(out, W[p + "attn.out_proj.weight"])
        m = layer_norm(x, W[p + "norm_2.weight"], None, eps)
        x = x + F.linear(F.gelu(F.linear(m, W[p + "ffn.up_proj.weight"])), W[p + "ffn.down_proj.weight"])
    x = layer_norm(x, W["norm_f.weight"], None, eps)
    logits = F.linear(x, W["wte.weight"] if cfg.get("tie_word_embeddings", True) else W["lm_head.weight"])
    cap = cfg.get("final_logit_softcapping")
    return logits if cap is None else cap * torch.tanh(logits / cap)


work = tempfile.mkdtemp()
torch.manual_seed(0)

# ---- logits: every model x layout x interpolation, beyond the config's maximum length ----
T, L = 40, 16
models = []
for H in (4, 6, 8):
    models.append(("bloom", H) + bloom_checkpoint(10 + H, 24, H, 2, 97, L))
    models.append(("mpt", H) + mpt_checkpoint(20 + H, 24, H, 2, 97, L, 8 if H != 6 else 6, None if H == 4 else 0.5))
for kind, H, cfg, tensors in models:
    slopes = bloom_slopes(H) if kind == "bloom" else mpt_slopes(H, cfg["attn_config"]["alibi_bias_max"])
    ids = torch.randint(0, cfg["vocab_size"], (1, T))
    tokens = os.path.join(work, "tokens.txt")
    open(tokens, "w").write(" ".join(str(int(i)) for i in ids[0]))
    for dtype, shards in ((torch.float32, 1), (torch.float32, 3), (torch.bfloat16, 1), (torch.float16, 2)):
        stored = {n: v.to(dtype) for n, v in tensors.items()}
        d = os.path.join(work, f"{kind}-h{H}-{NAMES[dtype]}-{shards}")
        write_model(d, cfg, stored, shards, NEOX_TOKENIZER)
        forward = bloom_forward if kind == "bloom" else mpt_forward
        for interp, a in (("none", 1.0), ("linear", 2.5), ("ntk", 2.5), ("dynamic-ntk", T / L)):
            if dtype != torch.float32 and interp not in ("none", "ntk"):
                continue
            out = os.path.join(work, "logits.f32")
            r = run([EXPORT_LOGITS, d, tokens, out, interp, str(a)])
            if r.returncode != 0:
                check(False, f"{kind} H={H} {NAMES[dtype]} shards={shards} {interp}: {r.stderr.strip()}")
                continue
            ours = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).view(T, -1).double()
            ref = forward(stored, cfg, ids, interpolate(slopes, "ntk" if interp == "dynamic-ntk" else interp, a))[0]
            diff = (ours - ref).abs().max().item()
            check(diff <= 1e-5, f"{kind} H={H} {NAMES[dtype]} shards={shards} T={T} > L={L} interp={interp} a={a:g}: "
                                f"max |logit diff| {diff:.2e}")

# ---- MPT keys that change the numbers (issue 77): untied head, norm_eps, sliding window, soft-caps ----
for name, edit in (("untied", {"tie_word_embeddings": False}), ("norm_eps", {"norm_eps": 1e-2}),
                   ("window", {"attn_config": {"sliding_window_size": 5}}),
                   ("softcaps", {"final_logit_softcapping": 2.0, "attn_config": {"attn_logit_softcapping": 1.5}}),
                   ("all", {"tie_word_embeddings": False, "norm_eps": 1e-3, "final_logit_softcapping": 3.0,
                            "attn_config": {"sliding_window_size": 7, "attn_logit_softcapping": 2.0}})):
    cfg, tensors = mpt_checkpoint(40, 24, 6, 2, 97, L, 8, None)
    cfg = json.loads(json.dumps(cfg))
    for key, value in edit.items():
        if isinstance(value, dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    if not cfg.get("tie_word_embeddings", True):
        tensors["lm_head.weight"] = rand(torch.Generator().manual_seed(41), 97, 24, scale=1.0)
    ids = torch.randint(0, cfg["vocab_size"], (1, T))
    tokens = os.path.join(work, "tokens.txt")
    open(tokens, "w").write(" ".join(str(int(i)) for i in ids[0]))
    d = os.path.join(work, f"mpt-{name}")
    write_model(d, cfg, tensors)
    out = os.path.join(work, "logits.f32")
    r = run([EXPORT_LOGITS, d, tokens, out])
    if r.returncode != 0:
        check(False, f"mpt {name}: {r.stderr.strip()}")
        continue
    ours = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).view(T, -1).double()
    ref = mpt_forward(tensors, cfg, ids, mpt_slopes(6, 8))[0]
    diff = (ours - ref).abs().max().item()
    check(diff <= 1e-5, f"mpt {name} {edit}: max |logit diff| {diff:.2e}")

# ---- evaluation in bfloat16: the weight matrices held in bf16 when the checkpoint is 2-byte ----
# run/pretrained_weights.h: matrices (embedding, q/k/v, attention output, FFN) in bf16 for a float16
# or bfloat16 checkpoint evaluated with --dtype bfloat16, vectors (LayerNorms, biases) float32; a
# float32 checkpoint keeps float32. The logits against the float64 reference on the stored weights,
# to a bf16 tolerance: bf16 keeps 8 significant bits (unit roundoff u = 2^-8); along the path from
# the embedding to a logit about 8 products round their inputs or outputs to it, so |diff| <= 8 u
# max|logit| (a wrong slope or layout is off by tens of percent).
MATRIX = ("token_embedding.weight", "attn.qkv.weight", "attn.out.weight", "fc1.weight", "fc2.weight")
for kind, H, cfg, tensors in models[:2]:
    slopes = bloom_slopes(H) if kind == "bloom" else mpt_slopes(H, cfg["attn_config"]["alibi_bias_max"])
    ids = torch.randint(0, cfg["vocab_size"], (1, T))
    tokens = os.path.join(work, "tokens.txt")
    open(tokens, "w").write(" ".join(str(int(i)) for i in ids[0]))
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        stored = {n: v.to(dtype) for n, v in tensors.items()}
        d = os.path.join(work, f"{kind}-h{H}-{NAMES[dtype]}-bf16eval")
        write_model(d, cfg, stored, tokenizer=NEOX_TOKENIZER)
        out = os.path.join(work, "logits.f32")
        r = run([EXPORT_LOGITS, d, tokens, out, "ntk", "2.5", "all", "bfloat16"])
        what = f"{kind} H={H} {NAMES[dtype]} checkpoint evaluated in bfloat16"
        if r.returncode != 0:
            check(False, f"{what}: {r.stderr.strip()}")
            continue
        held = dict(line.split() for line in r.stdout.splitlines())
        want_matrix = "Float" if dtype == torch.float32 else "BFloat16"
        wrong = [f"{n}={t}" for n, t in held.items() if t != (want_matrix if n.endswith(MATRIX) else "Float")]
        check(not wrong and any(n.endswith(MATRIX) for n in held),
              f"{what}: matrices held as {want_matrix}, vectors as Float" + (f" (not: {wrong})" if wrong else ""))
        ours = torch.frombuffer(bytearray(open(out, "rb").read()), dtype=torch.float32).view(T, -1).double()
        forward = bloom_forward if kind == "bloom" else mpt_forward
        ref = forward(stored, cfg, ids, interpolate(slopes, "ntk", 2.5))[0]
        diff, bound = (ours - ref).abs().max().item(), 8 * 2 ** -8 * ref.abs().max().item()
        check(diff <= bound, f"{what}: max |logit diff| {diff:.3g} <= {bound:.3g} (8 u max|logit|)")

# ---- eval end to end: a text through the tokenizer, bits per byte and word perplexity ----
cfg, tensors = bloom_checkpoint(7, 16, 4, 2, 50304, 64)
d = os.path.join(work, "bloom-e2e")
write_model(d, cfg, tensors, tokenizer=NEOX_TOKENIZER)
text = "The quick brown fox jumps over the lazy dog.\nÉtait-ce 42 fois ?  Ünïcode — ok\n\nlast line without end"
text_file = os.path.join(work, "text.txt")
open(text_file, "w", encoding="utf-8").write(text)
csv = os.path.join(work, "eval.csv")
r = run([XTRAP, "eval", d, "--text", text_file, "--Lvalid", "64", "--no-progress", "--threads", "1", "--out", csv])
check(r.returncode == 0, "eval of a pretrained directory with --text" + ("" if r.returncode == 0 else ": " + r.stderr))
if r.returncode == 0:
    row = csv_rows(csv)[0]
    ids = cached_ids(text_file + ".xtrap-bpe-")
    count = len(ids)
    # one window of all of it, the first token predicted from bos_token_id 1
    total = stream_nll(lambda w: bloom_forward(tensors, cfg, w.view(1, -1), bloom_slopes(4))[0], ids, 1, 64, 64)
    nbytes, words = text_counts(text)
    check(int(row["tokens_scored"]) == count and int(row["text_bytes"]) == nbytes and int(row["text_words"]) == words,
          f"counts: tokens {row['tokens_scored']}/{count}, bytes {row['text_bytes']}/{nbytes}, words "
          f"{row['text_words']}/{words}")
    bpb, wppl = total / math.log(2) / nbytes, math.exp(total / words)
    check(abs(float(row["bits_per_byte"]) - bpb) < 1e-5 * bpb and abs(float(row["word_ppl"]) - wppl) < 1e-4 * wppl,
          f"bits per byte {row['bits_per_byte']} (reference {bpb:.6f}), word ppl {row['word_ppl']} ({wppl:.4f})")


# ---- --extend on a pretrained ALiBi checkpoint: LM-Infinite's lambda and sinks (StreamingLLM) ----
def lambda_rule(n_global, local):  # keys j < n_global or i - j < local; beyond the limit (= local) at the limit
    def of(T):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        return (j < n_global) | (i - j < local), torch.where(i - j >= local, local, i - j).double()
    return of


def sinks_rule(S, W):  # keys j < S or i - j <= W; a sink beyond the window at min(i, S + W) - j
    def of(T):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        return (j < S) | (i - j <= W), torch.where(i - j <= W, i - j, torch.clamp(i, max=S + W) - j).double()
    return of


if r.returncode == 0:
    for args, rule, label in ((("lambda", "--extend-sinks", "3", "--extend-window", "12"), lambda_rule(3, 12),
                               "lambda global=3 local=12 limit=12"),
                              (("sinks", "--extend-sinks", "2", "--extend-window", "9"), sinks_rule(2, 9),
                               "sinks S=2 W=9")):
        r = run([XTRAP, "eval", d, "--text", text_file, "--Lvalid", "64", "--no-progress", "--threads", "1", "--out",
                 csv, "--extend", *args])
        if r.returncode != 0:
            check(False, f"bloom --extend {' '.join(args)}: {r.stderr.strip()}")
            continue
        row = csv_rows(csv)[0]
        total = stream_nll(lambda w: bloom_forward(tensors, cfg, w.view(1, -1), bloom_slopes(4), rule)[0], ids, 1, 64, 64)
        check(row["extend"] == label and abs(float(row["nll"]) - total / count) <= 1e-5,
              f"bloom --extend {' '.join(args)}: nll {row['nll']} (reference {total / count:.6f}), extend "
              f"{row['extend']!r} ({label!r})")


# ---- WikiText's tokenized files, detokenized by Megatron-LM's rules before the model's tokenizer ----
# A directory with only wiki.test.tokens scores the same tokens as --text of the file detokenized
# here by Megatron-LM's wikitext_detokenizer (tasks/zeroshot_gpt/detokenizer.py, as written there),
# and its bits per byte divide by the bytes of the file as written (lm-evaluation-harness's rule).
def wikitext_detokenizer(string):
    string = string.replace("s '", "s'")
    string = re.sub(r"/' [0-9]/", r"/'[0-9]/", string)
    for a, b in ((" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", "."), (" : ", ": "), (" ; ", "; "), (" . ", ". "),
                 (" ! ", "! "), (" ? ", "? "), (" , ", ", ")):
        string = string.replace(a, b)
    string = re.sub(r"\(\s*([^\)]*?)\s*\)", r"(\1)", string)
    string = re.sub(r"\[\s*([^\]]*?)\s*\]", r"[\1]", string)
    string = re.sub(r"{\s*([^}]*?)\s*}", r"{\1}", string)
    string = re.sub(r"\"\s*([^\"]*?)\s*\"", r'"\1"', string)
    string = re.sub(r"'\s*([^']*?)\s*'", r"'\1'", string)
    for a, b in (("= = = =", "===="), ("= = =", "==="), ("= =", "=="), (" " + chr(176) + " ", chr(176)),
                 (" \n", "\n"), ("\n ", "\n"), (" N ", " 1 "), (" 's", "'s")):
        string = string.replace(a, b)
    return string


wiki = os.path.join(work, "wikitext-tokens")
os.makedirs(wiki)
tokens_text = "".join(open(os.path.join(HERE, "..", "data", "wikitext-2", "wiki.test.tokens"), encoding="utf-8")
                      .readlines()[:60])
for split in ("train", "valid", "test"):
    open(os.path.join(wiki, f"wiki.{split}.tokens"), "w", encoding="utf-8").write(tokens_text)
detok_file = os.path.join(work, "detokenized.txt")
open(detok_file, "w", encoding="utf-8").write(wikitext_detokenizer(tokens_text))
rows = {}
for name, source in (("data", ["--data", wiki, "--split", "test"]), ("text", ["--text", detok_file])):
    out = os.path.join(work, f"detok-{name}.csv")
    r = run([XTRAP, "eval", d, *source, "--Lvalid", "64", "--no-progress", "--threads", "1", "--out", out])
    check(r.returncode == 0, f"eval of WikiText tokens via {name}" + ("" if r.returncode == 0 else ": " + r.stderr))
    if r.returncode == 0:
        rows[name] = csv_rows(out)[0]
if len(rows) == 2:
    a, b = rows["data"], rows["text"]
    check(a["tokens_scored"] == b["tokens_scored"] and a["nll"] == b["nll"],
          f"--data of tokenized WikiText = --text of its Megatron-LM detokenization: tokens {a['tokens_scored']}/"
          f"{b['tokens_scored']}, nll {a['nll']}/{b['nll']}")
    nbytes, words = text_counts(tokens_text)
    check(int(a["text_bytes"]) == nbytes and int(a["text_words"]) == words,
          f"detokenized WikiText counts the file as written: bytes {a['text_bytes']}/{nbytes}, words "
          f"{a['text_words']}/{words}")

# ---- train --init from a pretrained directory: its tokenizer's ids of WikiText, its own weights ----
# One step at lr 1e-12 (no weight moves measurably) at L = 32. `eval RUN` with no flags reads the
# run's data through the tokenizer.json it copied, the first token predicted from BLOOM's bos, and
# scores what the reference forward of the source scores on those ids; `export RUN --hf` writes a
# BLOOM directory of the same numbers; a run with interpolated slopes has no BLOOM config (refused).
e2e_cfg, e2e_tensors = bloom_checkpoint(7, 16, 4, 2, 50304, 64)
adapted = os.path.join(work, "bloom-adapted")
r = run([XTRAP, "train", "--init", os.path.join(work, "bloom-e2e"), "--L", "32", "--data", wiki, "--steps", "1",
         "--lr", "1e-12", "--warmup", "0", "--batch", "2", "--eval-tokens", "64", "--threads", "1", "--no-progress",
         "--out", adapted])
check(r.returncode == 0, "train --init from a BLOOM directory" + ("" if r.returncode == 0 else ": " + r.stderr))
if r.returncode == 0:
    run_json = json.load(open(os.path.join(adapted, "run.json")))
    check(run_json.get("tokenizer", {}).get("family") == "bloom" and run_json["model"]["L"] == 32,
          f"run.json of the adapted run: tokenizer {run_json.get('tokenizer')}, L {run_json['model']['L']}")
    out = os.path.join(work, "adapted.csv")
    r = run([XTRAP, "eval", adapted, "--split", "test", "--Lvalid", "32", "--no-progress", "--threads", "1", "--out",
             out])
    check(r.returncode == 0, "eval of the adapted run" + ("" if r.returncode == 0 else ": " + r.stderr))
    if r.returncode == 0:
        row = csv_rows(out)[0]
        ids = cached_ids(os.path.join(wiki, "wiki.test.tokens.xtrap-bpe-detok"))
        total = stream_nll(lambda w: bloom_forward(e2e_tensors, e2e_cfg, w.view(1, -1), bloom_slopes(4))[0], ids, 1,
                           32, 32)
        check(int(row["tokens_scored"]) == len(ids) and abs(float(row["nll"]) - total / len(ids)) <= 1e-5,
              f"adapted run at L 32: {row['tokens_scored']} tokens ({len(ids)}), nll {row['nll']} (reference "
              f"{total / len(ids):.6f})")
        exported = adapted + "-hf"
        r = run([XTRAP, "export", adapted, "--hf", exported])
        check(r.returncode == 0, "export --hf of the adapted run" + ("" if r.returncode == 0 else ": " + r.stderr))
        if r.returncode == 0:
            config = json.load(open(os.path.join(exported, "config.json")))
            check(config["model_type"] == "bloom" and config["seq_length"] == 32,
                  f"exported config: model_type {config['model_type']}, seq_length {config.get('seq_length')}")
            out2 = os.path.join(work, "adapted-hf.csv")
            r = run([XTRAP, "eval", exported, "--data", wiki, "--split", "test", "--Lvalid", "32", "--no-progress",
                     "--threads", "1", "--out", out2])
            ok = r.returncode == 0 and csv_rows(out2)[0]["nll"] == row["nll"]
            check(ok, "the export scores the run's nll" + ("" if r.returncode == 0 else ": " + r.stderr))
        # The same adaptation as a scenario variant (init = a pretrained variant): the same run, so the
        # same row, and --verify passes.
        scen = os.path.join(work, "scen-init")
        os.makedirs(scen)
        shutil.copytree(os.path.join(work, "bloom-e2e"), os.path.join(scen, "bloom-src"))
        with open(os.path.join(scen, "init.toml"), "w") as f:
            f.write(f'description = "a tiny random BLOOM adapted at L 32"\n\n[[variant]]\nname = "bloom-src"\n'
                    f'model = "bloom-src"\ndata = "{wiki}"\nthreads = 1\n\n[[variant]]\nname = "bloom-32"\n'
                    f'init = "bloom-src"\nL = 32\ndata = "{wiki}"\nsteps = 1\nlr = 1e-12\nwarmup = 0\nbatch = 2\n'
                    f'eval_tokens = 64\nthreads = 1\n\n[[eval]]\nvariants = ["bloom-32"]\nlvalid = [32]\n'
                    f'split = "test"\n')
        where = ["--runs", os.path.join(scen, "runs"), "--results", os.path.join(scen, "results")]
        r = run([XTRAP, "run", os.path.join(scen, "init.toml"), "--no-progress", *where])
        check(r.returncode == 0, "xtrap run of a variant adapted from a pretrained variant" +
              ("" if r.returncode == 0 else ": " + r.stderr[-800:]))
        if r.returncode == 0:
            body = csv_rows(os.path.join(scen, "results", "init", "results.csv"))
            check(len(body) == 1 and body[0]["nll"] == row["nll"],
                  f"scenario row of the adapted variant = eval of the same run: {[b['nll'] for b in body]} / "
                  f"{row['nll']}")
            r = run([XTRAP, "run", os.path.join(scen, "init.toml"), "--verify", "--results",
                     os.path.join(scen, "results")])
            check(r.returncode == 0, "--verify of the adapted variant" + ("" if r.returncode == 0 else ": " + r.stderr))
    slopes = adapted + "-linear"
    r = run([XTRAP, "train", "--init", os.path.join(work, "bloom-e2e"), "--L", "128", "--interp", "linear", "--data",
             wiki, "--steps", "1", "--batch", "2", "--eval-tokens", "64", "--threads", "1", "--no-progress", "--out",
             slopes])
    check(r.returncode == 0, "train --init --interp linear from BLOOM" + ("" if r.returncode == 0 else ": " + r.stderr))
    r = run([XTRAP, "export", slopes, "--hf", slopes + "-hf"])
    lines = r.stderr.strip().splitlines()
    check(r.returncode != 0 and len(lines) == 1 and "interpolated" in lines[0] and not os.path.exists(slopes + "-hf"),
          f"export --hf of interpolated slopes refused in one line: {r.stderr.strip()!r}")

# ---- a scenario naming a pretrained model: xtrap run, its results, --verify ----
scenario = model_scenario(work, d, "pretrained-smoke", "bloom-tiny", "a tiny random BLOOM evaluated as it is", wiki, """[[eval]]
lvalid = [32, 64]
interps = ["none", "ntk"]
split = "test"

[[eval]]
task = "passkey"
lvalid = [128]
depths = [0, 100]
trials = 2
filler = "natural"
interps = ["none", "ntk"]
split = "test"

[probe]
bias_len = 8
attn_lvalid = 16
""")
scen_dir = os.path.dirname(scenario)
runs_root, results_root = os.path.join(work, "runs"), os.path.join(work, "results")
common = ["--runs", runs_root, "--results", results_root]
r = run([XTRAP, "run", scenario, "--dry-run", *common])
check(r.returncode == 0 and "pretrained bloom" in r.stdout, "scenario --dry-run of a pretrained variant" +
      ("" if r.returncode == 0 else ": " + r.stderr))
r = run([XTRAP, "run", scenario, "--no-progress", "--results", results_root, "--runs", runs_root])
check(r.returncode == 0, "xtrap run of a pretrained variant" + ("" if r.returncode == 0 else ": " + r.stderr[-800:]))
out_dir = os.path.join(results_root, "pretrained-smoke")
if r.returncode == 0:
    body = csv_rows(os.path.join(out_dir, "results.csv"))
    ppl = [b for b in body if b["task"] in ("", "perplexity")]
    key = [b for b in body if b["task"] == "passkey"]
    check(len(ppl) == 4 and len(key) == 4 and all(b["run"] == "bloom-tiny" for b in body),
          f"results.csv: {len(ppl)} perplexity rows (2 lengths x 2 interps), {len(key)} passkey rows (2 interps x 2 "
          f"depths)")
    # The scenario's Lvalid 64 / none row is the eval command's on the same text.
    same = [b for b in ppl if b["Lvalid"] == "64" and b["interp"] == "none"]
    check(len(same) == 1 and "data" in rows and same[0]["nll"] == rows["data"]["nll"],
          f"scenario row = xtrap eval row: nll {same[0]['nll'] if same else '?'} / "
          f"{rows['data']['nll'] if 'data' in rows else '?'}")
    manifest = json.load(open(os.path.join(out_dir, "manifest.json")))
    entry = manifest["variants"]["bloom-tiny"]
    check(entry["action"] == "pretrained" and entry["model_dir"].endswith("bloom-tiny") and
          entry["weights_digest"].startswith("fnv1a64:") and manifest["complete"],
          f"manifest records the model directory and its weights digest: {entry}")
    check(os.path.exists(os.path.join(out_dir, "probe", "bloom-tiny-attn.h5")) and
          os.path.exists(os.path.join(out_dir, "probe", "bloom-tiny-bias.h5")), "the scenario's probes of the model")
    check(not os.path.exists(os.path.join(scen_dir, "bloom-tiny", "scenario-evals")),
          "nothing is written into the model directory")
    r = run([XTRAP, "run", scenario, "--verify", "--results", results_root])
    check(r.returncode == 0, "--verify of the pretrained scenario's results" + ("" if r.returncode == 0 else ": " + r.stderr))
    # other weights under the same name: --verify names the digest
    cfg2, tensors2 = bloom_checkpoint(8, 16, 4, 2, 50304, 64)
    write_safetensors(os.path.join(scen_dir, "bloom-tiny", "model.safetensors"),
                      {n: v.to(torch.float16) for n, v in tensors2.items()})
    r = run([XTRAP, "run", scenario, "--verify", "--results", results_root])
    err = r.stderr.strip()
    check(r.returncode != 0 and "weights" in err and len(err.splitlines()) == 1,
          f"--verify after the weights changed: rc={r.returncode} {err!r}")
    # a second run reuses the cached evaluations of the first weights? No: new weights, new cache.
    r = run([XTRAP, "run", scenario, "--dry-run", *common])
    check(r.returncode == 0 and "cached" not in r.stdout, "new weights are not served from the old cache")
# a missing model directory: one line naming it
shutil.rmtree(os.path.join(scen_dir, "bloom-tiny"))
r = run([XTRAP, "run", scenario, "--dry-run", *common])
err = r.stderr.strip()
check(r.returncode != 0 and len(err.splitlines()) == 1 and os.path.join(scen_dir, "bloom-tiny") in err,
      f"scenario naming a missing model directory: rc={r.returncode} {err!r}")

# ---- probe --dump-attn of a pretrained model: the documented layout, the model's own tokens ----
h5file = os.path.join(work, "attn.h5")
r = run([XTRAP, "probe", d, "--dump-attn", h5file, "--data", wiki, "--split", "test", "--Lvalid", "24",
         "--offset", "5", "--threads", "1", "--store-dtype", "float32"])
check(r.returncode == 0, "probe --dump-attn of a pretrained model" + ("" if r.returncode == 0 else ": " + r.stderr))
if r.returncode == 0:
    import h5py
    all_ids = cached_ids(os.path.join(wiki, "wiki.test.tokens.xtrap-bpe-detok-"))
    with h5py.File(h5file, "r") as f:
        window = all_ids[5:29]
        check(list(f["tokens"][:]) == window.tolist() and len(f["words"]) == 24 and f.attrs["Lvalid"] == 24 and
              f.attrs["split"] in ("test", b"test"), "attention dump: tokens of the window, words, attributes")
        # layer 0's attention from the reference BLOOM forward on the same window
        W = {k: v.double() for k, v in tensors.items()}
        H, C, D = cfg["n_head"], cfg["hidden_size"], cfg["hidden_size"] // cfg["n_head"]
        ids = window.view(1, -1)
        h = layer_norm(F.embedding(ids, W["word_embeddings.weight"]), W["word_embeddings_layernorm.weight"],
                       W["word_embeddings_layernorm.bias"])
        ln = layer_norm(h, W["h.0.input_layernorm.weight"], W["h.0.input_layernorm.bias"])
        fused = F.linear(ln, W["h.0.self_attention.query_key_value.weight"],
                         W["h.0.self_attention.query_key_value.bias"]).view(1, 24, H, 3, D)
        q, k = fused[..., 0, :].transpose(1, 2), fused[..., 1, :].transpose(1, 2)
        pos = torch.arange(24, dtype=torch.float64)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D) + bloom_slopes(H).view(H, 1, 1) * (pos.view(1, 24) - pos.view(24, 1))
        scores = scores.masked_fill(torch.triu(torch.ones(24, 24, dtype=torch.bool), 1), float("-inf"))
        diff = (torch.tensor(f["layer_00/attn"][:]).double() - torch.softmax(scores, -1)[0]).abs().max().item()
        check(diff < 1e-5, f"attention dump of a pretrained model = the reference's layer-0 attention: {diff:.2e}")
r = run([XTRAP, "probe", d, "--dump-attn", h5file, "--text", text_file, "--split", "test"])
err = r.stderr.strip()
check(r.returncode != 0 and len(err.splitlines()) == 1 and "--split" in err, f"probe --text with --split: {err!r}")

# ---- hostile files: one line naming the file, non-zero exit ----
def eval_command(d):
    """The evaluation every hostile checkpoint (and the intact one it is measured against) gets."""
    return [XTRAP, "eval", d, "--text", text_file, "--Lvalid", "16", "--no-progress", "--out",
            os.path.join(work, "h.csv")]


def hostile(name, damage, names_file):
    d = os.path.join(work, "hostile-" + name)
    cfg, tensors = mpt_checkpoint(3, 8, 2, 1, 50304, 16, 8, None)
    write_model(d, cfg, tensors, shards=2 if "shard" in name else 1, tokenizer=NEOX_TOKENIZER)
    damage(d)
    r = run(eval_command(d))
    err = r.stderr.strip()
    check(r.returncode != 0 and len(err.splitlines()) == 1 and names_file in err and "Traceback" not in err,
          f"hostile {name}: rc={r.returncode} {err!r}")


def patch_header(d, edit, file="model.safetensors"):
    path = os.path.join(d, file)
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    edit(header)
    text = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])


def first_tensor(h):
    return h[sorted(k for k in h if k != "__metadata__")[0]]


def overlap(h):
    names = sorted(h, key=lambda k: h[k]["data_offsets"][0])
    h[names[1]]["data_offsets"] = [h[names[0]]["data_offsets"][0] + 4,
                                   h[names[0]]["data_offsets"][0] + 4 + h[names[1]]["data_offsets"][1] -
                                   h[names[1]]["data_offsets"][0]]


def lying_length(d):
    path = os.path.join(d, "model.safetensors")
    data = bytearray(open(path, "rb").read())
    data[:8] = struct.pack("<Q", len(data) * 2)
    open(path, "wb").write(bytes(data))


def truncate(d):
    path = os.path.join(d, "model-00002-of-00002.safetensors")
    os.truncate(path, os.path.getsize(path) - 100)


def edit_config(key, value):
    def f(d):
        c = json.load(open(os.path.join(d, "config.json")))
        c[key] = value
        json.dump(c, open(os.path.join(d, "config.json"), "w"))
    return f


hostile("header-length", lying_length, "model.safetensors")
hostile("offsets-out-of-range",
        lambda d: patch_header(d, lambda h: first_tensor(h).update(data_offsets=[0, 10 ** 12])), "model.safetensors")
hostile("offsets-overlap", lambda d: patch_header(d, overlap), "model.safetensors")
hostile("dtype-bytes", lambda d: patch_header(d, lambda h: first_tensor(h).update(dtype="F64")), "model.safetensors")
hostile("shape-bytes", lambda d: patch_header(d, lambda h: first_tensor(h).update(shape=[3, 5])), "model.safetensors")
hostile("header-json", lambda d: open(os.path.join(d, "model.safetensors"), "r+b").write(b"\x10\0\0\0\0\0\0\0{{{{"),
        "model.safetensors")
hostile("truncated-shard", truncate, "model-00002-of-00002.safetensors")
hostile("config-layers", edit_config("n_layers", 2), "config.json")
hostile("config-width", edit_config("d_model", 16), "config.json")
hostile("config-untied-without-head", edit_config("tie_word_embeddings", False), "config.json")
hostile("config-rope", edit_config("attn_config", {"alibi": True, "rope": True}), "config.json")
hostile("config-block-overrides", edit_config("block_overrides", {"order": [], "overrides": {}}), "config.json")


# A config of width 1536 over a checkpoint of width 8: the error comes from the safetensors headers,
# before the model (1.9 GB in float32 at this width and vocabulary) is allocated. Its peak is measured
# against the same evaluation of the intact width-8 checkpoint, not against a fixed size: the
# process's own libraries differ by hundreds of MiB between builds (CUDA LibTorch's alone, ~500 MiB).
# The margin, 128 MiB, is below the wide model's token embedding alone (50304 x 1536 floats, 295 MiB).
def peak_kib(args):
    probe = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(r.returncode); "
             "sys.stderr.write(r.stderr)")
    r = run([sys.executable, "-c", probe, *args])
    kib, rc = r.stdout.split()[:2]
    return int(kib), int(rc), r.stderr.strip()


d_narrow, d_wide = os.path.join(work, "intact-narrow"), os.path.join(work, "hostile-wide")
cfg, tensors = mpt_checkpoint(3, 8, 2, 1, 50304, 16, 8, None)
write_model(d_narrow, cfg, tensors, tokenizer=NEOX_TOKENIZER)
write_model(d_wide, dict(cfg, d_model=1536, n_layers=12), tensors, tokenizer=NEOX_TOKENIZER)
narrow_kib, narrow_rc, narrow_err = peak_kib(eval_command(d_narrow))
check(narrow_rc == 0, f"the intact width-8 checkpoint evaluates: rc={narrow_rc}, {narrow_err!r}")
kib, rc, err = peak_kib(eval_command(d_wide))
check(rc != 0 and len(err.splitlines()) == 1 and "model.safetensors" in err and kib < narrow_kib + 128 * 1024,
      f"hostile config wider than its weights: rc={rc}, peak {kib / 1024:.0f} MiB (the intact checkpoint's "
      f"{narrow_kib / 1024:.0f} MiB + 128 MiB at most), {err!r}")
hostile("config-model-type", edit_config("model_type", "llama"), "config.json")
hostile("config-qk-ln", edit_config("attn_config", {"alibi": True, "qk_ln": True}), "config.json")
hostile("tokenizer-json", lambda d: open(os.path.join(d, "tokenizer.json"), "w").write('{"model": {"type": "BPE"'),
        "tokenizer.json")

shutil.rmtree(work)
finish()
