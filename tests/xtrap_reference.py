"""Reference PyTorch model for `xtrap export` output, written from the formulas (no xtrap code).

    import sys; sys.path.insert(0, "tests")
    from xtrap_reference import load
    model, vocab = load("exported")          # the OUT directory of `xtrap export RUN OUT`
    ids = torch.tensor([[vocab.index(w) for w in "the cat sat".split()]])
    scores = model(ids)                      # (B, T, V) logits; log-probabilities for adaptive softmax
"""
import json, math, struct
import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool}


def load_safetensors(path):  # 8-byte LE header length, JSON header, raw little-endian data
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = bytearray(data[8 + n:])
    return {name: torch.frombuffer(body[t["data_offsets"][0]:t["data_offsets"][1]], dtype=DTYPES[t["dtype"]])
            .reshape(t["shape"]).clone() for name, t in header.items()}


def linear_bias(p, T):
    """ALiBi family, (H, T, T) for query i, key j: j < i: -m_past (i - j); j > i: -m_future (j - i - shift);
    -inf in blocked directions; pairs with i == 0 or j == 0 get first_token_bias[h] instead (BiALiBi)."""
    d = (torch.arange(T).view(1, T) - torch.arange(T).view(T, 1)).float()  # j - i
    past, future = torch.tensor(p["slope_past"]).float(), torch.tensor(p["slope_future"]).float()
    b = -(past.view(-1, 1, 1) * (-d).clamp(min=0) + future.view(-1, 1, 1) * (d - p["future_shift"]).clamp(min=0))
    blocked = (torch.tensor(p["block_past"]).view(-1, 1, 1) & (d < 0)) | (torch.tensor(p["block_future"]).view(-1, 1, 1) & (d > 0))
    b = b.masked_fill(blocked, float("-inf"))
    if p["first_token_bias"] is not None:
        touches_first = ((torch.arange(T).view(T, 1) == 0) | (torch.arange(T).view(1, T) == 0)).float()
        b = torch.where(touches_first.bool(), torch.tensor(p["first_token_bias"]).float().view(-1, 1, 1).expand_as(b), b)
    return b


def kerple_log_bias(p, T):
    """KERPLE's logarithmic kernel, (H, T, T): -r1[h] log(1 + r2[h] |i - j|)."""
    distance = (torch.arange(T).view(1, T) - torch.arange(T).view(T, 1)).abs().float()
    r1, r2 = torch.tensor(p["r1"]).float().view(-1, 1, 1), torch.tensor(p["r2"]).float().view(-1, 1, 1)
    return -r1 * torch.log(1 + r2 * distance)


def fire_bias(p, w, T):
    """FIRE, (H, T, T): MLP(psi(|i - j|) / psi(max(threshold, i))), psi(x) = log(|c| x + 1), the MLP 1 -> W -> H."""
    i, j = torch.arange(T).float().view(T, 1), torch.arange(T).float().view(1, T)
    psi = lambda x: torch.log(abs(p["c"]) * x + 1)
    u = psi((i - j).abs()) / (psi(i.clamp(min=p["threshold"])) + p["epsilon"])
    hidden = torch.relu(F.linear(u.unsqueeze(-1), w["fire_bias.mlp_hidden.weight"], w["fire_bias.mlp_hidden.bias"]))
    return F.linear(hidden, w["fire_bias.mlp_out.weight"], w["fire_bias.mlp_out.bias"]).permute(2, 0, 1)


def t5_bucket(rel, bidirectional, buckets, max_distance):  # Raffel et al.'s relative-position buckets
    offset, n = (buckets // 2 if rel > 0 else 0, abs(rel)) if bidirectional else (0, max(-rel, 0))
    buckets = buckets // 2 if bidirectional else buckets
    exact = buckets // 2
    if n < exact:
        return offset + n
    return offset + min(exact + int(math.log(n / exact) / math.log(max_distance / exact) * (buckets - exact)), buckets - 1)


class XtrapModel(torch.nn.Module):
    def __init__(self, config, weights):
        super().__init__()
        self.c, self.p, self.w = config["model"], config["position"], weights
        self.a = config["architecture"]  # what the computation is: read, not assumed
        self.act = {"gelu": F.gelu, "relu": F.relu}[self.a["activation"]]  # F.gelu: the exact (erf) form
        if "adaptive_softmax" in self.a:
            s = self.a["adaptive_softmax"]
            assert not s["tail_biases"], "tails with biases: not in torch.nn.AdaptiveLogSoftmaxWithLoss"
            self.adaptive = torch.nn.AdaptiveLogSoftmaxWithLoss(self.c["d_model"], self.c["vocab_size"], s["cutoffs"],
                                                                div_value=s["div_value"], head_bias=s["head_bias"])
            self.adaptive.load_state_dict({k[len("head.adaptive."):]: v for k, v in weights.items() if k.startswith("head.adaptive.")})

    def lin(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w.get(name + ".bias"))

    def ln(self, x, name):
        return F.layer_norm(x, x.shape[-1:], self.w[name + ".weight"], self.w[name + ".bias"], self.a["layer_norm_eps"])

    def bias(self, T):  # (H or 1, T, T) additive attention bias, causal mask included
        pos, b = self.c["pos"], torch.zeros(1, T, T)
        if pos.startswith("alibi") or pos == "bialibi":
            b = linear_bias(self.p, T)
        elif pos == "t5":
            rel = [[t5_bucket(j - i, self.c["arch"] == "encoder", self.c["t5_buckets"], self.c["t5_max_distance"])
                    for j in range(T)] for i in range(T)]
            b = self.w["t5_bias.buckets.weight"][torch.tensor(rel)].permute(2, 0, 1)
        elif pos == "kerple-log":
            b = kerple_log_bias(self.p, T)
        elif pos == "fire":
            b = fire_bias(self.p, self.w, T)
        if self.c["arch"] == "decoder":
            b = b + torch.full((T, T), float("-inf")).triu(1)
        return b

    def rotate(self, x):  # rotary, rotate-half convention; x: (B, H, T, D)
        T, D = x.shape[2], x.shape[3]
        inv = self.c["rotary_base"] ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        angles = torch.arange(T, dtype=torch.float64).view(T, 1) * inv
        angles = torch.cat([angles, angles], 1).float()
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return x * angles.cos() + torch.cat([-x2, x1], -1) * angles.sin()

    def attention(self, x, name, bias):
        B, T, C = x.shape
        H = self.c["heads"]
        parts = self.lin(x, name + ".qkv").view(B, T, 3, H, C // H).permute(2, 0, 3, 1, 4)
        order = self.a["qkv_packing"].split(",")  # which third of the rows is q, k, v
        q, k, v = (parts[order.index(n)] for n in ("q", "k", "v"))
        if self.c["pos"] == "rotary":
            q, k = self.rotate(q), self.rotate(k)
        att = torch.softmax((q * self.a["query_scale"]) @ k.transpose(-2, -1) + bias, -1)
        return self.lin((att @ v).transpose(1, 2).reshape(B, T, C), name + ".out")

    def forward(self, tokens):  # (B, T) -> (B, T, V)
        T, C = tokens.shape[1], self.c["d_model"]
        if "adaptive_input" in self.a:  # per band: rows of a (possibly shared) tensor, then a projection to C
            x = torch.zeros(*tokens.shape, C)
            for band in self.a["adaptive_input"]["bands"]:
                inside = (tokens >= band["start"]) & (tokens < band["end"])
                rows = self.w[band["embedding"]][tokens[inside] - band["start"] + band["embedding_rows_from"]]
                P = self.w[band["projection"]]
                x[inside] = rows @ (P.t() if band["projection_transposed"] else P)
            x = x * self.a["embedding_scale"]
        else:
            E = self.w["token_embedding.weight"]
            En = F.normalize(E, dim=1) if self.c["head"] == "clap" else E  # CLAP embeds with its normalised vectors
            x = En[tokens] * self.a["embedding_scale"]
        if self.c["pos"] == "learned":
            x = x + self.w["position_embedding.weight"][:T]
        elif self.c["pos"] == "sinusoidal":
            angles = torch.arange(T, dtype=torch.float64).view(T, 1) * 10000.0 ** (-torch.arange(0, C, 2, dtype=torch.float64) / C)
            x = x + torch.stack([angles.sin(), angles.cos()], -1).view(T, C).float()  # sin at even, cos at odd dims
        bias = self.bias(T)
        for l in range(self.c["layers"]):
            x = x + self.attention(self.ln(x, f"blocks.{l}.ln1"), f"blocks.{l}.attn", bias)
            x = x + self.lin(self.act(self.lin(self.ln(x, f"blocks.{l}.ln2"), f"blocks.{l}.fc1")), f"blocks.{l}.fc2")
        if self.a["final_norm"]:
            x = self.ln(x, "ln_final")
        if hasattr(self, "adaptive"):
            return self.adaptive.log_prob(x.reshape(-1, C)).view(*x.shape[:2], -1)
        if self.c["head"] == "roberta":
            return self.ln(F.gelu(self.lin(x, "head.dense")), "head.norm") @ E.t() + self.w["head.bias"]
        if self.c["head"] == "clap":
            return self.w["head.beta"] * x @ En.t()
        return x @ E.t()


def load(directory):
    config = json.load(open(f"{directory}/config.json"))
    vocab = open(f"{directory}/{config['vocab_file']}", encoding="utf-8").read().split("\n")[:-1]
    return XtrapModel(config, load_safetensors(f"{directory}/model.safetensors")).eval(), vocab
