"""The float64 forward of the two model types `xtrap export --hf` writes, from their reference code,
not from xtrap, over an exported directory's safetensors and config.json; the NLL of the first N
tokens of a text as `xtrap eval DIR --max-tokens N` scores it (tests/export_hf.sh).
  - gpt_neox (transformers' modeling_gpt_neox.py, use_parallel_residual false): x = x + attn(ln1(x));
    x = x + mlp(ln2(x)); query_key_value's output viewed (T, H, 3 * D) and split q | k | v per head;
    rotate_half on the first int(D * rotary_pct) channels, inverse frequencies
    rope_theta^(-2i/d) (divided by factor for rope_scaling linear); scores q.k / sqrt(D), causal
    softmax, dense; dense_4h_to_h(gelu(dense_h_to_4h)); final_layer_norm; embed_out.
  - mpt (llm-foundry's modeling_mpt.py / attention.py): Wqkv's output split q | k | v, each (H, D);
    ALiBi gen_slopes(H, alibi_bias_max) added as slope * (j - (T - 1)) per key (build_alibi_bias,
    causal), softmax scale 1 / sqrt(D); out_proj; down_proj(act(up_proj)); norm_f; lm_head.
Usage: export_hf_reference.py DIR IDS_CACHE_PREFIX N LVALID XTRAP_NLL"""
import json, math, struct, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from hf_checkpoint import cached_ids, stream_nll

DTYPES = {"F32": torch.float32, "F64": torch.float64}


def read_safetensors(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        t = torch.frombuffer(bytearray(blob[8 + n + a:8 + n + b]), dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).double()
    return out


def ln(x, W, name, eps):
    return F.layer_norm(x, x.shape[-1:], W[name + ".weight"], W[name + ".bias"], eps)


def linear(x, W, name):
    return x @ W[name + ".weight"].T + W[name + ".bias"]


def act(name):
    return {"gelu": lambda x: F.gelu(x), "relu": F.relu,
            "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}[name]


def causal_softmax(scores):  # (H, T, T)
    T = scores.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1)


def gpt_neox_logits(W, cfg, ids):
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    D, T = C // H, len(ids)
    d = int(D * cfg["rotary_pct"])
    inv = cfg["rotary_emb_base"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    scaling = cfg.get("rope_scaling")
    if scaling:
        assert scaling["rope_type"] == "linear", scaling  # the reference covers default and linear
        inv = inv / scaling["factor"]
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)  # (T, d)

    def rotate(x):  # (H, T, D)
        r, rest = x[..., :d], x[..., d:]
        half = torch.cat([-r[..., d // 2:], r[..., :d // 2]], -1)
        return torch.cat([r * cos + half * sin, rest], -1)

    p = "gpt_neox."
    x = W[p + "embed_in.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        b = f"{p}layers.{l}."
        h = ln(x, W, b + "input_layernorm", cfg["layer_norm_eps"])
        qkv = linear(h, W, b + "attention.query_key_value").view(T, H, 3 * D).transpose(0, 1)  # (H, T, 3D)
        q, k, v = rotate(qkv[..., :D]), rotate(qkv[..., D:2 * D]), qkv[..., 2 * D:]
        y = causal_softmax(q @ k.transpose(1, 2) / math.sqrt(D)) @ v
        x = x + linear(y.transpose(0, 1).reshape(T, C), W, b + "attention.dense")
        h = ln(x, W, b + "post_attention_layernorm", cfg["layer_norm_eps"])
        x = x + linear(act(cfg["hidden_act"])(linear(h, W, b + "mlp.dense_h_to_4h")), W, b + "mlp.dense_4h_to_h")
    return ln(x, W, p + "final_layer_norm", cfg["layer_norm_eps"]) @ W["embed_out.weight"].T


def mpt_slopes(H, alibi_bias_max):  # llm-foundry gen_slopes
    n = 2 ** math.ceil(math.log2(H))
    m = torch.arange(1, n + 1, dtype=torch.float64) * (alibi_bias_max / n)
    slopes = 1.0 / torch.pow(2, m)
    if n != H:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:H]
    return slopes


def mpt_logits(W, cfg, ids):
    C, H, T = cfg["d_model"], cfg["n_heads"], len(ids)
    D = C // H
    a = cfg["attn_config"]
    fn = cfg["ffn_config"]["ffn_act_fn"]
    f = {"gelu": lambda x: F.gelu(x, approximate=fn.get("approximate", "none")), "relu": F.relu}[fn["name"]]
    alibi = mpt_slopes(H, a["alibi_bias_max"])[:, None, None] * (torch.arange(T, dtype=torch.float64) - (T - 1))
    p, eps = "transformer.", cfg["norm_eps"]
    x = W[p + "wte.weight"][ids]
    for l in range(cfg["n_layers"]):
        b = f"{p}blocks.{l}."
        qkv = linear(ln(x, W, b + "norm_1", eps), W, b + "attn.Wqkv")
        q, k, v = (t.view(T, H, D).transpose(0, 1) for t in qkv.split(C, -1))
        y = causal_softmax(q @ k.transpose(1, 2) / math.sqrt(D) + alibi) @ v
        x = x + linear(y.transpose(0, 1).reshape(T, C), W, b + "attn.out_proj")
        x = x + linear(f(linear(ln(x, W, b + "norm_2", eps), W, b + "ffn.up_proj")), W, b + "ffn.down_proj")
    return ln(x, W, p + "norm_f", eps) @ W["lm_head.weight"].T


def main():
    folder, prefix, N, Lvalid, xtrap_nll = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    cfg = json.load(open(folder + "/config.json"))
    W = read_safetensors(folder + "/model.safetensors")
    forward = {"gpt_neox": gpt_neox_logits, "mpt": mpt_logits}[cfg["model_type"]]
    ids = cached_ids(prefix)[:N]
    nll = stream_nll(lambda window: forward(W, cfg, window), ids, cfg["bos_token_id"], Lvalid, Lvalid) / N
    ok = abs(nll - xtrap_nll) <= 1e-5
    print(f"{'ok' if ok else 'FAIL'}: {cfg['model_type']} reference nll {nll:.9f}, xtrap {xtrap_nll:.9f} ({folder})")
    sys.exit(0 if ok else 1)


main()
