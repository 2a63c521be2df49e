"""Real sizes on a CPU (issue 77 item 5): xtrap's evaluation of Llama-family checkpoints beside the
two anchors a user would pick instead, on random weights of the exact shapes of SmolLM2-135M,
Qwen2.5-0.5B and TinyLlama-1.1B. One command, from the repository root:

  /usr/bin/python3 bench/rotary_cpu.py --work /tmp/rotary-cpu \\
      [--tools xtrap,eager,llama.cpp] [--models smollm2-135m,qwen2.5-0.5b,tinyllama-1.1b] \\
      [--lengths 2048,8192,16384] [--dtypes float32,bfloat16] [--reps 3] [--out results/rotary_cpu]

The shapes are the models' config.json values (MODELS; tied embeddings, q/k/v biases and rope_theta
as released). --work receives, per model and dtype, a Hugging Face directory (config.json,
model.safetensors, tokenizer.json: the 2,000-token SentencePiece-style vocabulary of
tests/tokenizer, whose ids fit every vocabulary) and a GGUF of the same weights (written here,
write_gguf). Each (model, dtype, length) is measured --reps times, the tools alternating and the
first of them rotating every rep; each run is a fresh process under /usr/bin/time (peak RSS):

  xtrap      `xtrap eval DIR --text TEXT --Lvalid L --max-tokens L --batch 1 --threads 2 --dtype D`:
             one window of L tokens, every one scored; tokens/s as eval reports it (the forward and
             the loss, not the load).
  eager      a PyTorch forward of the same shapes written here (eager_forward): query-blocked
             attention (--eager-block rows), a group's query heads against their key/value head
             by a grouped reshape (no repeat), the head in blocks of rows for the NLL of every
             token. bfloat16: weights and activations bf16, softmax float32.
  llama.cpp  prompt processing of L random tokens through npm's node-llama-cpp prebuilt CPU
             binaries (bench/llama_cpp_prompt.mjs): threads 2, context L, batch = ubatch =
             --llama-batch (default L: one ubatch), flash attention on, KV cache F16 (its
             default); logits of the last token only. Install once: `npm install
             --prefix /tmp/nlc node-llama-cpp` (--node-llama-cpp).
  matmul     torch.matmul of (L, hidden) x (hidden, intermediate) in the dtype, 2 threads: the
             machine's own matrix-multiply rate at the model's shapes.

FLOPs of one forward of L tokens with R logit rows (R = L for xtrap and eager, 1 for llama.cpp):
  2 L P + 2 L^2 n_layers H D + 2 R V C
P the blocks' matrix parameters (q, k, v, o, gate, up, down), H query heads of D channels, V the
vocabulary, C the width: 2 flops a multiply-add, causal attention's QK^T and PV at L^2 / 2 pairs.
Writes OUT.csv (medians), OUT_runs.csv (every run) and OUT.md (the table, with xtrap's peak RSS
beside the formula of docs/pretrained.md, Memory). Timings need an idle machine: the load and any
compiler processes are printed first and written into OUT.md.
"""
import argparse
import csv
import json
import math
import mmap
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from hf_checkpoint import write_model  # noqa: E402

TOKENIZER = os.path.join(ROOT, "tests", "tokenizer", "sentencepiece-bpe_tokenizer.json")
TEXT = os.path.join(ROOT, "data", "wikitext-2", "wiki.valid.tokens")
TEXT_BYTES = 400_000  # about 100k tokens of the 2,000-token vocabulary: more than 16384
TOOLS = ["xtrap", "eager", "llama.cpp"]

# config.json of each release (huggingface.co/<repo>/blob/main/config.json), the keys a forward reads.
MODELS = {
    "smollm2-135m": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=576,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         intermediate_size=1536, vocab_size=49152, rope_theta=100000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=True, max_position_embeddings=8192, hidden_act="silu",
                         attention_bias=False, mlp_bias=False, head_dim=64, pretraining_tp=1, rope_scaling=None,
                         bos_token_id=0, eos_token_id=0),
    "qwen2.5-0.5b": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], hidden_size=896,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         intermediate_size=4864, vocab_size=151936, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         tie_word_embeddings=True, max_position_embeddings=32768, hidden_act="silu",
                         use_sliding_window=False, sliding_window=32768, max_window_layers=24, rope_scaling=None,
                         bos_token_id=151643, eos_token_id=151643),
    "tinyllama-1.1b": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
                           num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                           intermediate_size=5632, vocab_size=32000, rope_theta=10000.0, rms_norm_eps=1e-5,
                           tie_word_embeddings=False, max_position_embeddings=2048, hidden_act="silu",
                           attention_bias=False, mlp_bias=False, pretraining_tp=1, rope_scaling=None,
                           bos_token_id=1, eos_token_id=2),
}
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def dims(cfg):
    """(C, layers, H, KV, D, F, V)"""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    return (C, cfg["num_hidden_layers"], H, cfg["num_key_value_heads"], cfg.get("head_dim", C // H),
            cfg["intermediate_size"], cfg["vocab_size"])


def forward_flops(cfg, L, logit_rows):
    C, layers, H, KV, D, Fi, V = dims(cfg)
    P = layers * (2 * C * H * D + 2 * C * KV * D + 3 * C * Fi)
    return 2 * L * P + 2 * L * L * layers * H * D + 2 * logit_rows * V * C


# ---- the checkpoints ----

def random_weights(cfg, seed=0):
    """Hugging Face tensor names; linear weights of std 1/sqrt(fan-in), norms 1, so activations stay
    of order 1 (no overflow, no denormals) in either dtype."""
    g = torch.Generator().manual_seed(seed)
    C, layers, H, KV, D, Fi, V = dims(cfg)

    def normal(*shape, std):
        return torch.randn(*shape, generator=g) * std

    tied = cfg["tie_word_embeddings"]
    t = {"model.embed_tokens.weight": normal(V, C, std=C ** -0.5 if tied else 1.0)}
    for l in range(layers):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = torch.ones(C)
        t[p + "post_attention_layernorm.weight"] = torch.ones(C)
        for n, o in (("q_proj", H * D), ("k_proj", KV * D), ("v_proj", KV * D)):
            t[p + f"self_attn.{n}.weight"] = normal(o, C, std=C ** -0.5)
            if cfg["model_type"] == "qwen2":
                t[p + f"self_attn.{n}.bias"] = normal(o, std=0.1)
        t[p + "self_attn.o_proj.weight"] = normal(C, H * D, std=(H * D) ** -0.5)
        t[p + "mlp.gate_proj.weight"] = normal(Fi, C, std=C ** -0.5)
        t[p + "mlp.up_proj.weight"] = normal(Fi, C, std=C ** -0.5)
        t[p + "mlp.down_proj.weight"] = normal(C, Fi, std=Fi ** -0.5)
    t["model.norm.weight"] = torch.ones(C)
    if not tied:
        t["lm_head.weight"] = normal(V, C, std=C ** -0.5)
    return t


# GGUF (github.com/ggml-org/llama.cpp docs/gguf.md, version 3): magic, version, tensor and
# key-value counts, the key-values, the tensor infos (name, dims innermost first, ggml type, offset
# into the data), the data aligned to 32 bytes.
GGUF_U32, GGUF_I32, GGUF_F32, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 8, 9
GGML_TYPES = {torch.float32: 0, torch.bfloat16: 30}
GGUF_FILE_TYPES = {torch.float32: 0, torch.bfloat16: 32}  # LLAMA_FTYPE_ALL_F32, MOSTLY_BF16
GGUF_ALIGN = 32


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(v):
    if isinstance(v, str):
        return struct.pack("<I", GGUF_STRING) + gguf_string(v)
    if isinstance(v, float):
        return struct.pack("<If", GGUF_F32, v)
    if isinstance(v, int):
        return struct.pack("<II", GGUF_U32, v)
    kind, items = v  # ("str" | "f32" | "i32", list)
    if kind == "str":
        return struct.pack("<IIQ", GGUF_ARRAY, GGUF_STRING, len(items)) + b"".join(gguf_string(s) for s in items)
    code, fmt = {"f32": (GGUF_F32, "f"), "i32": (GGUF_I32, "i")}[kind]
    return struct.pack(f"<IIQ{len(items)}{fmt}", GGUF_ARRAY, code, len(items), *items)


def permute_rotary(w, heads):
    """convert_hf_to_gguf.py LlamaModel.permute: llama.cpp's 'llama' rotary pairs channels (2i, 2i+1)
    of a head, Hugging Face's rotate_half pairs (i, i + D/2); reorder the output rows to match."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def gguf_tensors(cfg, t):
    """llama.cpp's names (llama-arch.cpp) for the Hugging Face tensors; the 'llama' architecture
    takes q and k permuted, 'qwen2' (NeoX rotary) as they are."""
    C, layers, H, KV, D, Fi, V = dims(cfg)
    llama = cfg["model_type"] == "llama"
    out = {"token_embd.weight": t["model.embed_tokens.weight"], "output_norm.weight": t["model.norm.weight"]}
    if "lm_head.weight" in t:
        out["output.weight"] = t["lm_head.weight"]
    names = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
             "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
             "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}
    for l in range(layers):
        p = f"model.layers.{l}."
        for hf, gg in names.items():
            out[f"blk.{l}.{gg}"] = t[p + hf]
        for n, gg, heads in (("q_proj", "attn_q", H), ("k_proj", "attn_k", KV), ("v_proj", "attn_v", 0)):
            w = t[p + f"self_attn.{n}.weight"]
            out[f"blk.{l}.{gg}.weight"] = permute_rotary(w, heads) if llama and heads else w
            if p + f"self_attn.{n}.bias" in t:
                out[f"blk.{l}.{gg}.bias"] = t[p + f"self_attn.{n}.bias"]
    return out


def gguf_metadata(cfg, name, dtype):
    """Hyperparameters under the architecture's prefix and a SentencePiece-style vocabulary of V
    placeholder pieces (<unk>, <s>, </s>, the 256 byte pieces, then t<i>): the timed tokens are ids."""
    C, layers, H, KV, D, Fi, V = dims(cfg)
    arch = cfg["model_type"]
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(len(tokens), V)]
    types = [2, 3, 3] + [6] * 256 + [1] * (V - 259)  # unknown, control, byte, normal
    return {"general.architecture": arch, "general.name": name, "general.file_type": GGUF_FILE_TYPES[dtype],
            "general.alignment": GGUF_ALIGN,
            f"{arch}.context_length": cfg["max_position_embeddings"], f"{arch}.embedding_length": C,
            f"{arch}.block_count": layers, f"{arch}.feed_forward_length": Fi, f"{arch}.attention.head_count": H,
            f"{arch}.attention.head_count_kv": KV, f"{arch}.attention.key_length": D,
            f"{arch}.attention.value_length": D, f"{arch}.rope.dimension_count": D,
            f"{arch}.rope.freq_base": float(cfg["rope_theta"]),
            f"{arch}.attention.layer_norm_rms_epsilon": float(cfg["rms_norm_eps"]),
            "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": ("str", tokens),
            "tokenizer.ggml.scores": ("f32", [-float(i) for i in range(V)]), "tokenizer.ggml.token_type": ("i32", types),
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0}


def write_gguf(path, metadata, tensors, dtype):
    """Matrices in dtype, vectors (norms, biases) float32 as llama.cpp's converter keeps them."""
    stored = {n: (t.to(dtype) if t.dim() == 2 else t.float()).contiguous() for n, t in tensors.items()}
    head = b"GGUF" + struct.pack("<IQQ", 3, len(stored), len(metadata))
    head += b"".join(gguf_string(k) + gguf_value(v) for k, v in metadata.items())
    offset, infos = 0, []
    for n, t in stored.items():
        infos.append(gguf_string(n) + struct.pack(f"<I{t.dim()}QIQ", t.dim(), *reversed(t.shape),
                                                  GGML_TYPES[t.dtype], offset))
        offset += -(-t.numel() * t.element_size() // GGUF_ALIGN) * GGUF_ALIGN
    head += b"".join(infos)
    with open(path, "wb") as f:
        f.write(head + b"\0" * (-len(head) % GGUF_ALIGN))
        for t in stored.values():
            b = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
            f.write(b + b"\0" * (-len(b) % GGUF_ALIGN))


def prepare(work, model, dtype):
    """WORK/<model>-<dtype>/ (the Hugging Face directory) and WORK/<model>-<dtype>.gguf, once."""
    d, gguf = os.path.join(work, f"{model}-{dtype}"), os.path.join(work, f"{model}-{dtype}.gguf")
    if os.path.exists(gguf):
        return d, gguf
    print(f"writing {d} and {gguf}", flush=True)
    cfg = dict(MODELS[model], torch_dtype=dtype, initializer_range=0.02, use_cache=True,
               transformers_version="4.51.3")
    t = random_weights(cfg)
    write_model(d, cfg, {n: v.to(TORCH_DTYPES[dtype]) for n, v in t.items()}, tokenizer=TOKENIZER)
    write_gguf(gguf + ".part", gguf_metadata(cfg, model, TORCH_DTYPES[dtype]), gguf_tensors(cfg, t),
               TORCH_DTYPES[dtype])
    os.replace(gguf + ".part", gguf)
    return d, gguf


def prepare_text(work):
    path = os.path.join(work, "text.txt")
    if not os.path.exists(path):
        with open(TEXT, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read(TEXT_BYTES).rsplit(b"\n", 1)[0] + b"\n")
    return path


# ---- eager: PyTorch, the same forward (child processes: `rotary_cpu.py eager|matmul ...`) ----

def read_safetensors(path):
    """name -> tensor viewing a private mapping of the file (pages read as the forward touches them)."""
    f = open(path, "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    types = {"F32": torch.float32, "BF16": torch.bfloat16}
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        dtype = types[h["dtype"]]
        count = (b - a) // torch.tensor([], dtype=dtype).element_size()
        out[name] = torch.frombuffer(buf, dtype=dtype, count=count, offset=8 + n + a).view(h["shape"])
    return out


def rms_norm(x, w, eps):  # statistics in float32, as transformers' LlamaRMSNorm
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w.to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def grouped_attention(q, k, v, block):
    """q (H, T, D) scaled, k and v (KV, T, D) -> (H, T, D): causal, `block` query rows at a time,
    the G = H / KV query heads of a group stacked as rows of one product with their key head."""
    H, T, D = q.shape
    KV = k.shape[0]
    G = H // KV
    out = torch.empty_like(q)
    for q0 in range(0, T, block):
        q1 = min(T, q0 + block)
        rows = q[:, q0:q1].reshape(KV, G * (q1 - q0), D)  # (KV, G Tq, D)
        scores = (rows @ k[:, :q1].transpose(1, 2)).float().view(KV, G, q1 - q0, q1)
        i = torch.arange(q0, q1).unsqueeze(1)
        scores.masked_fill_(torch.arange(q1).unsqueeze(0) > i, float("-inf"))
        probs = torch.softmax(scores, -1).to(q.dtype).view(KV, G * (q1 - q0), q1)
        out[:, q0:q1] = (probs @ v[:, :q1]).view(H, q1 - q0, D)
    return out


def eager_forward(w, cfg, ids, block, head_rows=1024):
    """Per-token NLL (T - 1,) of ids (T,): the Llama / Qwen2 forward of transformers' modeling files."""
    C, layers, H, KV, D, Fi, V = dims(cfg)
    T, eps, dtype = ids.shape[0], cfg["rms_norm_eps"], w["model.norm.weight"].dtype
    inv = 1.0 / cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float32) / D)
    angles = torch.outer(torch.arange(T, dtype=torch.float32), inv)
    cos, sin = torch.cat((angles, angles), -1).cos().to(dtype), torch.cat((angles, angles), -1).sin().to(dtype)
    x = w["model.embed_tokens.weight"][ids]  # (T, C)
    for l in range(layers):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(n, heads):  # (heads, T, D)
            return F.linear(h, w[p + f"self_attn.{n}.weight"], w.get(p + f"self_attn.{n}.bias")).view(
                T, heads, D).transpose(0, 1)

        q, k, v = proj("q_proj", H), proj("k_proj", KV), proj("v_proj", KV)
        q = (q * cos + rotate_half(q) * sin) * D ** -0.5
        k = k * cos + rotate_half(k) * sin
        y = grouped_attention(q, k, v, block).transpose(0, 1).reshape(T, H * D)
        x = x + F.linear(y, w[p + "self_attn.o_proj.weight"])
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + F.linear(F.silu(F.linear(h, w[p + "mlp.gate_proj.weight"])) * F.linear(h, w[p + "mlp.up_proj.weight"]),
                         w[p + "mlp.down_proj.weight"])
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    nll = []
    for r0 in range(0, T - 1, head_rows):  # the head a block of rows at a time: never (T, V) logits
        r1 = min(T - 1, r0 + head_rows)
        logp = torch.log_softmax((x[r0:r1] @ head.t()).float(), -1)
        nll.append(-logp.gather(1, ids[r0 + 1:r1 + 1].unsqueeze(1)).squeeze(1))
    return torch.cat(nll)


def eager_main(argv):
    """`rotary_cpu.py eager DIR L THREADS BLOCK`: the checkpoint's dtype is the compute dtype."""
    d, L, threads, block = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = read_safetensors(os.path.join(d, "model.safetensors"))
    ids = torch.randint(0, cfg["vocab_size"], (L,), generator=torch.Generator().manual_seed(L))
    with torch.no_grad():
        t0 = time.perf_counter()
        nll = eager_forward(w, cfg, ids, block)
        seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "mean_nll": nll.mean().item()}))


def matmul_main(argv):
    """`rotary_cpu.py matmul L C F DTYPE THREADS`: the machine's rate at a model's shapes: (L, C) x (C, F), best of 3 after one warm-up."""
    L, C, Fi, dtype, threads = int(argv[0]), int(argv[1]), int(argv[2]), TORCH_DTYPES[argv[3]], int(argv[4])
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    a, b = torch.randn(L, C).to(dtype), torch.randn(C, Fi).to(dtype)
    out = a @ b
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        torch.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"seconds": best, "flops": 2 * L * C * Fi}))


# ---- the rotation ----

def timed(cmd, env, timeout):
    """(stdout, peak RSS MB) of cmd under /usr/bin/time; raises on failure."""
    with tempfile.NamedTemporaryFile("r") as rss:
        r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True,
                           env=env, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"rc={r.returncode}: {' '.join(cmd)}\n{r.stderr.strip()[-2000:]}")
        return r.stdout, int(rss.read().split()[-1]) * 1024 / 1e6  # kB (KiB) -> MB


def run_xtrap(a, d, text, L, dtype, env):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eval.csv")
        _, rss = timed([a.xtrap, "eval", d, "--text", text, "--Lvalid", str(L), "--max-tokens", str(L), "--batch", "1",
                        "--threads", str(a.threads), "--dtype", dtype, "--no-progress", "--out", out], env, a.timeout)
        row = next(csv.DictReader(open(out)))
    if int(row["tokens_scored"]) != L:
        raise RuntimeError(f"xtrap scored {row['tokens_scored']} tokens, not {L}: {text} is too short")
    return float(row["tokens_per_s"]), rss


def run_eager(a, d, L, env):
    out, rss = timed([sys.executable, os.path.abspath(__file__), "eager", d, str(L), str(a.threads),
                      str(a.eager_block)], env, a.timeout)
    return L / json.loads(out.splitlines()[-1])["seconds"], rss


def run_llama_cpp(a, cfg, gguf, L, env):
    batch = a.llama_batch or L
    out, rss = timed(["node", os.path.join(HERE, "llama_cpp_prompt.mjs"), a.node_llama_cpp, gguf, str(L),
                      str(a.threads), str(batch), str(cfg["vocab_size"])], env, a.timeout)
    return L / json.loads(out.splitlines()[-1])["seconds"], rss


def run_matmul(a, cfg, L, dtype, env):
    C, Fi = cfg["hidden_size"], cfg["intermediate_size"]
    out, rss = timed([sys.executable, os.path.abspath(__file__), "matmul", str(L), str(C), str(Fi), dtype,
                      str(a.threads)], env, a.timeout)
    r = json.loads(out.splitlines()[-1])
    return r["flops"] / r["seconds"], rss


def machine_load():
    """The 1-minute load and the compiler processes running now (timings beside builds are wrong)."""
    load = open("/proc/loadavg").read().split()[0]
    ps = subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True).stdout.split()
    compilers = sum(1 for c in ps if c in ("cc1plus", "cc1", "nvcc", "ld"))
    return f"load {load}, {compilers} compiler processes"


def measure(a, model, dtype, L, work, text, env, runs):
    """--reps of every tool at one (model, dtype, length), the order rotating every rep."""
    cfg = MODELS[model]
    d, gguf = prepare(work, model, dtype)
    for rep in range(a.reps):
        order = a.tools[rep % len(a.tools):] + a.tools[:rep % len(a.tools)]
        for tool in order + ["matmul"]:
            t0 = time.time()
            row = dict(model=model, tool=tool, length=L, dtype=dtype, rep=rep, load=machine_load())
            try:
                if tool == "xtrap":
                    row["tokens_per_s"], row["peak_rss_mb"] = run_xtrap(a, d, text, L, dtype, env)
                elif tool == "eager":
                    row["tokens_per_s"], row["peak_rss_mb"] = run_eager(a, d, L, env)
                elif tool == "llama.cpp":
                    row["tokens_per_s"], row["peak_rss_mb"] = run_llama_cpp(a, cfg, gguf, L, env)
                else:
                    row["gflops_per_s"], row["peak_rss_mb"] = run_matmul(a, cfg, L, dtype, env)
                    row["gflops_per_s"] /= 1e9
                if tool != "matmul":
                    rows_of_logits = 1 if tool == "llama.cpp" else L
                    row["gflops_per_s"] = forward_flops(cfg, L, rows_of_logits) / (L / row["tokens_per_s"]) / 1e9
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                row["error"] = str(e).splitlines()[0][:300]
            runs.append(row)
            print(f"  {model} {dtype} L={L} rep {rep} {tool:9s}: "
                  + (f"error: {row['error']}" if "error" in row else
                     f"{num(row.get('tokens_per_s'), '8.1f'):>8s} tok/s  {row['gflops_per_s']:7.1f} GFLOP/s  "
                     f"{row['peak_rss_mb']:8.1f} MB")
                  + f"  ({time.time() - t0:.0f} s, {row['load']})", flush=True)


R0_MB = 185  # LibTorch, the 2,000-token tokenizer, the text: SmolLM2's peak at T = 256 less its other terms


def xtrap_rss_formula(cfg, L, dtype, query_block=256):
    """docs/pretrained.md, Memory: peak RSS (MB) of `xtrap eval` at batch 1, length L, from its live
    tensors: the weights as held, one block's activations at the gated MLP, one query block's scores."""
    C, layers, H, KV, D, Fi, V = dims(cfg)
    vectors = layers * (2 * C + (H * D + 2 * KV * D if cfg["model_type"] == "qwen2" else 0)) + C
    matrices = V * C * (1 if cfg["tie_word_embeddings"] else 2) + layers * (
        2 * C * H * D + 2 * C * KV * D + 3 * C * Fi)
    weights = 4 * (matrices + vectors) if dtype == "float32" else 2 * matrices + 4 * vectors
    Q = min(query_block, L, max(32, (1 << 20) // L))  # attention_plan.cpp attentionBlockRows
    per_token = 4 * (5 * C + 4 * Fi) if dtype == "float32" else 20 * C + 8 * Fi
    scores = (8 if dtype == "float32" else 10) * H * Q * L
    return R0_MB + (weights + per_token * L + scores) / 1e6


def summarize(runs):
    """Medians per (model, tool, length, dtype), each tool's FLOP rate against the matmul's."""
    keys = sorted({(r["model"], r["tool"], r["length"], r["dtype"]) for r in runs if "error" not in r},
                  key=lambda k: (list(MODELS).index(k[0]), k[3], k[2], (TOOLS + ["matmul"]).index(k[1])))
    out = []
    for k in keys:
        rs = [r for r in runs if (r["model"], r["tool"], r["length"], r["dtype"]) == k and "error" not in r]
        row = dict(zip(("model", "tool", "length", "dtype"), k), reps=len(rs))
        for f in ("tokens_per_s", "peak_rss_mb", "gflops_per_s"):
            vals = [r[f] for r in rs if r.get(f) is not None]
            row[f] = statistics.median(vals) if vals else None
        out.append(row)
    for row in out:
        peak = [m for m in out if m["tool"] == "matmul" and (m["model"], m["length"], m["dtype"]) ==
                (row["model"], row["length"], row["dtype"])]
        row["of_matmul"] = row["gflops_per_s"] / peak[0]["gflops_per_s"] if peak and row["tool"] != "matmul" else None
        if row["tool"] == "xtrap":
            row["rss_formula_mb"] = xtrap_rss_formula(MODELS[row["model"]], row["length"], row["dtype"])
    return out


CSV_FIELDS = ["model", "tool", "length", "dtype", "tokens_per_s", "peak_rss_mb", "gflops_per_s", "of_matmul",
              "rss_formula_mb", "reps"]
RUN_FIELDS = ["model", "tool", "length", "dtype", "rep", "tokens_per_s", "peak_rss_mb", "gflops_per_s", "load",
              "error"]


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def num(x, spec):
    return "-" if x is None or x == "" else format(float(x), spec)


def markdown(rows, header):
    """The table of OUT.csv: one line per (model, dtype, length, tool)."""
    lines = header + ["", "| model | dtype | L | tool | tokens/s | GFLOP/s | of matmul | peak RSS MB | formula MB |",
                      "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['dtype']} | {r['length']} | {r['tool']} | {num(r['tokens_per_s'], '.1f')} "
                     f"| {num(r['gflops_per_s'], '.1f')} | {num(r['of_matmul'], '.0%')} "
                     f"| {num(r['peak_rss_mb'], '.0f')} | {num(r.get('rss_formula_mb'), '.0f')} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("eager", "matmul"):
        return (eager_main if sys.argv[1] == "eager" else matmul_main)(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                usage="/usr/bin/python3 bench/rotary_cpu.py --work DIR [options]")
    p.add_argument("--work", required=True, help="checkpoints and GGUFs (GBs; outside the repository)")
    p.add_argument("--tools", default=",".join(TOOLS), help="comma list of " + ", ".join(TOOLS))
    p.add_argument("--models", default=",".join(MODELS), help="comma list of " + ", ".join(MODELS))
    p.add_argument("--lengths", default="2048,8192,16384")
    p.add_argument("--dtypes", default="float32", help="comma list of float32, bfloat16")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--xtrap", default=os.path.join(ROOT, "build", "xtrap"))
    p.add_argument("--node-llama-cpp", default="/tmp/nlc", help="npm --prefix holding node_modules/node-llama-cpp")
    p.add_argument("--llama-batch", type=int, default=0, help="llama.cpp batch = ubatch (default 0: the length)")
    p.add_argument("--eager-block", type=int, default=256, help="eager's attention query rows a block")
    p.add_argument("--timeout", type=int, default=3600, help="seconds a run")
    p.add_argument("--out", default=os.path.join(ROOT, "results", "rotary_cpu"), help="OUT.csv, OUT_runs.csv, OUT.md")
    a = p.parse_args()
    a.tools = a.tools.split(",")
    models, dtypes, lengths = a.models.split(","), a.dtypes.split(","), [int(x) for x in a.lengths.split(",")]
    for bad, known in ((set(a.tools) - set(TOOLS), TOOLS), (set(models) - set(MODELS), MODELS),
                       (set(dtypes) - set(TORCH_DTYPES), TORCH_DTYPES)):
        if bad:
            p.error(f"unknown {', '.join(sorted(bad))} (known: {', '.join(known)})")
    if "llama.cpp" in a.tools and not shutil.which("node"):
        p.error("llama.cpp runs through node (node-llama-cpp): node is not on PATH")
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ, OMP_WAIT_POLICY="passive")  # what xtrap re-executes itself with
    load = machine_load()
    print(f"{os.cpu_count()} cores, {load}", flush=True)
    text = prepare_text(a.work)
    runs = []
    for model in models:
        for dtype in dtypes:
            for L in lengths:
                measure(a, model, dtype, L, a.work, text, env, runs)
                write_csv(a.out + "_runs.csv", runs, RUN_FIELDS)
    rows = summarize(runs)
    write_csv(a.out + ".csv", rows, CSV_FIELDS)
    header = [f"Command: `/usr/bin/python3 bench/rotary_cpu.py {' '.join(sys.argv[1:])}`",
              f"Machine: {os.cpu_count()} cores, {a.threads} threads a tool; at the start {load}, "
              f"at the end {machine_load()}; medians of {a.reps}."]
    open(a.out + ".md", "w").write(markdown(rows, header))
    print(markdown(rows, header))


if __name__ == "__main__":
    main()
