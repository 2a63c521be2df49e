"""Pretrained BERT-layout encoders written by hand: tiny random checkpoints with the real
checkpoints' config keys and tensor names, and a float64 masked-LM forward of each, written from
the authors' modeling code, not from xtrap:
  - mosaicbert: mosaicml/examples examples/benchmarks/bert/src/bert_layers.py -- BertEmbeddings
    (word + token type 0, LayerNorm), BertUnpadSelfAttention (Wqkv rearranged 'b s (t h d)', t = 3;
    q k^T / sqrt(d) + the ALiBi bias), BertSelfOutput (LayerNorm(dense(h) + input)),
    BertGatedLinearUnitMLP (gated_layers without bias, GELU(approximate='none') of the first half
    times the second, wo, LayerNorm(wo + input)), BertEncoder.rebuild_alibi_tensor
    (_get_alibi_head_slopes, -m |i - j|, rebuilt when the input is longer than
    alibi_starting_size), BertPredictionHeadTransform (dense, ACT2FN['gelu'], LayerNorm eps 1e-12),
    BertLMPredictionHead (decoder tied to the word embeddings, its own bias).
  - jinabert: jinaai/jina-bert-implementation modeling_bert.py -- query / key / value, JinaBertGLUMLP
    (nn.GELU() for geglu, nn.ReLU() for reglu), JinaBertEncoder's ALiBi rebuilt for every length,
    the head transform's LayerNorm with layer_norm_eps.
  - bert / roberta: transformers' modeling_bert.py / modeling_roberta.py -- learned absolute
    positions (RoBERTa's create_position_ids_from_input_ids: padding_idx + 1 onward),
    BertIntermediate / BertOutput, BertLMPredictionHead / RobertaLMHead.
"""
import math
import torch
import torch.nn.functional as F

from hf_checkpoint import rand


def alibi_head_slopes(n):
    """_get_alibi_head_slopes of bert_layers.py (and of JinaBertEncoder): Press's geometric slopes
    for a power of two, else those of the closest lower power followed by every other slope of twice
    that power."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_head_slopes(2 * closest)[0::2][:n - closest]


def layer_norm(x, t, name, eps):
    return F.layer_norm(x, x.shape[-1:], t[name + ".weight"], t[name + ".bias"], eps)


def linear(x, t, name, bias=True):
    return x @ t[name + ".weight"].T + (t[name + ".bias"] if bias else 0)


def config(family, C, H, layers, V, F_, **extra):
    """config.json of a tiny encoder of `family` as the Hub's configs spell it."""
    c = {"vocab_size": V, "hidden_size": C, "num_hidden_layers": layers, "num_attention_heads": H,
         "intermediate_size": F_, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
         "attention_probs_dropout_prob": 0.0, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0,
         "initializer_range": 0.02, "model_type": "bert"}
    if family == "mosaicbert":
        c.update({"architectures": ["BertForMaskedLM"], "alibi_starting_size": 16, "max_position_embeddings": 512,
                  "position_embedding_type": "absolute"})
    elif family == "jinabert":
        c.update({"architectures": ["JinaBertForMaskedLM"], "position_embedding_type": "alibi",
                  "feed_forward_type": "geglu", "max_position_embeddings": 8192, "emb_pooler": "mean",
                  "attn_implementation": "torch"})
    elif family == "bert":
        c.update({"architectures": ["BertForMaskedLM"], "position_embedding_type": "absolute",
                  "max_position_embeddings": 64})
    else:
        c.update({"architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "type_vocab_size": 1,
                  "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                  "max_position_embeddings": 66, "position_embedding_type": "absolute"})
    c.update(extra)
    return c


def checkpoint(seed, family, cfg, head=True, prefix=True):
    """Random tensors named as the family's checkpoints name them (MosaicBERT's and JinaBERT's under
    bert., RoBERTa's under roberta.), float32; LayerNorm weights near 1."""
    g = torch.Generator().manual_seed(seed)
    C, V, F_, L = cfg["hidden_size"], cfg["vocab_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    base = ("roberta." if family == "roberta" else "bert.") if prefix else ""
    t = {}

    def ln(name, width=C):
        t[name + ".weight"] = rand(g, width, scale=0.1, shift=1.0)
        t[name + ".bias"] = rand(g, width, scale=0.1)

    def lin(name, out, inp, bias=True):
        t[name + ".weight"] = rand(g, out, inp, scale=1.0 / math.sqrt(inp))
        if bias:
            t[name + ".bias"] = rand(g, out, scale=0.1)

    # Embedding rows of norm about 1.7 keep logits near 5 (as trained models have them): float32
    # rounding of logits near 25 alone is 1e-5.
    t[base + "embeddings.word_embeddings.weight"] = rand(g, V, C, scale=0.25)
    t[base + "embeddings.token_type_embeddings.weight"] = rand(g, cfg["type_vocab_size"], C, scale=0.5)
    if family in ("bert", "roberta"):
        t[base + "embeddings.position_embeddings.weight"] = rand(g, cfg["max_position_embeddings"], C, scale=0.5)
    ln(base + "embeddings.LayerNorm")
    for l in range(L):
        e = f"{base}encoder.layer.{l}."
        if family == "mosaicbert":
            lin(e + "attention.self.Wqkv", 3 * C, C)
        else:
            for n in ("query", "key", "value"):
                lin(e + f"attention.self.{n}", C, C)
        lin(e + "attention.output.dense", C, C)
        ln(e + "attention.output.LayerNorm")
        if family in ("mosaicbert", "jinabert"):
            lin(e + "mlp.gated_layers", 2 * F_, C, bias=False)
            lin(e + "mlp.wo", C, F_)
            ln(e + "mlp.layernorm")
        else:
            lin(e + "intermediate.dense", F_, C)
            lin(e + "output.dense", C, F_)
            ln(e + "output.LayerNorm")
    if family != "roberta":
        lin(base + "pooler.dense", C, C)  # BertPooler: not read by the masked-LM head
    if head:
        h = "lm_head." if family == "roberta" else "cls.predictions."
        if family == "roberta":
            lin(h + "dense", C, C)
            ln(h + "layer_norm")
            t[h + "bias"] = rand(g, V, scale=0.5)
        else:
            lin(h + "transform.dense", C, C)
            ln(h + "transform.LayerNorm")
            # MosaicBERT's decoder is an nn.Linear with its own bias; transformers' BERT saves
            # the tied cls.predictions.bias.
            t[h + ("decoder.bias" if family == "mosaicbert" else "bias")] = rand(g, V, scale=0.5)
    return t


def strip_prefix(name):
    for p in ("bert.", "roberta."):
        if name.startswith(p):
            return name[len(p):]
    return name


def logits(t, family, cfg, ids, dtype=torch.float64, slope_divisor=1.0, probs=None):
    """The masked-LM logits (T, V) of one sequence ids (T,), in float64 (or `dtype`), as the family's
    code computes them; None for a checkpoint without its head. slope_divisor: linear interpolation's
    a (every slope m / a); probs: a list each layer's attention probabilities (H, T, T) are appended to."""
    t = {strip_prefix(k): v.to(dtype) for k, v in t.items()}
    C, H, V, F_ = cfg["hidden_size"], cfg["num_attention_heads"], cfg["vocab_size"], cfg["intermediate_size"]
    D, T, eps = C // H, len(ids), cfg["layer_norm_eps"]
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.token_type_embeddings.weight"][0]
    if family == "bert":
        x = x + t["embeddings.position_embeddings.weight"][torch.arange(T)]
    if family == "roberta":
        x = x + t["embeddings.position_embeddings.weight"][torch.arange(T) + cfg["pad_token_id"] + 1]
    x = layer_norm(x, t, "embeddings.LayerNorm", eps)
    if family in ("mosaicbert", "jinabert"):
        i = torch.arange(T)
        slopes = torch.tensor(alibi_head_slopes(H), dtype=dtype) / slope_divisor
        bias = slopes[:, None, None] * -(i[None, :] - i[:, None]).abs().to(dtype)  # (H, T, T)
    else:
        bias = torch.zeros(H, T, T, dtype=dtype)
    for l in range(cfg["num_hidden_layers"]):
        e = f"encoder.layer.{l}."
        if family == "mosaicbert":
            q, k, v = linear(x, t, e + "attention.self.Wqkv").view(T, 3, H, D).unbind(1)
        else:
            q, k, v = (linear(x, t, e + f"attention.self.{n}").view(T, H, D) for n in ("query", "key", "value"))
        p = (torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D) + bias).softmax(-1)
        if probs is not None:
            probs.append(p)
        ctx = torch.einsum("hqk,khd->qhd", p, v).reshape(T, C)
        a = layer_norm(linear(ctx, t, e + "attention.output.dense") + x, t, e + "attention.output.LayerNorm", eps)
        if family in ("mosaicbert", "jinabert"):
            h = linear(a, t, e + "mlp.gated_layers", bias=False)
            act = F.relu if cfg.get("feed_forward_type") == "reglu" else F.gelu
            x = layer_norm(linear(act(h[:, :F_]) * h[:, F_:], t, e + "mlp.wo") + a, t, e + "mlp.layernorm", eps)
        else:
            h = F.gelu(linear(a, t, e + "intermediate.dense"))
            x = layer_norm(linear(h, t, e + "output.dense") + a, t, e + "output.LayerNorm", eps)
    if "lm_head.dense.weight" not in t and "cls.predictions.transform.dense.weight" not in t:
        return None
    if family == "roberta":
        y = layer_norm(F.gelu(linear(x, t, "lm_head.dense")), t, "lm_head.layer_norm", eps)
        return y @ t["embeddings.word_embeddings.weight"].T + t["lm_head.bias"]
    head_eps = 1e-12 if family == "mosaicbert" else eps
    y = layer_norm(F.gelu(linear(x, t, "cls.predictions.transform.dense")), t, "cls.predictions.transform.LayerNorm",
                   head_eps)
    bias = t.get("cls.predictions.bias", t.get("cls.predictions.decoder.bias"))
    return y @ t["embeddings.word_embeddings.weight"].T + bias
