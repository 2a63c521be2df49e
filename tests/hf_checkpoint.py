"""Hugging Face model directories written by hand for the pretrained tests (pretrained_check.py,
rotary_check.py, rotary_cli_check.py): config.json as transformers' save_pretrained writes it (json,
indent 2, keys sorted), weights in the safetensors format (an 8-byte little-endian header length, a
JSON header of name -> dtype, shape, data_offsets, the raw little-endian bytes), one file or sharded
with model.safetensors.index.json. And what those tests read back from `xtrap eval`: its CSV rows,
the token ids it cached beside a text, and what a row's NLL should be (the windows of
src/eval/windows.h, the counts of src/data/text_tokens.h)."""
import csv, json, os, shutil, struct, subprocess, sys
import torch
import torch.nn.functional as F

NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors):
    """One tensor's bytes in memory at a time (bench/rotary_cpu.py writes 4 GB files)."""
    header, offset = {}, 0
    for name, t in tensors.items():
        size = t.numel() * t.element_size()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors.values():
            f.write(tensor_bytes(t))


def write_config(d, config):
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")


def write_model(d, config, tensors, shards=1, tokenizer=None):
    """The directory d: config.json, the weights in `shards` files, and a copy of `tokenizer` (a
    tokenizer.json path) when given."""
    os.makedirs(d, exist_ok=True)
    write_config(d, config)
    names = list(tensors)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    else:
        weight_map = {}
        for s in range(shards):
            part = names[s::shards]
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            write_safetensors(os.path.join(d, file), {n: tensors[n] for n in part})
            weight_map.update({n: file for n in part})
        json.dump({"metadata": {}, "weight_map": weight_map}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    if tokenizer:
        with open(tokenizer, "rb") as src, open(os.path.join(d, "tokenizer.json"), "wb") as dst:
            dst.write(src.read())


def rand(g, *shape, scale=0.2, shift=0.0):
    return torch.randn(*shape, generator=g) * scale + shift


# ---- the tests' bookkeeping ----
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def finish():
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


# ---- what xtrap eval writes and reads ----
def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cached_ids(prefix):
    """The ids xtrap cached for a text, the one file named prefix* (text_tokens.h: "XTRAPBPE", format
    version, the text's size and hash, the id count at byte 32, then the ids as int32)."""
    folder, name = os.path.split(prefix)
    (cache,) = [f for f in os.listdir(folder) if f.startswith(name)]
    blob = open(os.path.join(folder, cache), "rb").read()
    count = struct.unpack("<Q", blob[32:40])[0]
    return torch.tensor(struct.unpack(f"<{count}i", blob[40:40 + 4 * count]))


def text_counts(text):
    """(bytes, words) bits per byte and word perplexity divide by: UTF-8 bytes; whitespace-separated
    words plus one per line end, a last line without its newline included (text_tokens.h)."""
    return len(text.encode("utf-8")), len(text.split()) + text.count("\n") + (0 if text.endswith("\n") else 1)


def decoder_windows(N, Lvalid, stride):
    """(start, length, score_from) of every window over x' = <context> x[0..N-1] (eval/windows.h): a
    window feeds x'[start, start + length), predicts the next token at each position, and scores the
    positions from score_from on, every target x[i] exactly once."""
    windows, covered, s = [], 0, 0
    while covered < N:
        T = min(Lvalid, N - s)
        windows.append((s, T, max(0, covered - s)))
        covered, s = s + T, s + stride
    return windows


def stream_nll(logits_of, ids, context, Lvalid, stride):
    """The summed NLL of the stream ids as `xtrap eval` scores it: logits_of(window ids (T,)) -> (T, V)
    on each window of decoder_windows, the first token predicted from `context`."""
    x = torch.cat([torch.tensor([context]), ids])
    total = 0.0
    for s, T, first in decoder_windows(len(ids), Lvalid, stride):
        logits = logits_of(x[s:s + T]).double()
        total += F.cross_entropy(logits[first:], x[s + first + 1:s + T + 1], reduction="sum").item()
    return total


def model_scenario(work, model_dir, stem, variant, description, wiki, blocks):
    """WORK/scen/STEM.toml: a scenario whose one variant VARIANT is a copy of model_dir evaluated on
    the WikiText directory wiki with the TOML `blocks` ([[eval]], [probe]); returns its path."""
    scen_dir = os.path.join(work, "scen")
    os.makedirs(scen_dir, exist_ok=True)
    shutil.copytree(model_dir, os.path.join(scen_dir, variant))
    path = os.path.join(scen_dir, stem + ".toml")
    with open(path, "w") as f:
        f.write(f'description = "{description}"\n\n[[variant]]\nname = "{variant}"\nmodel = "{variant}"\n'
                f'data = "{wiki}"\nthreads = 1\n\n' + blocks)
    return path

