"""Pretrained rotary (Llama-family) checkpoints end to end through the xtrap CLI: eval, probe and run on tiny
random directories with a tokenizer.json, against the float64 reference of rotary_reference.py.

    rotary_cli_check.py XTRAP

- `eval --text` / `--data` at lengths past max_position_embeddings, non-overlapping and sliding (the default
  stride, L_train / 2): the row's NLL is the reference's mean NLL over the windows of src/eval/windows.h
  (hf_checkpoint.stream_nll: the first token predicted from bos_token_id, every later window starting on a
  token of the text, each token scored once); bits per byte and word perplexity are that NLL over the text's
  UTF-8 bytes and words (docs/pretrained.md).
- `--interp` linear, ntk and yarn on a default-rope checkpoint (a = the longest Lvalid / L_train) and linear on
  a llama3 one (--scale): the reference with the frequencies composed as docs/pretrained.md, "--interp on top
  of a checkpoint's scaling", writes them (interpolated() below); the pairs the doc refuses exit non-zero with
  one line.
- `--extend` rerope+logn, lambda and a self-extend window covering the text: the reference's attention with
  each paper's seen keys and far positions (rerope_logn, lambda_mask below), the row naming the method.
- `--task passkey` with SentencePiece-style tokenizers (this vocabulary merges "▁4", a digit word one token;
  with those merges dropped, two, as Llama 2 writes them) and GPT-NeoX's byte-level one: a row per length and
  depth, each scoring trials x 5 digit words of answer tokens.
- `probe --dump-attn` of a grouped-query Mistral-style model with a window shorter than the dump and of a
  Gemma-2-style one (soft-caps, alternating windows): every layer's and query head's probabilities equal the
  reference's softmax; rows sum to 1; keys outside the window and after the query have probability 0.
- a scenario with `model = "DIR"`: `xtrap run`'s rows equal `xtrap eval`'s.
- hostile directories (rotary_reference.hostile_models) and a tokenizer.json with byte_fallback but no
  <0xHH> tokens: rc != 0 and one line.
"""
import json, math, os, shutil, sys, tempfile
import h5py
import torch

from hf_checkpoint import check, csv_rows, cached_ids, finish, model_scenario, run, stream_nll, text_counts, write_model
from rotary_reference import (checkpoint, config, cos_sin, head_dim, hostile_models, layer_window, reference_logits,
                              rope_parameters)

XTRAP = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
SENTENCEPIECE = os.path.join(HERE, "tokenizer", "sentencepiece-bpe_tokenizer.json")
NEOX = os.path.join(HERE, "tokenizer", "gpt-neox-20b_tokenizer.json")
TEXT = ("The tower was built in 1887 beside the river, and it stood 42 metres high until the storm of 1921.\n"
        "Its keeper, a quiet man from the northern valley, wrote every evening about the ships and the weather.\n"
        "\n"
        "Later the town grew around it: a market, two churches, a school — and a café naïve enough to\n"
        "serve tea at midnight. Visitors still climb the 312 steps to see the lake, the hills and the old road.\n"
        "The last line has no newline")
EVAL = ["--no-progress", "--threads", "1"]


def sentencepiece_id(token):
    return json.load(open(SENTENCEPIECE, encoding="utf-8"))["model"]["vocab"][token]


def llama(C=64, H=4, KV=2, layers=2, max_pos=32, V=2000, **extra):
    """A Llama-style config whose vocabulary holds the SentencePiece tokenizer's 2,000 ids, bos its <s>."""
    return config("llama", C, H, KV, layers, max_pos, V=V, bos_token_id=sentencepiece_id("<s>"), **extra)


def model_dir(name, cfg, tokenizer=SENTENCEPIECE, seed=1):
    d = os.path.join(work, name)
    tensors = checkpoint(seed, cfg)
    write_model(d, cfg, tensors, tokenizer=tokenizer)
    return d, tensors


def eval_rows(d, *args):
    """xtrap eval's rows, or the one-line error."""
    out = os.path.join(work, "eval.csv")
    r = run([XTRAP, "eval", d, *args, *EVAL, "--out", out])
    return (csv_rows(out), "") if r.returncode == 0 else (None, r.stderr.strip())


def one_line(err):
    return len(err.splitlines()) == 1 and "Traceback" not in err


# ---- the reference's NLL of a row ----
def interpolated(kind, a):
    """cos and sin of the full-attention layers under --interp kind at factor a on top of the checkpoint's own
    scaling (docs/pretrained.md): linear divides the positions by a; ntk replaces the base by base a^(d/(d-2))
    before the checkpoint's formula; yarn multiplies the checkpoint's frequencies by YaRN's per-pair factors,
    computed from the base, d and L_train = max_position_embeddings (the yarn ramp of rope_parameters with
    factor a over L_train, divided by the default frequencies), and cos and sin by 0.1 ln a + 1 on top of the
    checkpoint's attention factor."""
    def rope(cfg, base, scaling, T):
        d = int(head_dim(cfg) * cfg.get("partial_rotary_factor", 1.0))
        if kind == "ntk":
            base = base * a ** (d / (d - 2))
        inv, factor = rope_parameters(cfg, base, scaling, T)
        positions = torch.arange(T, dtype=torch.float64)
        if kind == "linear":
            positions = positions / a
        if kind == "yarn":
            yarn = {"rope_type": "yarn", "factor": a, "original_max_position_embeddings": cfg["max_position_embeddings"]}
            ramp, temperature = rope_parameters(cfg, base, yarn, T)
            inv, factor = inv * ramp / rope_parameters(cfg, base, None, T)[0], factor * temperature
        angles = positions[:, None] * inv[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos() * factor, emb.sin() * factor
    return rope


def expected_nll(tensors, cfg, ids, Lvalid, stride, rope=cos_sin, extension=None):
    """The reference's summed NLL of the text's ids as xtrap eval windows them."""
    return stream_nll(lambda window: reference_logits(tensors, cfg, window, rope=rope, extension=extension), ids,
                      cfg["bos_token_id"], Lvalid, stride)


def rerope_logn(w, L):
    """ReRoPE (bojone/rerope): pairs with i - j >= w turned by w (query at w, key at 0); logn: query i times
    max(1, ln(i + 1) / ln L)."""
    def of(T):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        scale = torch.clamp(torch.log(torch.arange(T, dtype=torch.float64) + 1) / math.log(L), min=1.0)
        return {"seen": torch.ones(T, T, dtype=torch.bool), "far": i - j >= w, "fq": torch.full((T,), w),
                "fk": torch.zeros(T, dtype=torch.long), "scale": scale}
    return of


def lambda_mask(n_global, local):
    """LM-Infinite: keys j < n_global or i - j < local; a key at distance >= the limit (= local) seen at the
    limit (query turned by it, key unturned)."""
    def of(T):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        return {"seen": (j < n_global) | (i - j < local), "far": i - j >= local, "fq": torch.full((T,), local),
                "fk": torch.zeros(T, dtype=torch.long), "scale": torch.ones(T, dtype=torch.float64)}
    return of


def check_row(row, total, N, what):
    """A perplexity row against the reference's summed NLL over N tokens: the mean, and bits per byte and word
    perplexity over the text's bytes and words."""
    nbytes, words = text_counts(TEXT)
    mean, bpb, wppl = total / N, total / math.log(2) / nbytes, math.exp(total / words)
    ok = (int(row["tokens_scored"]) == N and abs(float(row["nll"]) - mean) <= 1e-5 and int(row["text_bytes"]) == nbytes
          and int(row["text_words"]) == words and abs(float(row["bits_per_byte"]) - bpb) <= 1e-5 * bpb and
          abs(float(row["word_ppl"]) - wppl) <= 1e-4 * wppl)
    check(ok, f"{what}: nll {row['nll']} (reference {mean:.6f}) over {row['tokens_scored']}/{N} tokens, bits per "
              f"byte {row['bits_per_byte']} ({bpb:.6f}) over {row['text_bytes']}/{nbytes} bytes, word ppl "
              f"{row['word_ppl']} ({wppl:.4f}) over {row['text_words']}/{words} words")


work = tempfile.mkdtemp()
text_dir, wiki = os.path.join(work, "text"), os.path.join(work, "wiki")
os.makedirs(text_dir)
os.makedirs(wiki)
text_file = os.path.join(text_dir, "text.txt")
open(text_file, "w", encoding="utf-8").write(TEXT)
open(os.path.join(wiki, "wiki.test.raw"), "w", encoding="utf-8").write(TEXT)

# ---- eval --text / --data: non-overlapping and sliding windows past max_position_embeddings 32 ----
cfg = llama()
d, tensors = model_dir("llama", cfg)
lvalids, L = (24, 48), cfg["max_position_embeddings"]
rows, err = eval_rows(d, "--text", text_file, "--Lvalid", ",".join(map(str, lvalids)), "--mode", "both")
check(rows is not None and len(rows) == 4, f"eval --text --mode both: {len(rows) if rows else err} rows")
ids = cached_ids(text_file + ".xtrap-bpe-")
for row in rows or []:
    Lvalid, stride = int(row["Lvalid"]), int(row["stride"])
    check(stride == (Lvalid if row["mode"] == "nonoverlap" else min(L // 2, Lvalid)),
          f"{row['mode']} Lvalid {Lvalid}: stride {stride} (L_train / 2 = {L // 2} for sliding)")
    check_row(row, expected_nll(tensors, cfg, ids, Lvalid, stride), len(ids),
              f"llama GQA 4:2 --text Lvalid {Lvalid} {row['mode']} stride {stride}")
text_rows = rows

# ---- --interp: composed with a default checkpoint (a = 48 / 32) and with llama3 scaling (--scale 2.5) ----
rows, err = eval_rows(d, "--data", wiki, "--split", "test", "--Lvalid", "24,48", "--interp", "none,linear,ntk,yarn")
check(rows is not None and len(rows) == 8, f"eval --data --interp none,linear,ntk,yarn: {len(rows) if rows else err} rows")
data_rows = rows
for row in rows or []:
    a, Lvalid = float(row["scale"]), int(row["Lvalid"])
    want_a = 1.0 if row["interp"] == "none" else max(lvalids) / L
    check(a == want_a, f"--interp {row['interp']}: a = {a} (longest Lvalid / L_train = {want_a})")
    rope = cos_sin if row["interp"] == "none" else interpolated(row["interp"], a)
    check_row(row, expected_nll(tensors, cfg, ids, Lvalid, Lvalid, rope), len(ids),
              f"llama --data --interp {row['interp']} a={a:g} Lvalid {Lvalid}")
same = [(t, r) for t in text_rows or [] for r in data_rows or []
        if r["interp"] == "none" and t["mode"] == "nonoverlap" and t["Lvalid"] == r["Lvalid"]]
check(len(same) == 2 and all(t["nll"] == r["nll"] and t["tokens_scored"] == r["tokens_scored"] for t, r in same),
      "--data of a wiki.test.raw = --text of the same text: " + ", ".join(f"{t['nll']}/{r['nll']}" for t, r in same))

llama3 = llama(max_pos=128, rope_theta=1000.0, rope_scaling={
    "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32})
d3, tensors3 = model_dir("llama3", llama3, seed=2)
rows, err = eval_rows(d3, "--text", text_file, "--Lvalid", "48", "--interp", "linear", "--scale", "2.5")
if rows is None:
    check(False, f"llama3 --interp linear: {err}")
else:
    check_row(rows[0], expected_nll(tensors3, llama3, ids, 48, 48, interpolated("linear", 2.5)), len(ids),
              "llama3-scaled --interp linear a=2.5 Lvalid 48")
dynamic = llama(rope_scaling={"rope_type": "dynamic", "factor": 2.0})
d_dyn, _ = model_dir("dynamic", dynamic, seed=3)
for directory, kind, interp in ((d3, "llama3", "yarn"), (d3, "llama3", "ntk"), (d_dyn, "dynamic", "ntk"),
                                (d_dyn, "dynamic", "linear")):
    rows, err = eval_rows(directory, "--text", text_file, "--Lvalid", "48", "--interp", interp)
    check(rows is None and one_line(err) and f"--interp {interp}" in err and kind in err,
          f"--interp {interp} on a {kind} checkpoint is refused: {err!r}")

# ---- --extend on a pretrained checkpoint: ReRoPE + logn, LM-Infinite's lambda, a window covering the text ----
for args, extension, label in ((("rerope+logn", "--extend-window", "6"), rerope_logn(6, L), "rerope w=6 + logn"),
                               (("lambda", "--extend-sinks", "2", "--extend-window", "16"), lambda_mask(2, 16),
                                "lambda global=2 local=16 limit=16"),
                               (("self-extend", "--extend-window", "48"), None, "self-extend G=8 W=48")):
    rows, err = eval_rows(d, "--text", text_file, "--Lvalid", "48", "--extend", *args)
    if rows is None or len(rows) != 1:
        check(False, f"llama --extend {' '.join(args)}: {err}")
        continue
    check(rows[0]["extend"] == label, f"--extend {' '.join(args)}: the row records {rows[0]['extend']!r} ({label!r})")
    check_row(rows[0], expected_nll(tensors, cfg, ids, 48, 48, extension=extension), len(ids),
              f"llama --extend {' '.join(args)} Lvalid 48")

# ---- passkey: digit words of one token (this SentencePiece vocabulary, GPT-NeoX) and of two (Llama 2) ----
spm = json.load(open(SENTENCEPIECE, encoding="utf-8"))
spm["model"]["merges"] = [m for m in spm["model"]["merges"] if not (m[0] == "▁" and m[1].isdigit())]
split_digits = os.path.join(work, "llama2-digits_tokenizer.json")
json.dump(spm, open(split_digits, "w", encoding="utf-8"), ensure_ascii=False)
neox_cfg = llama(C=32, layers=1, V=50304, tied=True)
for name, tokenizer, digit_tokens, cfg_k in (("sentencepiece", SENTENCEPIECE, 1, cfg),
                                             ("sentencepiece-split-digits", split_digits, 2, cfg),
                                             ("gpt-neox", NEOX, 1, neox_cfg)):
    dk, _ = model_dir("passkey-" + name, cfg_k, tokenizer)
    for source in (["--text", text_file, "--filler", "repeat"], ["--data", wiki, "--split", "test", "--filler", "natural"]):
        rows, err = eval_rows(dk, "--task", "passkey", "--Lvalid", "128,160", "--depths", "0,50,100", "--trials", "2",
                              *source)
        what = f"passkey, {name} tokenizer, {source[0]} {source[-1]} filler"
        if rows is None:
            check(False, f"{what}: {err}")
            continue
        answers = {int(r["tokens_scored"]) for r in rows}
        check(len(rows) == 6 and {(r["Lvalid"], r["depth"]) for r in rows} == {
            (l, dp) for l in ("128", "160") for dp in ("0", "50", "100")} and all(
            r["task"] == "passkey" and r["trials"] == "2" and 0 <= float(r["accuracy"]) <= 1 for r in rows) and
            answers == {2 * 5 * digit_tokens},
            f"{what}: {len(rows)} rows (2 lengths x 3 depths) of 2 trials, answer tokens {sorted(answers)} "
            f"(2 trials x 5 digits x {digit_tokens})")


# ---- --format native and --score generate: the KV-cache generation equals the reference's greedy decoding ----
def reference_greedy(tensors, cfg, ids, n):
    ids = list(ids)
    for _ in range(n):
        ids.append(int(reference_logits(tensors, cfg, torch.tensor(ids))[-1].argmax()))
    return ids[-n:]


for task, Lvalid, new_tokens in (("passkey", "160", 10), ("kv-lines", "400", 15)):
    samples = os.path.join(work, f"native-{task}.jsonl")
    rows, err = eval_rows(d, "--task", task, "--format", "native", "--Lvalid", Lvalid, "--depths", "0,100",
                          "--trials", "2", "--log-samples", samples)
    if rows is None:
        check(False, f"--format native --task {task}: {err}")
        continue
    lines = [json.loads(l) for l in open(samples, encoding="utf-8")]
    check(len(rows) == 2 and all(r["mode"] == "native" for r in rows) and len(lines) == 4,
          f"--format native --task {task}: {len(rows)} rows of mode {[r['mode'] for r in rows]}, {len(lines)} samples")
    for j in lines:
        want = reference_greedy(tensors, cfg, j["prompt_ids"], new_tokens)
        got = j["predicted_tokens"]
        digits = [c for c in j["predicted"].replace("<", " ").replace(">", " ").split() if c.isdigit()]
        check(got == want[:len(got)] and (len(got) == new_tokens or got[-1] == cfg["eos_token_id"]),
              f"native {task} depth {j['depth']} trial {j['trial']}: xtrap generated {got}, reference {want}")
        check(len(j["prompt_ids"]) == j["prompt_tokens"] <= int(Lvalid) and
              j["correct"] == (j["parsed"] == j["gold"]) and j["parsed"].isdigit() == bool(j["parsed"]),
              f"native {task}: prompt of {j['prompt_tokens']} <= {Lvalid} tokens, parsed {j['parsed']!r} "
              f"against {j['gold']!r}, correct {j['correct']}")
    check(sum(j["correct"] for j in lines if j["depth"] == 0) == int(rows[0]["correct"]),
          f"native {task}: the samples recount the depth-0 row")
rows, err = eval_rows(d, "--task", "passkey", "--score", "generate", "--Lvalid", "128", "--depths", "50",
                      "--trials", "2", "--text", text_file)
teacher, err2 = eval_rows(d, "--task", "passkey", "--Lvalid", "128", "--depths", "50", "--trials", "2",
                          "--text", text_file)
check(rows is not None and teacher is not None and rows[0]["mode"] == "generate" and
      rows[0]["correct"] == teacher[0]["correct"],
      f"--score generate against teacher forcing at the answer's length: {err or err2 or (rows[0], teacher[0])}")

# ---- probe --dump-attn: a window shorter than the dump, GQA, soft-caps ----
def probe_check(name, cfg, N, offset):
    d, tensors = model_dir("probe-" + name, cfg, seed=4)
    h5 = os.path.join(work, name + ".h5")
    r = run([XTRAP, "probe", d, "--dump-attn", h5, "--text", text_file, "--Lvalid", str(N), "--offset", str(offset),
             "--threads", "1", "--store-dtype", "float32"])
    if r.returncode != 0:
        check(False, f"probe --dump-attn of {name}: {r.stderr.strip()}")
        return
    window = ids[offset:offset + N]
    probs = []
    reference_logits(tensors, cfg, window, probs=probs)
    i, j = torch.arange(N)[:, None], torch.arange(N)[None, :]
    with h5py.File(h5, "r") as f:
        check(list(f["tokens"][:]) == window.tolist(), f"{name}: the dump's tokens are the text's {offset}..{offset + N}")
        for l, want in enumerate(probs):
            got = torch.tensor(f[f"layer_{l:02d}/attn"][:]).double()  # (H, N, N)
            W = layer_window(cfg, l)
            outside = (j > i) | ((j <= i - W) if W else torch.zeros(N, N, dtype=torch.bool))
            diff = (got - want).abs().max().item() if got.shape == want.shape else float("inf")
            sums = (got.sum(-1) - 1).abs().max().item()
            check(diff <= 1e-5 and sums <= 1e-5 and bool((got[:, outside] == 0).all()),
                  f"{name} layer {l} (window {W}): {tuple(got.shape)} max |p - reference| {diff:.1e}, "
                  f"max |row sum - 1| {sums:.1e}, {int((got[:, outside] != 0).sum())} nonzero outside")


probe_check("mistral", config("mistral", 32, 4, 2, 2, 16, V=2000, sliding_window=8), 24, 5)
probe_check("gemma2", config("gemma2", 32, 4, 2, 3, 16, V=2000, tied=True, head_dim=16, query_pre_attn_scalar=24,
                             sliding_window=8, attn_logit_softcapping=5.0, final_logit_softcapping=3.0), 24, 3)

# ---- a scenario naming the rotary model: its rows = xtrap eval's ----
scenario = model_scenario(work, d, "rotary-smoke", "llama-tiny", "a tiny random Llama evaluated as it is", wiki, """[[eval]]
lvalid = [24, 48]
interps = ["none", "linear", "ntk", "yarn"]
split = "test"
""")
results = os.path.join(work, "results")
r = run([XTRAP, "run", scenario, "--no-progress", "--results", results, "--runs", os.path.join(work, "runs")])
check(r.returncode == 0, "xtrap run of a rotary pretrained variant" + ("" if r.returncode == 0 else ": " + r.stderr[-800:]))
if r.returncode == 0 and data_rows:
    got = {(b["Lvalid"], b["interp"]): b for b in csv_rows(os.path.join(results, "rotary-smoke", "results.csv"))}
    want = {(w["Lvalid"], w["interp"]): w for w in data_rows}
    fields = ("tokens_scored", "nll", "scale", "bits_per_byte", "word_ppl")
    differ = [(k, f) for k in want for f in fields if k not in got or got[k][f] != want[k][f]]
    check(got.keys() == want.keys() and not differ,
          f"scenario rows = xtrap eval --data rows ({len(got)}/{len(data_rows)}; {', '.join(fields)}): differ {differ}")

# ---- train --init from a Llama directory (GQA 4:2, SentencePiece): YaRN baked in, its export a Llama again ----
# One step at lr 1e-12 at L = 48 with YaRN at a = 48 / 32: `eval RUN` with no flags scores what the reference
# scores with rope_scaling {yarn, 1.5, original 32}; `export RUN --hf` writes a llama directory of the source's
# tensor names (q/k/v and gate/up split again) whose config the reference computes the same numbers from.
init_wiki = os.path.join(work, "wiki-init")
os.makedirs(init_wiki)
for split in ("train", "valid", "test"):
    open(os.path.join(init_wiki, f"wiki.{split}.raw"), "w", encoding="utf-8").write(TEXT * 3)
adapted = os.path.join(work, "llama-yarn")
r = run([XTRAP, "train", "--init", d, "--L", "48", "--interp", "yarn", "--data", init_wiki, "--steps", "1", "--lr",
         "1e-12", "--warmup", "0", "--batch", "2", "--eval-tokens", "64", "--out", adapted, *EVAL])
check(r.returncode == 0, "train --init from a llama directory" + ("" if r.returncode == 0 else ": " + r.stderr))
if r.returncode == 0:
    yarn_cfg = dict(cfg, max_position_embeddings=48,
                    rope_scaling={"rope_type": "yarn", "factor": 1.5, "original_max_position_embeddings": 32})
    init_ids = cached_ids(os.path.join(init_wiki, "wiki.test.raw.xtrap-bpe-"))
    rows, err = eval_rows(adapted, "--split", "test", "--Lvalid", "48")
    if rows is None:
        check(False, f"eval of the adapted llama run: {err}")
    else:
        want = expected_nll(tensors, yarn_cfg, init_ids, 48, 48) / len(init_ids)
        check(int(rows[0]["tokens_scored"]) == len(init_ids) and abs(float(rows[0]["nll"]) - want) <= 1e-5,
              f"adapted llama run, yarn a=1.5, Lvalid 48: nll {rows[0]['nll']} (reference {want:.6f})")
        exported = adapted + "-hf"
        r = run([XTRAP, "export", adapted, "--hf", exported])
        check(r.returncode == 0, "export --hf of the adapted llama run" + ("" if r.returncode == 0 else ": " + r.stderr))
        if r.returncode == 0:
            written = json.load(open(os.path.join(exported, "config.json")))
            blob = open(os.path.join(exported, "model.safetensors"), "rb").read()
            header = json.loads(blob[8:8 + int.from_bytes(blob[:8], "little")])
            names = sorted(n for n in header if n != "__metadata__")
            check(written["model_type"] == "llama" and written["max_position_embeddings"] == 48 and
                  written["rope_scaling"]["rope_type"] == "yarn" and written["rope_scaling"]["factor"] == 1.5 and
                  written["rope_scaling"]["original_max_position_embeddings"] == 32,
                  f"exported llama config: {written['model_type']}, {written['max_position_embeddings']}, "
                  f"{written['rope_scaling']}")
            check(names == sorted(tensors), f"exported tensor names are the source's ({len(names)} / {len(tensors)})")
            stored = {n: torch.frombuffer(bytearray(blob[8 + int.from_bytes(blob[:8], "little") + h["data_offsets"][0]:
                                                         8 + int.from_bytes(blob[:8], "little") + h["data_offsets"][1]]),
                                          dtype=torch.float32).view(h["shape"]) for n, h in header.items()
                      if n != "__metadata__"}
            want2 = expected_nll(stored, written, init_ids, 48, 48) / len(init_ids)
            check(abs(float(rows[0]["nll"]) - want2) <= 1e-5,
                  f"the reference on the exported directory: nll {want2:.6f} (run {rows[0]['nll']})")

# Every other rotary family trains from its directory (two steps, linear at a = 2) and its export scores the
# run's NLL; Phi-3's config reads its length from original_max_position_embeddings, so its export is refused.
for family in ("mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3"):
    fam_cfg = config(family, 64, 4, 2, 2, 32, V=2000)
    fam_dir, _ = model_dir(f"init-{family}", fam_cfg)
    fam_run = os.path.join(work, f"init-{family}-run")
    r = run([XTRAP, "train", "--init", fam_dir, "--L", "64", "--interp", "linear", "--data", init_wiki, "--steps", "2",
             "--batch", "2", "--eval-tokens", "64", "--out", fam_run, *EVAL])
    if r.returncode != 0:
        check(False, f"train --init from a {family} directory: {r.stderr.strip()}")
        continue
    r = run([XTRAP, "export", fam_run, "--hf", fam_run + "-hf"])
    if family == "phi3":
        check(r.returncode != 0 and one_line(r.stderr.strip()) and "L = 64" in r.stderr and
              not os.path.exists(fam_run + "-hf"), f"phi3 export of a linear-scaled run refused in one line: "
              f"{r.stderr.strip()!r}")
        continue
    own, err = eval_rows(fam_run, "--split", "test", "--Lvalid", "64")
    exported, err2 = eval_rows(fam_run + "-hf", "--data", init_wiki, "--split", "test", "--Lvalid", "64")
    check(r.returncode == 0 and own is not None and exported is not None and own[0]["nll"] == exported[0]["nll"],
          f"{family}: the export scores the run's nll ({own[0]['nll'] if own else err} / "
          f"{exported[0]['nll'] if exported else err2 or r.stderr.strip()})")

# ---- hostile directories through xtrap eval: one line, rc != 0 ----
for name, dh, needles in hostile_models(work, V=2000, tokenizer=SENTENCEPIECE):
    rows, err = eval_rows(dh, "--text", text_file, "--Lvalid", "16")
    check(rows is None and one_line(err) and any(n in err for n in needles),
          f"hostile {name} (xtrap eval): {err!r}")
no_bytes = json.load(open(SENTENCEPIECE, encoding="utf-8"))
kept = sorted((i, t) for t, i in no_bytes["model"]["vocab"].items() if not t.startswith("<0x"))
no_bytes["model"]["vocab"] = {t: n for n, (_, t) in enumerate(kept)}
dh, _ = model_dir("hostile-byte-fallback", llama())
json.dump(no_bytes, open(os.path.join(dh, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
rows, err = eval_rows(dh, "--text", text_file, "--Lvalid", "16")
check(rows is None and one_line(err) and "tokenizer.json" in err,
      f"hostile tokenizer.json with byte_fallback and no <0xHH> tokens (xtrap eval): {err!r}")

shutil.rmtree(work)
finish()
