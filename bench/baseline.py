"""PyTorch eager baseline of xtrap's transformer, for throughput comparison.

Same architecture as src/model/transformer.cpp: pre-LN blocks, qkv Linear(d, 3d) split as
(B, T, 3, H, D), out Linear, exact-GELU FFN, final LayerNorm, token embedding scaled by sqrt(d) (unless --no-scale-embedding),
attention-probability / residual / FFN-activation / embedding dropout, and the heads xtrap has
for this comparison: the tied full softmax (x . E^T), LibTorch's adaptive softmax (div_value 4,
CPU comparison only) and CLAP (beta * x . normalize(E)^T with a learned beta, the inputs embedded
with the same normalised rows: output_head.cpp). Positions: none, sinusoidal, learned, rotary
(rotate-half on q and k before the scaling, angles in float64, rotation in float32, cast back:
position/rotary.cpp; here cos/sin are cached per length), and the ALiBi family of
linear_bias_spec.cpp: alibi (-m|i-j|, causal for decoders) and the encoder variants alibi-offset
(past -m(i-j), future -m(j-i-0.5)), alibi-onesided (half the heads past only, half future only),
alibi-learned (past and future slopes sigmoid(p), one pair per head shared by the layers, p
initialised at logit of the standard slopes) and bialibi (learned slopes, and a learned per-head
bias replacing the distance term for every pair touching position 0). A fixed bias is built once
per length; a learned one is rebuilt, differentiably, every forward (as eager code would).
Decoders: causal LM on L+1-token windows. Encoders: masked LM
as xtrap's training (src/train/objective.cpp, src/data/mlm_masking.h): per sequence exactly
int(p*L + u) tokens selected uniformly without replacement, 80% <mask>, 10% a random word, 10%
kept, the loss on the selected rows only (index_select before the head). AdamW (betas 0.9, 0.98)
over two groups (decay on matrices only), the learning rate set every step, gradient clipping at 1.
Token ids come from xtrap's corpus cache (data/<dir>/.xtrap-cache.bin), so the vocabulary and
the adaptive-softmax clusters match.

Precision (--dtype bfloat16) is xtrap's --dtype bfloat16: float32 master weights, float32 AdamW
state and float32 loss, the forward and the loss head under torch.autocast(device, bfloat16)
(xtrap opens the same autocast scope around features() and tokenNll(): util/execution_context.h);
backward outside it.

Attention (--attention auto): on CUDA torch.nn.functional.scaled_dot_product_attention, as
xtrap's GPU path (model/attention.cpp sdpaAttention): is_causal=True and no mask for decoders
without a bias (none, rotary, sinusoidal, learned), an additive (H, T, T) mask in the compute
precision for ALiBi (the causal -inf inside it) and for alibi-offset; SDPA applies the
1/sqrt(D) scale (xtrap scales q first and passes scale 1: the same product). On the CPU (and with
LibTorch/torch builds without SDPA, e.g. Debian's 1.13) the explicit path: scaled q, q k^T + bias
(the causal mask included), softmax, dropout, times v.

On CUDA: AdamW(fused=True) where this torch has it (--adamw auto; the JSON line says which),
set_to_none gradients (xtrap drops them before the forward), the batch built on the host and
copied from pinned memory without blocking, and no host synchronisation inside the timed loop
(--host-sync auto = none on CUDA; `step` reads the loss and the gradient norm every step, as
xtrap does) except torch.cuda.synchronize() before each clock read. On the CPU the loss is read
every step as before (--host-sync auto = step).

--compile MODE (torch 2.x): the same model under torch.compile(mode=MODE) (default,
max-autotune-no-cudagraphs, reduce-overhead, max-autotune): the step's loss from its device tensors
(forward and loss head under autocast, as eager) is the compiled function; backward, clipping and
AdamW stay eager, as in the eager run. Compilation happens in the untimed --warmup steps (give
enough: reduce-overhead records its CUDA graphs at the second and third call); the JSON line's
compile_s is the wall time of the first step, compilation included. A torch without torch.compile
(Debian's 1.13) exits with one line saying so.

Prints one JSON line with tokens/s (and, with --profile, writes a torch.profiler table).
--mode matmul instead times a square matmul (--matmul-n, --dtype) on --device: the peak that
bench/compare.py quotes MFU against (CUDA events on CUDA).

CPU comparison: run with Debian's interpreter (/usr/bin/python3) to use the same LibTorch 1.13
kernels as build/xtrap. GPU comparison: the GPU machine's python3 (its PyTorch wheel is the
LibTorch build-cuda/xtrap links against).
"""
import argparse
import contextlib
import inspect
import json
import math
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")  # torch >= 2.0
COMPILE_MODES = ["default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"]


def compile_unavailable():
    """Why this torch cannot run --compile, or None."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile (2.0+)"
    return None


def load_corpus(data_dir):
    """Vocabulary size and (train, valid) token ids from xtrap's cache file (src/data/token_cache.h)."""
    with open(f"{data_dir}/.xtrap-cache.bin", "rb") as f:
        buf = f.read()
    assert buf[:8] == b"XTRAPTOK", "not an xtrap corpus cache; run xtrap once on this data first"
    (version,) = struct.unpack_from("<I", buf, 8)
    if version == 2:
        # 104-byte header: magic, version, reserved, 3 source sizes, content hash, corpus digest,
        # payload checksum, word count, vocabulary block bytes, 3 split lengths; then the words
        # ('\0'-terminated, padded to 4 bytes) and the train, valid, test ids as int32.
        n_words, vocab_bytes, n_train, n_valid, _ = struct.unpack_from("<5Q", buf, 64)
        pos = 104 + (vocab_bytes + 3) // 4 * 4
        ids = lambda start, n: torch.frombuffer(bytearray(buf[start : start + 4 * n]), dtype=torch.int32).long()
        return n_words, ids(pos, n_train), ids(pos + 4 * n_train, n_valid)
    assert version == 1, f"xtrap corpus cache version {version}: unknown to bench/baseline.py"
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


LINEAR_BIAS = ("alibi", "alibi-offset", "alibi-onesided", "alibi-learned", "bialibi")  # the ALiBi family
LEARNED_BIAS = ("alibi-learned", "bialibi")


def linear_bias_spec(pos, n_heads, causal):
    """linear_bias_spec.cpp's makeLinearBiasSpec: per-head past and future slopes, past and future
    blocking, the future shift."""
    m = alibi_slopes(n_heads)
    past, future = list(m), [0.0] * n_heads if causal else list(m)
    block_past, block_future = [False] * n_heads, [causal] * n_heads
    if pos == "alibi-onesided":
        half = alibi_slopes(n_heads // 2)
        for k in range(n_heads):
            past_head = k < n_heads // 2
            slope = half[k if past_head else k - n_heads // 2]
            past[k], future[k] = (slope, 0.0) if past_head else (0.0, slope)
            block_past[k], block_future[k] = not past_head, past_head
    return past, future, block_past, block_future, 0.5 if pos == "alibi-offset" else 0.0


def bias_geometry(spec, T, device):
    """The slope-free part of linear_bias for one length: (i, j, past, future, blocked) with past
    and future distances (T, T) and the cells each head blocks (H, T, T), on `device`. Built once
    per length: making the block flags a device tensor is a host-to-device copy, which waits for
    the GPU."""
    _, _, block_past, block_future, shift = spec
    H = len(block_past)
    i = torch.arange(T, dtype=torch.float32, device=device).view(T, 1)
    j = torch.arange(T, dtype=torch.float32, device=device).view(1, T)
    d = j - i
    blocked = ((torch.tensor(block_past, device=device).view(H, 1, 1) & (d < 0))
               | (torch.tensor(block_future, device=device).view(H, 1, 1) & (d > 0)))
    return i, j, (-d).clamp_min(0.0), (d - shift).clamp_min(0.0), blocked


def linear_bias(geometry, slope_past, slope_future, first_token, causal):
    """(H, T, T) float32 additive bias on the slopes' device (linear_bias.cpp): -slope_past (i-j)
    for j < i, -slope_future (j-i-shift) for j > i, -inf where blocked (and above the diagonal when
    causal); first_token (H) or None replaces every pair touching position 0. Differentiable in
    the slopes and first_token. `geometry`: bias_geometry of the spec and length."""
    i, j, past, future, blocked = geometry
    H = slope_past.shape[0]
    bias = -(slope_past.view(H, 1, 1) * past + slope_future.view(H, 1, 1) * future)
    bias = bias.masked_fill(blocked, float("-inf"))
    if first_token is not None:
        bias = torch.where((i == 0) | (j == 0), first_token.view(H, 1, 1).expand_as(bias), bias)
    if causal:
        bias = bias.masked_fill(j > i, float("-inf"))
    return bias


def fixed_bias(pos, n_heads, T, causal):
    """(H|1, T, T) float32 on the CPU: a fixed ALiBi-family bias plus the causal mask, or the mask alone."""
    if pos in LINEAR_BIAS:
        spec = linear_bias_spec(pos, n_heads, causal)
        return linear_bias(bias_geometry(spec, T, "cpu"), torch.tensor(spec[0]), torch.tensor(spec[1]), None, causal)
    i = torch.arange(T).view(T, 1)
    j = torch.arange(T).view(1, T)
    return torch.zeros(1, T, T).masked_fill((j > i) & causal, float("-inf"))


def sinusoidal_table(T, d):
    pos = torch.arange(T, dtype=torch.float64).unsqueeze(1)
    freq = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)
    table = torch.zeros(T, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return table.float()


def rotary_tables(T, D, base):
    """(T, D) float32 cos and sin of xtrap's rotate-half angles (position/rotary.cpp)."""
    inv = torch.pow(torch.tensor(base, dtype=torch.float64), -torch.arange(0, D, 2, dtype=torch.float64) / D)
    pos = torch.arange(T, dtype=torch.float64).unsqueeze(1)
    angles = torch.cat([pos * inv, pos * inv], 1).float()
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    """x (B, H, T, D): rotated in float32, returned in x's precision, as xtrap's Rotary::apply."""
    xf = x.float()
    half1, half2 = xf.chunk(2, dim=-1)
    return (xf * cos + torch.cat([-half2, half1], -1) * sin).to(x.dtype)


class AttentionContext:
    """What every layer's attention needs for one forward: the path, the bias or causal flag."""

    def __init__(self, sdpa, bias, mask, is_causal, rotary):
        self.sdpa, self.bias, self.mask, self.is_causal, self.rotary = sdpa, bias, mask, is_causal, rotary


class Attention(nn.Module):
    def __init__(self, d, n_heads, dropout):
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, ctx):
        B, T, C = x.shape
        H, D = self.n_heads, C // self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)  # (B, H, T, D) each
        if ctx.rotary is not None:
            cos, sin = ctx.rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if ctx.sdpa:
            p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=ctx.mask, dropout_p=p, is_causal=ctx.is_causal)
        else:
            q = q * (1.0 / math.sqrt(D))
            att = q @ k.transpose(-2, -1)
            att = att + ctx.bias
            att = F.dropout(att.softmax(-1), self.dropout, self.training)
            y = att @ v
        return self.out(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, d, n_heads, ffn, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, n_heads, dropout)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, ctx):
        x = x + self.drop(self.attn(self.ln1(x), ctx))
        x = x + self.drop(self.fc2(self.drop(F.gelu(self.fc1(self.ln2(x))))))
        return x


class Transformer(nn.Module):
    def __init__(self, a, vocab, sdpa):
        super().__init__()
        self.a, self.causal, self.sdpa = a, a.arch == "decoder", sdpa
        self.clap = a.head == "clap"
        self.embedding = nn.Embedding(vocab, a.d_model)
        nn.init.normal_(self.embedding.weight, 0.0, 1.0 / math.sqrt(a.d_model))
        if a.pos == "learned":  # xtrap's initialisation: N(0, 1/sqrt(d)) unless --position-init-std
            self.positions = nn.Embedding(a.L, a.d_model)
            std = a.position_init_std if a.position_init_std is not None else 1.0 / math.sqrt(a.d_model)
            nn.init.normal_(self.positions.weight, 0.0, std)
        self.drop = nn.Dropout(a.dropout)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads, a.ffn, a.dropout) for _ in range(a.layers))
        self.ln_final = nn.LayerNorm(a.d_model)
        self.adaptive = None
        if a.adaptive_softmax:
            cutoffs = [int(c) for c in a.adaptive_softmax.split(",")]
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(a.d_model, vocab, cutoffs, div_value=4.0)
        if self.clap:
            self.beta = nn.Parameter(torch.full((1,), a.clap_beta))
        self.spec = linear_bias_spec(a.pos, a.heads, self.causal) if a.pos in LINEAR_BIAS else None
        if a.pos in LEARNED_BIAS:  # one pair of slopes per head, shared by the layers, as xtrap's LinearBias
            self.slope_past_logit = nn.Parameter(torch.logit(torch.tensor(self.spec[0])))
            self.slope_future_logit = nn.Parameter(torch.logit(torch.tensor(self.spec[1])))
            self.first_token_bias = nn.Parameter(torch.zeros(a.heads)) if a.pos == "bialibi" else None
        self.cache = {}  # fixed (not learned) tables, built once per length and device, like xtrap's

    def projection(self):
        """The head's matrix: the token embedding, or for CLAP its rows normalised to unit length."""
        return F.normalize(self.embedding.weight, dim=1) if self.clap else self.embedding.weight

    def attention_context(self, T, device, dtype):
        a = self.a
        if a.pos in LEARNED_BIAS:  # rebuilt every forward: its gradient reaches the slopes
            key = ("geometry", T, str(device))
            if key not in self.cache:
                self.cache[key] = bias_geometry(self.spec, T, device)
            bias = linear_bias(self.cache[key], torch.sigmoid(self.slope_past_logit),
                               torch.sigmoid(self.slope_future_logit), self.first_token_bias, self.causal)
            if self.sdpa:
                return AttentionContext(True, None, bias.to(dtype), False, None)
            return AttentionContext(False, bias, None, False, None)
        key = (T, str(device), dtype)
        if key not in self.cache:
            has_bias = a.pos in LINEAR_BIAS
            rotary = None
            if a.pos == "rotary":
                cos, sin = rotary_tables(T, a.d_model // a.heads, a.rotary_base)
                rotary = (cos.to(device), sin.to(device))
            if self.sdpa:
                # xtrap: the mask in the query's precision (bfloat16 under autocast); no mask and
                # is_causal for a decoder without a bias.
                mask = fixed_bias(a.pos, a.heads, T, self.causal).to(device, dtype) if has_bias else None
                ctx = AttentionContext(True, None, mask, self.causal and not has_bias, rotary)
            else:
                bias = fixed_bias(a.pos, a.heads, T, self.causal).to(device)
                ctx = AttentionContext(False, bias, None, False, rotary)
            self.cache[key] = ctx
        return self.cache[key]

    def features(self, tokens, dtype):
        """dtype: the compute precision (float32, or bfloat16 under autocast) the mask is kept in."""
        T = tokens.shape[1]
        if self.clap:
            x = F.embedding(tokens, self.projection())
        else:
            x = self.embedding(tokens)
        if self.a.scale_embedding:
            x = x * math.sqrt(self.a.d_model)
        if self.a.pos == "learned":
            x = x + self.positions(torch.arange(T, device=tokens.device))
        elif self.a.pos == "sinusoidal":
            key = ("sinusoidal", T, str(tokens.device))
            if key not in self.cache:
                self.cache[key] = sinusoidal_table(T, self.a.d_model).to(tokens.device)
            x = x + self.cache[key]
        x = self.drop(x)
        ctx = self.attention_context(T, tokens.device, dtype)
        for block in self.blocks:
            x = block(x, ctx)
        return self.ln_final(x)

    def token_nll(self, x, targets):
        if self.adaptive is not None:
            return -self.adaptive(x, targets).output
        if self.clap:
            return F.cross_entropy((self.beta * x) @ self.projection().t(), targets, reduction="none")
        return F.cross_entropy(x @ self.embedding.weight.t(), targets, reduction="none")


def mlm_batch(seq, mask_id, words, p):
    """xtrap's training masking (mlm_masking.h), on the host: per sequence of n tokens exactly
    int(p*n + u) selected uniformly without replacement; 80% <mask>, 10% a random word, 10% kept.
    (xtrap draws from its own hash streams and never picks <unk>/<eos> as the random word.)"""
    B, n = seq.shape
    counts = torch.floor(p * n + torch.rand(B)).long().clamp(max=n)
    ranks = torch.rand(B, n).argsort(1).argsort(1)  # a uniform permutation per row
    selected = ranks < counts.unsqueeze(1)
    u = torch.rand(B, n)
    inputs = seq.clone()
    inputs[selected & (u < 0.8)] = mask_id
    rand = selected & (u >= 0.8) & (u < 0.9)
    inputs[rand] = torch.randint(words, (int(rand.sum()),))
    positions = selected.view(-1).nonzero().squeeze(1)
    return inputs, positions, seq.view(-1)[positions]


class Runtime:
    """Device, compute precision and the host -> device copies of batches."""

    def __init__(self, a):
        self.device = torch.device(a.device)
        self.cuda = self.device.type == "cuda"
        self.low = a.dtype == "bfloat16"
        self.compute_dtype = torch.bfloat16 if self.low else torch.float32
        if a.attention == "auto":
            self.sdpa = HAS_SDPA and self.cuda
        elif a.attention == "sdpa":
            if not HAS_SDPA:
                raise SystemExit(f"--attention sdpa: torch {torch.__version__} has no scaled_dot_product_attention")
            self.sdpa = True
        else:
            self.sdpa = False

    def autocast(self):
        if not self.low:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def to_device(self, t):
        if not self.cuda:
            return t
        return t.pin_memory().to(self.device, non_blocking=True)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)


def window_batch(stream, starts, span):
    """(B, span) int64 windows stream[s : s + span] on the host."""
    return stream[starts.unsqueeze(1) + torch.arange(span).unsqueeze(0)]


def device_losses(model, a, rt):
    """The step's loss from its device tensors: decoder(seq) with seq (B, L + 1), encoder(inputs,
    positions, targets); the forward and the loss head under autocast. What --compile compiles."""

    def decoder(seq):
        with rt.autocast():
            feats = model.features(seq[:, :-1], rt.compute_dtype)
            return model.token_nll(feats.reshape(-1, a.d_model), seq[:, 1:].reshape(-1)).mean()

    def encoder(inputs, positions, targets):
        with rt.autocast():
            rows = model.features(inputs, rt.compute_dtype).reshape(-1, a.d_model).index_select(0, positions)
            return model.token_nll(rows, targets)

    return decoder, encoder


def loss_on(model, stream, starts, a, words, rt, losses=None):
    """losses: device_losses (eager) unless given (compiled)."""
    decoder, encoder = losses or device_losses(model, a, rt)
    span = a.L + 1 if model.causal else a.L
    seq = window_batch(stream, starts, span)
    if model.causal:
        return decoder(rt.to_device(seq))
    return masked_nll(model, seq, a, words, rt, encoder).mean()


def masked_nll(model, seq, a, words, rt, encoder=None):
    """An encoder's NLL of the tokens xtrap's masking selects in the (B, n) host windows seq, one per
    selected token (<mask> is id `words`)."""
    inputs, positions, targets = mlm_batch(seq, words, words, a.mask_prob)
    inputs, positions, targets = rt.to_device(inputs), rt.to_device(positions), rt.to_device(targets)
    return (encoder or device_losses(model, a, rt)[1])(inputs, positions, targets)


def make_optimizer(model, a, rt):
    """AdamW as xtrap's makeOptimizer; returns (optimizer, implementation name)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    params = inspect.signature(torch.optim.AdamW).parameters
    kind = a.adamw
    if kind == "auto":
        kind = "fused" if rt.cuda and "fused" in params else ("foreach" if rt.cuda and "foreach" in params else "default")
    kwargs = {}
    if kind == "fused":
        if "fused" not in params:
            raise SystemExit(f"--adamw fused: torch {torch.__version__}'s AdamW has no fused implementation")
        kwargs["fused"] = True
    elif kind == "foreach":
        kwargs["foreach"] = True
    elif kind == "loop" and "foreach" in params:
        kwargs["foreach"] = False
    return torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.98), **kwargs), kind


def train_throughput(model, train, a, words, rt):
    opt, adamw_kind = make_optimizer(model, a, rt)
    model.train()
    span = a.L + 1 if model.causal else a.L
    host_sync = a.host_sync if a.host_sync != "auto" else ("none" if rt.cuda else "step")
    # The CPU path keeps its earlier zeroing (torch 1.13's default); CUDA drops gradients as xtrap does.
    set_to_none = rt.cuda
    losses = None
    if a.compile != "none":
        why = compile_unavailable()
        if why:
            raise SystemExit(f"--compile {a.compile}: {why}")
        losses = tuple(torch.compile(f, mode=a.compile) for f in device_losses(model, a, rt))
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

    def step():
        if losses and mark_step:  # reduce-overhead: this step may overwrite the last one's graph outputs
            mark_step()
        for group in opt.param_groups:  # xtrap sets the scheduled rate every step
            group["lr"] = a.lr
        opt.zero_grad(set_to_none=set_to_none)
        starts = torch.randint(0, len(train) - span, (a.batch,))
        loss = loss_on(model, train, starts, a, words, rt, losses)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if host_sync == "step":  # xtrap reads both on the host every step
            loss.item()
            float(norm)
        opt.step()

    compile_s = None
    for i in range(a.warmup):
        t_first = time.perf_counter()
        step()
        if i == 0 and losses:
            rt.sync()
            compile_s = time.perf_counter() - t_first
    rt.sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    rt.sync()
    seconds = time.perf_counter() - t0
    info = {"adamw": adamw_kind, "host_sync": host_sync, "train_seconds": seconds, "compile": a.compile,
            "compile_s": compile_s}
    if a.profile:
        info["profile"] = profile_steps(step, a, rt)
    return a.steps * a.batch * a.L / seconds, info


def profile_steps(step, a, rt):
    """torch.profiler over --profile-steps more steps: a table of the top operators and kernels by
    device (CUDA) or CPU self time into --profile, and per-step totals for the JSON line."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if rt.cuda else [])
    rt.sync()
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        for _ in range(a.profile_steps):
            step()
        rt.sync()
        wall = time.perf_counter() - t0
    averages = prof.key_averages()
    keys = (["self_device_time_total", "self_cuda_time_total"] if rt.cuda else []) + ["self_cpu_time_total"]
    table = None
    for key in keys:
        try:
            table = averages.table(sort_by=key, row_limit=a.profile_rows)
            break
        except (AttributeError, KeyError, ValueError):
            continue
    summary = {"steps": a.profile_steps, "wall_s_per_step": wall / a.profile_steps}
    if rt.cuda:
        from torch.autograd import DeviceType

        device_events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
        busy_us = sum(e.time_range.elapsed_us() for e in device_events)
        launches = sum(e.count for e in averages if "LaunchKernel" in e.key)
        summary.update({"device_events_per_step": len(device_events) / a.profile_steps,
                        "kernel_launches_per_step": launches / a.profile_steps,
                        "device_busy_s_per_step": busy_us / 1e6 / a.profile_steps,
                        "device_busy_fraction": busy_us / 1e6 / wall})
    with open(a.profile, "w") as f:
        f.write(f"# bench/baseline.py --profile: {a.arch} pos={a.pos} head={a.head} {a.device} {a.dtype}, "
                f"torch {torch.__version__}\n# {json.dumps(summary)}\n")
        f.write(table or "(no table)\n")
    return summary


@torch.no_grad()
def eval_throughput(model, valid, a, words, rt):
    """Non-overlapping windows of L over the first eval_tokens tokens, batch windows at a time."""
    model.eval()
    n = (min(a.eval_tokens, len(valid) - 1) // a.L) * a.L
    windows = valid[: n + 1]
    scored = 0
    rt.sync()
    t0 = time.perf_counter()
    for w0 in range(0, n, a.L * a.batch):
        starts = list(range(w0, min(n, w0 + a.L * a.batch), a.L))
        x = torch.stack([windows[s : s + a.L] for s in starts])
        y = torch.stack([windows[s + 1 : s + a.L + 1] for s in starts])
        if model.causal:
            x, y = rt.to_device(x), rt.to_device(y)
            with rt.autocast():
                nll = model.token_nll(model.features(x, rt.compute_dtype).reshape(-1, a.d_model), y.reshape(-1))
        else:
            nll = masked_nll(model, x, a, words, rt)
        nll.double().sum().item()
        scored += nll.numel()
    return scored / (time.perf_counter() - t0)


def flop_per_token(a, vocab):
    """Model FLOPs per trained token, xtrap's formula (src/model/flops.cpp) for the full-softmax and
    CLAP heads: 3x the forward (qkv, out, FFN, QK^T and PV over all T keys; the head on the scored
    rows: all for decoders, mask_prob of them for encoders). None for the adaptive softmax."""
    if a.adaptive_softmax:
        return None
    C, Fh, T = a.d_model, a.ffn, a.L
    body = a.layers * (2.0 * T * (4.0 * C * C + 2.0 * C * Fh) + 4.0 * T * T * C) / T
    rows = 1.0 if a.arch == "decoder" else a.mask_prob
    return 3.0 * (body + rows * 2.0 * C * vocab)


def matmul_flops(a, rt):
    """FLOP/s of --matmul-iters square n x n torch.mm in --dtype on --device (CUDA events on CUDA)."""
    n, dtype = a.matmul_n, torch.bfloat16 if rt.low else torch.float32
    x = torch.randn(n, n, device=rt.device).to(dtype)
    y = torch.randn(n, n, device=rt.device).to(dtype)
    o = torch.empty(n, n, device=rt.device, dtype=dtype)
    for _ in range(3):
        torch.mm(x, y, out=o)
    if rt.cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(rt.device)
        start.record()
        for _ in range(a.matmul_iters):
            torch.mm(x, y, out=o)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3
    else:
        t0 = time.perf_counter()
        for _ in range(a.matmul_iters):
            torch.mm(x, y, out=o)
        seconds = time.perf_counter() - t0
    return a.matmul_iters * 2.0 * n**3 / seconds


def make_parser():
    """The model, data and run options (bench/encoder_positions.py reuses them for its training runs)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="data/wikitext-2")
    p.add_argument("--arch", default="decoder", choices=["decoder", "encoder"])
    p.add_argument("--pos", default="alibi", choices=["none", "rotary", "sinusoidal", "learned", *LINEAR_BIAS])
    p.add_argument("--head", default="lm", choices=["lm", "clap"], help="lm: tied full (or adaptive) softmax; clap")
    p.add_argument("--clap-beta", type=float, default=1.0, help="initial CLAP inverse temperature")
    p.add_argument("--rotary-base", type=float, default=10000.0)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=512)
    p.add_argument("--L", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--no-scale-embedding", dest="scale_embedding", action="store_false",
                   help="do not multiply token embeddings by sqrt(d_model) (xtrap's --no-scale-embedding)")
    p.add_argument("--position-init-std", type=float, default=None,
                   help="learned positions: initial standard deviation (default 1/sqrt(d_model), as xtrap)")
    p.add_argument("--adaptive-softmax", default="", help="cutoffs, e.g. 2000,10000; empty = tied full softmax")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--threads", type=int, default=2, help="intra-op CPU threads (0 = torch's default)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="compute precision; bfloat16 = autocast with float32 weights, as xtrap")
    p.add_argument("--attention", default="auto", choices=["auto", "sdpa", "explicit"],
                   help="auto: SDPA on CUDA where torch has it, the explicit softmax path otherwise")
    p.add_argument("--adamw", default="auto", choices=["auto", "fused", "foreach", "loop", "default"],
                   help="auto: fused on CUDA where torch has it, else foreach on CUDA, torch's default on the CPU")
    p.add_argument("--host-sync", default="auto", choices=["auto", "none", "step"],
                   help="step: read loss and gradient norm every step (as xtrap); auto: step on CPU, none on CUDA")
    p.add_argument("--compile", default="none", choices=["none", *COMPILE_MODES],
                   help="train: torch.compile the step's loss in this mode (torch 2.x; compilation in the warmup)")
    p.add_argument("--mode", default="train", choices=["train", "eval", "matmul"])
    p.add_argument("--steps", type=int, default=10, help="timed training steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--eval-tokens", type=int, default=16384)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", default="", help="train: profile --profile-steps more steps, write the table here")
    p.add_argument("--profile-steps", type=int, default=5)
    p.add_argument("--profile-rows", type=int, default=40)
    p.add_argument("--matmul-n", type=int, default=8192)
    p.add_argument("--matmul-iters", type=int, default=20)
    return p


def check_arguments(p, a):
    if a.compile != "none" and (a.mode != "train" or a.warmup < 1):
        p.error("--compile applies to --mode train with --warmup >= 1 (compilation is not timed)")
    if a.head == "clap" and a.adaptive_softmax:
        p.error("--head clap has no adaptive softmax")
    if a.pos in LINEAR_BIAS and a.pos != "alibi" and a.arch != "encoder":
        p.error(f"{a.pos} is an encoder variant (decoders use alibi)")
    if a.pos == "alibi-onesided" and a.heads % 2:
        p.error("alibi-onesided needs an even number of heads")
    if a.pos == "rotary" and (a.d_model // a.heads) % 2:
        p.error("rotary needs an even head dimension")
    if a.position_init_std is not None and (a.pos != "learned" or a.position_init_std <= 0):
        p.error("--position-init-std needs --pos learned and a positive value")


def configure_torch(a):
    """Threads, denormals and the seed, as xtrap's configureRuntime."""
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.set_flush_denormal(True)  # as xtrap's configureRuntime
    torch.manual_seed(a.seed)


def main():
    p = make_parser()
    a = p.parse_args()
    check_arguments(p, a)
    configure_torch(a)
    rt = Runtime(a)
    if rt.cuda and not torch.cuda.is_available():
        raise SystemExit(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    out = {"mode": a.mode, "device": a.device, "dtype": a.dtype, "torch": torch.__version__}
    if rt.cuda:
        out["gpu"] = torch.cuda.get_device_name(rt.device)
    if a.mode == "matmul":
        out.update({"flop_per_s": matmul_flops(a, rt), "n": a.matmul_n, "iters": a.matmul_iters})
        print(json.dumps(out))
        return
    words, train, valid = load_corpus(a.data)
    vocab = words + (0 if a.arch == "decoder" else 1)  # encoders add <mask>
    model = Transformer(a, vocab, rt.sdpa).to(rt.device)
    out.update({"attention": "sdpa" if rt.sdpa else "explicit", "vocab": vocab,
                "flop_per_token": flop_per_token(a, vocab)})
    if a.mode == "train":
        tps, info = train_throughput(model, train, a, words, rt)
        out.update(info)
    else:
        tps = eval_throughput(model, valid, a, words, rt)
    if rt.cuda:
        out["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated(rt.device) / 2**30
    out["tok_per_s"] = tps
    print(json.dumps(out))


if __name__ == "__main__":
    main()
