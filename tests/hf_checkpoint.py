"""Hugging Face model directories written by hand for the pretrained tests (pretrained_check.py,
rotary_check.py): config.json as transformers' save_pretrained writes it (json, indent 2, keys
sorted), weights in the safetensors format (an 8-byte little-endian header length, a JSON header
of name -> dtype, shape, data_offsets, the raw little-endian bytes), one file or sharded with
model.safetensors.index.json."""
import json, os, struct
import torch

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
