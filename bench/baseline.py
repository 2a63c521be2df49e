"""PyTorch eager baseline of xtrap's transformer, for throughput comparison (issue 7).

Same architecture as src/model/transformer.cpp: pre-LN blocks, qkv Linear(d, 3d), out Linear,
GELU FFN, final LayerNorm, token embedding scaled by sqrt(d), ALiBi bias added to the logits of
scaled queries, attention-probability / residual / FFN / embedding dropout, tied full softmax or
adaptive softmax (div_value 4), AdamW over two groups (decay on matrices only), gradient clipping.
Token ids come from xtrap's corpus cache (data/<dir>/.xtrap-cache.bin), so the vocabulary and the
adaptive-softmax clusters match. Prints one JSON line with tokens/s.

Run with Debian's interpreter (/usr/bin/python3) to use the same LibTorch 1.13 kernels as xtrap.
"""
import argparse
import json
import math
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def load_corpus(data_dir):
    """Vocabulary size and (train, valid) token ids from xtrap's cache file."""
    with open(f"{data_dir}/.xtrap-cache.bin", "rb") as f:
        buf = f.read()
    assert buf[:8] == b"XTRAPTOK", "not an xtrap corpus cache; run xtrap once on this data first"
    pos = 8 + 4 + 6 * 8  # magic, version, (size, mtime) of the three split files
    (n_words,) = struct.unpack_from("<Q", buf, pos)
    pos += 8
    for _ in range(n_words):
        (n,) = struct.unpack_from("<I", buf, pos)
        pos += 4 + n
    splits = []
    for _ in range(3):
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8
        splits.append(torch.frombuffer(bytearray(buf[pos : pos + 4 * n]), dtype=torch.int32).long())
        pos += 4 * n
    return n_words, splits[0], splits[1]


def alibi_slopes(n_heads):
    """Press et al.'s geometric slopes, as in xtrap's linear_bias_spec.cpp."""
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(closest) + power_of_2(2 * closest)[0::2][: n_heads - closest]


def attention_bias(pos, n_heads, T, causal):
    """(H|1, T, T) additive bias: ALiBi distances times slopes, plus the causal mask."""
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    bias = torch.zeros(1, T, T)
    if pos == "alibi":
        slopes = torch.tensor(alibi_slopes(n_heads)).view(-1, 1, 1)
        bias = -slopes * (i - j).abs().float()
    if causal:
        bias = bias.masked_fill(j > i, float("-inf"))
    return bias


def sinusoidal_table(T, d):
    pos = torch.arange(T, dtype=torch.float64).unsqueeze(1)
    freq = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)
    table = torch.zeros(T, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return table.float()


class Attention(nn.Module):
    def __init__(self, d, n_heads, dropout):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, bias):
        B, T, C = x.shape
        H, D = self.n_heads, C // self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
        q = q * (1.0 / math.sqrt(D))
        att = q @ k.transpose(-2, -1)
        att = att + bias
        att = F.dropout(att.softmax(-1), self.dropout, self.training)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, d, n_heads, ffn, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, n_heads, dropout)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, bias):
        x = x + self.drop(self.attn(self.ln1(x), bias))
        x = x + self.drop(self.fc2(self.drop(F.gelu(self.fc1(self.ln2(x))))))
        return x


class Transformer(nn.Module):
    def __init__(self, a, vocab):
        super().__init__()
        self.a, self.causal = a, a.arch == "decoder"
        self.embedding = nn.Embedding(vocab, a.d_model)
        nn.init.normal_(self.embedding.weight, 0.0, 1.0 / math.sqrt(a.d_model))
        if a.pos == "learned":
            self.positions = nn.Embedding(a.L, a.d_model)
        self.drop = nn.Dropout(a.dropout)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads, a.ffn, a.dropout) for _ in range(a.layers))
        self.ln_final = nn.LayerNorm(a.d_model)
        self.adaptive = None
        if a.adaptive_softmax:
            cutoffs = [int(c) for c in a.adaptive_softmax.split(",")]
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(a.d_model, vocab, cutoffs, div_value=4.0)
        self.bias_cache = {}

    def features(self, tokens):
        T = tokens.shape[1]
        x = self.embedding(tokens) * math.sqrt(self.a.d_model)
        if self.a.pos == "learned":
            x = x + self.positions(torch.arange(T))
        elif self.a.pos == "sinusoidal":
            x = x + sinusoidal_table(T, self.a.d_model)
        x = self.drop(x)
        if T not in self.bias_cache:  # fixed (not learned) bias: built once per length, like xtrap
            self.bias_cache[T] = attention_bias(self.a.pos, self.a.heads, T, self.causal)
        for block in self.blocks:
            x = block(x, self.bias_cache[T])
        return self.ln_final(x)

    def token_nll(self, x, targets):
        if self.adaptive is not None:
            return -self.adaptive(x, targets).output
        return F.cross_entropy(x @ self.embedding.weight.t(), targets, reduction="none")


def mlm_batch(seq, mask_id, words, p):
    """RoBERTa masking: select p of the tokens; 80% <mask>, 10% random word, 10% unchanged."""
    selected = torch.rand(seq.shape) < p
    u = torch.rand(seq.shape)
    inputs = seq.clone()
    inputs[selected & (u < 0.8)] = mask_id
    rand = selected & (u >= 0.8) & (u < 0.9)
    inputs[rand] = torch.randint(words, (int(rand.sum()),))
    positions = selected.view(-1).nonzero().squeeze(1)
    return inputs, positions, seq.view(-1)[positions]


def loss_on(model, stream, starts, a, words):
    span = a.L + 1 if model.causal else a.L
    seq = torch.stack([stream[s : s + span] for s in starts.tolist()])
    if model.causal:
        feats = model.features(seq[:, :-1])
        return model.token_nll(feats.reshape(-1, a.d_model), seq[:, 1:].reshape(-1)).mean()
    inputs, positions, targets = mlm_batch(seq, words, words, a.mask_prob)
    rows = model.features(inputs).reshape(-1, a.d_model).index_select(0, positions)
    return model.token_nll(rows, targets).mean()


def train_throughput(model, train, a, words):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.98))
    model.train()
    span = a.L + 1 if model.causal else a.L
    tokens, t0 = 0, None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            t0 = time.perf_counter()
        for group in opt.param_groups:  # xtrap sets the scheduled rate every step
            group["lr"] = a.lr
        starts = torch.randint(0, len(train) - span, (a.batch,))
        loss = loss_on(model, train, starts, a, words)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        loss.item()
        opt.step()
        if step >= a.warmup:
            tokens += a.batch * a.L
    return tokens / (time.perf_counter() - t0)


@torch.no_grad()
def eval_throughput(model, valid, a, words):
    """Non-overlapping windows of L over the first eval_tokens tokens, batch windows at a time."""
    model.eval()
    n = (min(a.eval_tokens, len(valid) - 1) // a.L) * a.L
    windows = valid[: n + 1]
    scored, t0 = 0, time.perf_counter()
    for w0 in range(0, n, a.L * a.batch):
        starts = list(range(w0, min(n, w0 + a.L * a.batch), a.L))
        x = torch.stack([windows[s : s + a.L] for s in starts])
        y = torch.stack([windows[s + 1 : s + a.L + 1] for s in starts])
        if model.causal:
            nll = model.token_nll(model.features(x).reshape(-1, a.d_model), y.reshape(-1))
        else:
            inputs, positions, targets = mlm_batch(x, words, words, a.mask_prob)
            rows = model.features(inputs).reshape(-1, a.d_model).index_select(0, positions)
            nll = model.token_nll(rows, targets)
        nll.double().sum().item()
        scored += nll.numel()
    return scored / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/wikitext-2")
    p.add_argument("--arch", default="decoder", choices=["decoder", "encoder"])
    p.add_argument("--pos", default="alibi", choices=["none", "alibi", "sinusoidal", "learned"])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--L", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--adaptive-softmax", default="", help="cutoffs, e.g. 2000,10000; empty = tied full softmax")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mode", default="train", choices=["train", "eval"])
    p.add_argument("--steps", type=int, default=10, help="timed training steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--eval-tokens", type=int, default=16384)
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.set_flush_denormal(True)  # as xtrap's configureRuntime
    torch.manual_seed(1)
    words, train, valid = load_corpus(a.data)
    vocab = words + (0 if a.arch == "decoder" else 1)  # encoders add <mask>
    model = Transformer(a, vocab)
    if a.mode == "train":
        tps = train_throughput(model, train, a, words)
    else:
        tps = eval_throughput(model, valid, a, words)
    print(json.dumps({"mode": a.mode, "tok_per_s": tps, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
