"""The float64 reference forward of the rotary (Llama-family) checkpoints, and tiny random ones to feed it
(rotary_check.py, rotary_cli_check.py).

The reference is written from Hugging Face transformers' main branch (5.x), not from xtrap:
  - src/transformers/models/{llama,mistral,qwen2,qwen3,phi3,gemma,gemma2,gemma3}/modeling_*.py and
    configuration_*.py: RMSNorm (statistics in float32, computed here in float64; Llama-style
    `w * x_hat`, Gemma's `x_hat * (1 + w)`), rotate_half pairing (i, i + d/2) on the first
    rotary_dim channels (Phi-3's partial_rotary_factor), repeat_kv (kv head j serves query heads
    j*g .. j*g+g-1), scale head_dim^-0.5 (Gemma 2/3: query_pre_attn_scalar^-0.5), attention
    soft-cap before the mask, softmax, gated MLP down(act(gate x) * up x) (SiLU; Gemma's
    gelu_pytorch_tanh), Phi-3's fused qkv_proj (q|k|v) and gate_up_proj (gate first), Qwen2's
    q/k/v biases, Qwen3's and Gemma 3's per-head q_norm / k_norm before the rotation, Gemma's
    embeddings times sqrt(hidden) as a model-dtype tensor, Gemma 2/3's four norms per block, the
    final soft-cap, lm_head or the tied embedding.
  - Sliding windows (masking_utils.sliding_window_overlay): key j is kept for query i iff
    i - W < j <= i. Mistral and Phi-3: every layer when sliding_window is set; Qwen2/Qwen3: only
    with use_sliding_window, on layers >= max_window_layers; Gemma 2: even layers; Gemma 3: all
    but every sliding_window_pattern-th, the sliding layers rotating with rope_local_base_freq
    and no scaling, the others with rope_theta and rope_scaling. layer_types, when saved, wins.
  - src/transformers/modeling_rope_utils.py: inverse frequencies and attention factor of default,
    linear, dynamic, yarn, longrope and llama3, with dynamic_rope_update for one forward of T tokens
    (dynamic: recomputed from T when T > max_position_embeddings, the original below; longrope: the
    long factors for the whole sequence when T > original_max_position_embeddings).
Where transformers versions differ, main is followed: yarn's original length is rope_scaling's
original_max_position_embeddings when given (before 4.51: max_position_embeddings), with
mscale / mscale_all_dim / attention_factor / truncate; rotary dims from head_dim when the config
has it (older versions used hidden_size / heads); the window keeps W keys (W + 1 before 4.42).
The cases avoid the remaining disagreements: yarn configs with original_max_position_embeddings
have factor = max_position_embeddings / original (main recomputes factor so); Gemma configs set
hidden_act and hidden_activation alike. transformers computes inverse frequencies and cos/sin in
float32; they are float64 here (at these lengths the difference is far below the 1e-5 bound).
"""
import math, os
import torch
import torch.nn.functional as F

from hf_checkpoint import rand, write_model

# ---- the families: what modeling_<family>.py builds, by model_type ----
GEMMAS = ("gemma", "gemma2", "gemma3_text")
ONE_PLUS_NORM = GEMMAS  # GemmaRMSNorm: x_hat * (1 + w)
FOUR_NORMS = ("gemma2", "gemma3_text")  # pre/post feed-forward norms beside the attention's two
QK_NORM = ("qwen3", "gemma3_text")  # q_norm / k_norm over head_dim, before the rotation
QKV_BIAS = ("qwen2",)  # Qwen2Attention: q/k/v_proj with bias, o_proj without
FUSED = ("phi3",)  # qkv_proj and gate_up_proj
SCALAR_SCALE = ("gemma2", "gemma3_text")  # scaling = query_pre_attn_scalar^-0.5
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM", "gemma": "GemmaForCausalLM",
                 "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM"}


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def config(family, C, H, KV, layers, max_pos, V=97, I=64, tied=False, dtype="float32", **extra):
    """config.json as save_pretrained writes it (transformers 4.5x): every attribute of the family's
    config class that differs from PretrainedConfig's defaults, plus `extra`."""
    c = {"architectures": [ARCHITECTURES[family]], "model_type": family, "vocab_size": V, "hidden_size": C,
         "intermediate_size": I, "num_hidden_layers": layers, "num_attention_heads": H, "num_key_value_heads": KV,
         "max_position_embeddings": max_pos, "initializer_range": 0.02, "rms_norm_eps": 1e-6, "use_cache": True,
         "tie_word_embeddings": tied, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
         "torch_dtype": dtype, "transformers_version": "4.51.3"}
    if family in GEMMAS:
        c.update(pad_token_id=0, eos_token_id=1, bos_token_id=2, head_dim=C // H, hidden_activation="gelu_pytorch_tanh",
                 attention_bias=False, rope_theta=10000.0)
        if family == "gemma":
            c["hidden_act"] = "gelu_pytorch_tanh"
        else:
            c.update(query_pre_attn_scalar=C // H, sliding_window=4096, final_logit_softcapping=None,
                     attn_logit_softcapping=None, cache_implementation="hybrid")
        if family == "gemma3_text":
            c.update(rope_theta=1000000.0, rope_local_base_freq=10000.0, sliding_window_pattern=6, rope_scaling=None)
    else:
        c.update(hidden_act="silu", rope_theta=10000.0)
        if family != "mistral":
            c["rope_scaling"] = None
        if family == "llama":
            c.update(pretraining_tp=1, attention_bias=False, mlp_bias=False, head_dim=C // H)
        if family == "mistral":
            c.update(sliding_window=None, head_dim=C // H)
        if family in ("qwen2", "qwen3"):
            c.update(use_sliding_window=False, sliding_window=max_pos, max_window_layers=layers)
        if family == "qwen3":
            c.update(head_dim=C // H, attention_bias=False)
        if family == "phi3":
            c.update(resid_pdrop=0.0, embd_pdrop=0.0, original_max_position_embeddings=max_pos, partial_rotary_factor=1.0,
                     sliding_window=None, pad_token_id=0)
    c.update(extra)
    return c


def checkpoint(seed, cfg):
    """Random weights under the real checkpoints' tensor names; norm weights near their identity."""
    g = torch.Generator().manual_seed(seed)
    family, C, V, I = cfg["model_type"], cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"]
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    unit = 0.0 if family in ONE_PLUS_NORM else 1.0

    def linear(o, i, scale=1.0):
        return rand(g, o, i, scale=scale / math.sqrt(i))

    # logits of order 1 (a tied embedding is the output matrix too; Gemma multiplies it by sqrt(C))
    tied = cfg["tie_word_embeddings"]
    t = {"model.embed_tokens.weight": rand(g, V, C, scale=1.0 / math.sqrt(C) if tied else 1.0)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        for n in ("input_layernorm", "post_attention_layernorm") + (
                ("pre_feedforward_layernorm", "post_feedforward_layernorm") if family in FOUR_NORMS else ()):
            t[p + n + ".weight"] = rand(g, C, scale=0.1, shift=unit)
        if family in FUSED:
            t[p + "self_attn.qkv_proj.weight"] = linear((H + 2 * KV) * D, C, 2.0)
        else:
            for n, o in (("q_proj", H * D), ("k_proj", KV * D), ("v_proj", KV * D)):
                t[p + f"self_attn.{n}.weight"] = linear(o, C, 2.0)
                if family in QKV_BIAS:
                    t[p + f"self_attn.{n}.bias"] = rand(g, o, scale=0.5)
        t[p + "self_attn.o_proj.weight"] = linear(C, H * D)
        if family in QK_NORM:
            t[p + "self_attn.q_norm.weight"] = rand(g, D, scale=0.1, shift=unit)
            t[p + "self_attn.k_norm.weight"] = rand(g, D, scale=0.1, shift=unit)
        if family in FUSED:
            t[p + "mlp.gate_up_proj.weight"] = linear(2 * I, C)
        else:
            t[p + "mlp.gate_proj.weight"] = linear(I, C)
            t[p + "mlp.up_proj.weight"] = linear(I, C)
        t[p + "mlp.down_proj.weight"] = linear(C, I)
    t["model.norm.weight"] = rand(g, C, scale=0.1, shift=unit)
    if not tied:
        t["lm_head.weight"] = linear(V, C)
    return t


# ---- the reference: rotary tables (modeling_rope_utils.py) ----
def rope_parameters(cfg, base, scaling, T):
    """(inv_freq (d/2,), attention_factor) for one forward of T tokens: ROPE_INIT_FUNCTIONS[rope_type]
    with dynamic_rope_update's choice for dynamic and longrope."""
    dim = int(head_dim(cfg) * cfg.get("partial_rotary_factor", 1.0))
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    inv = 1.0 / base ** exponents
    s = scaling or {}
    kind = s.get("rope_type", s.get("type", "default"))
    max_pos = cfg["max_position_embeddings"]
    if kind == "default":
        return inv, 1.0
    if kind == "linear":
        return inv / s["factor"], 1.0
    if kind == "dynamic":  # original frequencies until T exceeds max_position_embeddings
        if T <= max_pos:
            return inv, 1.0
        f = s["factor"]
        return 1.0 / (base * (f * T / max_pos - (f - 1)) ** (dim / (dim - 2))) ** exponents, 1.0
    if kind == "yarn":
        f = s["factor"]
        original = s.get("original_max_position_embeddings") or max_pos

        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        factor = s.get("attention_factor")
        if factor is None:
            m, m_all = s.get("mscale"), s.get("mscale_all_dim")
            factor = mscale(f, m) / mscale(f, m_all) if m and m_all else mscale(f)

        def correction_dim(rotations):
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(s.get("beta_fast") or 32), correction_dim(s.get("beta_slow") or 1)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extrapolation = 1 - ramp
        return inv / f * (1 - extrapolation) + inv * extrapolation, factor
    if kind == "longrope":
        original = cfg.get("original_max_position_embeddings")
        if original:
            f = max_pos / original
        else:
            original, f = max_pos, s["factor"]
        factor = s.get("attention_factor")
        if factor is None:
            factor = 1.0 if f <= 1 else math.sqrt(1 + math.log(f) / math.log(original))
        ext = torch.tensor(s["long_factor"] if T > original else s["short_factor"], dtype=torch.float64)
        return 1.0 / (ext * base ** exponents), factor
    if kind == "llama3":
        f, lo, hi, original = s["factor"], s["low_freq_factor"], s["high_freq_factor"], s["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        out = torch.where(wavelen > original / lo, inv / f, inv)
        smooth = (original / wavelen - lo) / (hi - lo)
        medium = ~(wavelen < original / hi) & ~(wavelen > original / lo)
        return torch.where(medium, (1 - smooth) * out / f + smooth * out, out), 1.0
    raise ValueError(f"rope type {kind}")


def cos_sin(cfg, base, scaling, T):  # (T, rotary_dim) each, times the attention factor
    inv, factor = rope_parameters(cfg, base, scaling, T)
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(x, cos, sin, rotate):  # Phi-3's form: the first rotary_dim channels rotate, the rest pass
    r = cos.shape[-1]
    return torch.cat((x[..., :r] * cos + rotate(x[..., :r]) * sin, x[..., r:]), dim=-1)


# ---- the reference: the decoder (modeling_<family>.py) ----
def rms_norm(x, w, eps, one_plus):
    x_hat = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x_hat * (1 + w) if one_plus else w * x_hat


def layer_window(cfg, l):
    """The sliding window of layer l, None for full attention."""
    family, W = cfg["model_type"], cfg.get("sliding_window")
    if cfg.get("layer_types"):
        return W if cfg["layer_types"][l] == "sliding_attention" else None
    if family in ("mistral", "phi3"):
        return W
    if family in ("qwen2", "qwen3"):
        return W if cfg["use_sliding_window"] and l >= cfg["max_window_layers"] else None
    if family == "gemma2":
        return W if l % 2 == 0 else None
    if family == "gemma3_text":
        return W if (l + 1) % cfg["sliding_window_pattern"] != 0 else None
    return None


def activation(cfg):
    gemma = cfg["model_type"] in GEMMAS  # Gemma 2/3 read hidden_activation
    name = (cfg.get("hidden_activation") or cfg["hidden_act"]) if gemma else cfg["hidden_act"]
    return {"silu": F.silu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}[name]


def attention(x, W, p, cfg, window, cos, sin, rotate, probs=None, extension=None):  # x (T, C) normed -> (T, C)
    """extension (context extension, docs/position-methods.md): a dict of (T, T) bools "seen" and "far", (T,)
    whole far positions "fq" and "fk" (far pairs turn q and k by them instead of i and j) and (T,) "scale"
    (logn), from the papers' formulas (rotary_cli_check.py)."""
    family, T = cfg["model_type"], x.shape[0]
    H, KV, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    if family in FUSED:
        q, k, v = F.linear(x, W[p + "self_attn.qkv_proj.weight"]).split([H * D, KV * D, KV * D], dim=-1)
    else:
        q, k, v = (F.linear(x, W[p + f"self_attn.{n}_proj.weight"], W.get(p + f"self_attn.{n}_proj.bias"))
                   for n in "qkv")
    q, k, v = q.view(T, H, D), k.view(T, KV, D), v.view(T, KV, D)
    if family in QK_NORM:
        one_plus = family in ONE_PLUS_NORM
        q = rms_norm(q, W[p + "self_attn.q_norm.weight"], cfg["rms_norm_eps"], one_plus)
        k = rms_norm(k, W[p + "self_attn.k_norm.weight"], cfg["rms_norm_eps"], one_plus)
    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (heads, T, D)
    if extension is not None:
        q = q * extension["scale"][None, :, None]
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if family in SCALAR_SCALE else D ** -0.5
    qr, kr = apply_rotary(q, cos, sin, rotate), apply_rotary(k, cos, sin, rotate)
    s = qr @ kr.repeat_interleave(H // KV, dim=0).transpose(1, 2) * scale  # (H, T, T)
    if extension is not None:
        fq, fk = extension["fq"], extension["fk"]
        qf, kf = apply_rotary(q, cos[fq], sin[fq], rotate), apply_rotary(k, cos[fk], sin[fk], rotate)
        s = torch.where(extension["far"], qf @ kf.repeat_interleave(H // KV, dim=0).transpose(1, 2) * scale, s)
    v = v.repeat_interleave(H // KV, dim=0)  # repeat_kv
    cap = cfg.get("attn_logit_softcapping")
    if cap:
        s = torch.tanh(s / cap) * cap
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    keep = (j <= i) & ((j > i - window) if window else True)
    if extension is not None:
        keep = keep & extension["seen"]
    s = s.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(s, dim=-1)  # (H, T, T): per query head
    if probs is not None:
        probs.append(weights)
    out = weights @ v  # (H, T, D)
    return F.linear(out.transpose(0, 1).reshape(T, H * D), W[p + "self_attn.o_proj.weight"])


def mlp(x, W, p, cfg):
    act = activation(cfg)
    if cfg["model_type"] in FUSED:
        gate, up = F.linear(x, W[p + "mlp.gate_up_proj.weight"]).chunk(2, dim=-1)
    else:
        gate, up = F.linear(x, W[p + "mlp.gate_proj.weight"]), F.linear(x, W[p + "mlp.up_proj.weight"])
    return F.linear(act(gate) * up, W[p + "mlp.down_proj.weight"])


def reference_logits(tensors, cfg, ids, model_dtype=torch.float32, rotate=rotate_half, rope=cos_sin, probs=None,
                     extension=None):
    """ids (T,) -> logits (T, V). rope(cfg, base, scaling, T) gives the full-attention layers' cos and sin
    (an interpolation on top of the checkpoint's: rotary_cli_check.py); probs, a list, receives every
    layer's attention probabilities (H, T, T); extension(T), a context extension of every layer (attention())."""
    W = {n: v.double() for n, v in tensors.items()}
    family, T, C, eps = cfg["model_type"], len(ids), cfg["hidden_size"], cfg["rms_norm_eps"]
    one_plus = family in ONE_PLUS_NORM
    x = F.embedding(ids, W["model.embed_tokens.weight"])  # (T, C)
    if family in GEMMAS:  # the normalizer is a tensor of the model's dtype
        x = x * torch.tensor(C ** 0.5, dtype=model_dtype).double()
    if "rope_parameters" in cfg:  # as transformers 5 saves it: rope_theta and the scaling in one dict
        tables = {False: rope(cfg, cfg["rope_parameters"]["rope_theta"], cfg["rope_parameters"], T)}
    else:
        tables = {False: rope(cfg, cfg["rope_theta"], cfg.get("rope_scaling"), T)}
    if family == "gemma3_text":  # sliding layers: the local base, no scaling
        tables[True] = cos_sin(cfg, cfg["rope_local_base_freq"], None, T)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        window = layer_window(cfg, l)
        cos, sin = tables[family == "gemma3_text" and window is not None]
        a = attention(rms_norm(x, W[p + "input_layernorm.weight"], eps, one_plus), W, p, cfg, window, cos, sin, rotate,
                      probs, extension(T) if extension else None)
        if family in FOUR_NORMS:
            x = x + rms_norm(a, W[p + "post_attention_layernorm.weight"], eps, one_plus)
            m = mlp(rms_norm(x, W[p + "pre_feedforward_layernorm.weight"], eps, one_plus), W, p, cfg)
            x = x + rms_norm(m, W[p + "post_feedforward_layernorm.weight"], eps, one_plus)
        else:
            x = x + a
            x = x + mlp(rms_norm(x, W[p + "post_attention_layernorm.weight"], eps, one_plus), W, p, cfg)
    x = rms_norm(x, W["model.norm.weight"], eps, one_plus)
    logits = F.linear(x, W["model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"])
    cap = cfg.get("final_logit_softcapping")
    return torch.tanh(logits / cap) * cap if cap else logits


def nll(logits, ids):  # (T - 1,): -log p(ids[t + 1] | ids[:t + 1])
    return -torch.log_softmax(logits[:-1].double(), dim=-1).gather(1, ids[1:, None])[:, 0]


# ---- hostile files: each must fail with one line naming the key or tensor ----
def hostile_models(work, V=97, tokenizer=None):
    """(name, directory, needles): models under work that xtrap must refuse with one line holding one
    of the needles; the config's directory holds the weights of weights_of (default the config) less
    the tensor drop, and `tokenizer` when given."""
    llama = dict(family="llama", C=32, H=4, KV=2, layers=1, max_pos=16, V=V)
    qwen3 = config("qwen3", 32, 4, 2, 1, 16, V=V, head_dim=16)
    cases = [  # name, config, needles, drop, weights_of
        ("rope-unknown-type", config(**llama, rope_scaling={"rope_type": "ntk-by-parts", "factor": 2.0}),
         ("ntk-by-parts", "rope_scaling"), None, None),
        ("rope-factor-below-1", config(**llama, rope_scaling={"rope_type": "linear", "factor": 0.5}), ("factor",),
         None, None),
        ("rope-missing-factor", config(**llama, rope_scaling={"rope_type": "dynamic"}), ("factor",), None, None),
        ("longrope-short-list", config("phi3", 32, 4, 4, 1, 64, V=V, original_max_position_embeddings=16, rope_scaling={
            "type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 3}), ("long_factor",), None, None),
        ("kv-heads-not-dividing", config(**dict(llama, KV=3)), ("num_key_value_heads",), None, None),
        ("head-dim-vs-weights", dict(qwen3, head_dim=8), ("head_dim", "self_attn"), None, qwen3),
        ("missing-q-norm", qwen3, ("q_norm",), "model.layers.0.self_attn.q_norm.weight", None),
        ("missing-lm-head", config(**llama), ("lm_head",), "lm_head.weight", None),
        ("llama-attn-softcap", config(**llama, attn_logit_softcapping=30.0), ("attn_logit_softcapping",), None, None),
    ]
    for name, cfg, needles, drop, weights_of in cases:
        tensors = checkpoint(30, weights_of or cfg)
        if drop:
            del tensors[drop]
        d = os.path.join(work, "hostile-" + name)
        write_model(d, cfg, tensors, tokenizer=tokenizer)
        yield name, d, needles
