#!/usr/bin/python3
"""option_walk.py XTRAP: every option of every xtrap command, enumerated from `xtrap CMD --help`,
is exercised and must do what a researcher expects of it:

  changes   given (in a context where it applies), the command's results differ from the same
            command without it: training losses and validation loss, evaluation rows, HDF5
            datasets and attributes, PNG bytes, printed output;
  rejected  given where it cannot apply, the command exits 1 with one line `xtrap: error: ...`;
  same      a knob that by design changes only speed, resources or what is printed: the results
            equal the baseline's (numbers to 1e-5 relative + 1e-6); the table says why;
  output    it names where results go: the file or directory appears there.

An option in --help but missing from CASES fails the test (so a new option must be classified),
and so does a CASES entry that --help no longer lists. Needs python3-h5py (Debian).
"""
import concurrent.futures
import csv
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

XTRAP = os.path.abspath(sys.argv[1])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = tempfile.mkdtemp(prefix="xtrap-option-walk-")
# OTHER: the same training split (so the same vocabulary), other valid and test text.
DATA, OTHER = f"{W}/data", f"{W}/other"
for d, skip in ((DATA, 0), (OTHER, 300)):
    os.makedirs(d)
    for split in ("train", "valid", "test"):
        with open(f"{ROOT}/data/wikitext-2/wiki.{split}.tokens") as src, open(f"{d}/wiki.{split}.tokens", "w") as dst:
            lines = src.readlines()
            first = 0 if split == "train" else skip
            dst.writelines(lines[first:first + 300])
            if split == "train":  # every word of the retrieval prompts (src/data/retrieval_prompt.cpp)
                dst.write(" there is an important information hidden inside a lot of irrelevant text . find it and "
                          "remember i will quiz you about the grass green sky blue sun yellow here we go back again "
                          "pass key what ? line value : in 0 1 2 3 4 5 6 7 8 9 red black white old new small large "
                          "great long high early late major young dark bright strong main local royal northern "
                          "southern eastern western free final golden silver ancient modern quiet wild open lost "
                          "broken heavy light deep river city house army ship king road song film game church school "
                          "island bridge tower station castle garden village forest lake mountain street market "
                          "court temple hill valley field horse queen star stone wall gate door tree\n")

counter = 0


def fresh(name):
    global counter
    counter += 1
    return f"{W}/{name}{counter}"


def run(args):
    p = subprocess.run([XTRAP] + args, capture_output=True, text=True, cwd=W)
    return p.returncode, p.stdout, p.stderr


def argv(cmd, positional, options):
    out = [cmd] + positional
    for k, v in options.items():
        out += [k] if v is None else [k, v]
    return out


# --- fingerprints: what a command produced, as (label, value) pairs ---------------------------
def train_fp(run_dir):
    rows = [json.loads(l) for l in open(f"{run_dir}/train.jsonl")]
    keep = ("step", "loss", "lr", "grad_norm", "val_loss", "tokens")
    extra = json.load(open(f"{run_dir}/run.json"))["extra"]
    return [("log", [{k: r[k] for k in keep if k in r} for r in rows]),
            ("final", [extra["final_val_loss"], extra["parameters"]])]


def csv_fp(path):
    # device and dtype label the rows: --dtype must change the numbers, not only the label.
    drop = ("seconds", "tokens_per_s", "flop_per_s", "run", "device", "dtype")
    return [("rows", [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(open(path))])]


def h5_fp(path):
    items = []
    with h5py.File(path) as f:
        items.append(("attrs", {k: str(v) for k, v in f.attrs.items() if k != "xtrap_version"}))
        f.visititems(lambda name, obj: items.append((name, np.asarray(obj[()]).astype(float).tolist()))
                     if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "fiu" else None)
    return items


def bytes_fp(path):
    return [("sha256", hashlib.sha256(open(path, "rb").read()).hexdigest())]


def close(a, b):
    if isinstance(a, float) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 1e-6  # probabilities near 0: absolute
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str) and a != b:  # numbers inside CSV cells
        try:
            return close(float(a), float(b))
        except ValueError:
            return False
    return a == b


# --- the commands: a baseline invocation and how its results are read ---------------------------
TINY = {"--data": DATA, "--layers": "1", "--d-model": "16", "--heads": "2", "--ffn": "32", "--L": "16",
        "--steps": "3", "--batch": "2", "--eval-tokens": "64", "--eval-every": "0", "--threads": "1",
        "--adaptive-softmax": "none", "--log-every": "1", "--warmup": "1", "--dropout": "0", "--no-progress": None}

# Runs the eval / probe / plot / export cases read (trained once).
DEC_RUN, ENC_RUN, ROT_RUN, ALIBI3_RUN = f"{W}/dec", f"{W}/enc", f"{W}/rot", f"{W}/alibi3"
for d, extra in ((DEC_RUN, {"--layers": "2"}), (ENC_RUN, {"--layers": "2", "--arch": "encoder"}),
                 (ROT_RUN, {"--layers": "2", "--pos": "rotary"}),
                 (ALIBI3_RUN, {"--layers": "2", "--heads": "3", "--d-model": "24"})):
    opts = dict(TINY, **extra, **{"--out": d})
    if extra.get("--arch") == "encoder":
        del opts["--adaptive-softmax"]
    rc, _, err = run(argv("train", [], opts))
    assert rc == 0, err
# What --device auto resolved to (run.json records it): cpu where this LibTorch or machine has no
# CUDA, and then --device cuda must be rejected.
AUTO_DEVICE = json.load(open(f"{DEC_RUN}/run.json"))["train"]["device"]
NO_CUDA = AUTO_DEVICE == "cpu"


def do_train(options):
    out = fresh("train")
    rc, _, err = run(argv("train", [], dict({k: v for k, v in options.items()}, **{"--out": options.get("--out", out)})))
    return rc, err, (lambda: train_fp(options.get("--out", out)))


def do_eval(options, positional=(DEC_RUN,)):
    out = fresh("eval") + ".csv"
    opts = dict(options)
    opts.setdefault("--out", out)
    per, samples = opts.get("--per-position"), opts.get("--log-samples")
    rc, _, err = run(argv("eval", list(positional), opts))
    return rc, err, (lambda: csv_fp(opts["--out"]) + (csv_fp(per) if per else []) +
                     ([("samples", open(samples).read().splitlines())] if samples else []))


# A tiny pretrained MPT directory (config.json, model.safetensors, tokenizer.json) and two texts for --text.
HF_DIR, TEXT1, TEXT2 = f"{W}/mpt-tiny", f"{W}/text1.txt", f"{W}/text2.txt"
os.makedirs(HF_DIR)
_rng = np.random.default_rng(0)
_C, _V = 8, 50304
_tensors = {"transformer.wte.weight": (_V, _C), "transformer.norm_f.weight": (_C,),
            "transformer.blocks.0.norm_1.weight": (_C,), "transformer.blocks.0.norm_2.weight": (_C,),
            "transformer.blocks.0.attn.Wqkv.weight": (3 * _C, _C), "transformer.blocks.0.attn.out_proj.weight": (_C, _C),
            "transformer.blocks.0.ffn.up_proj.weight": (4 * _C, _C), "transformer.blocks.0.ffn.down_proj.weight": (_C, 4 * _C)}
_header, _blobs, _offset = {}, [], 0
for _name, _shape in _tensors.items():
    _b = _rng.normal(size=_shape).astype("<f4").tobytes()
    _header[_name] = {"dtype": "F32", "shape": list(_shape), "data_offsets": [_offset, _offset + len(_b)]}
    _blobs.append(_b)
    _offset += len(_b)
_h = json.dumps(_header).encode()
with open(f"{HF_DIR}/model.safetensors", "wb") as _f:
    _f.write(len(_h).to_bytes(8, "little") + _h + b"".join(_blobs))
with open(f"{HF_DIR}/config.json", "w") as _f:
    json.dump({"model_type": "mpt", "vocab_size": _V, "d_model": _C, "n_layers": 1, "n_heads": 2, "max_seq_len": 16,
               "no_bias": True, "attn_config": {"alibi": True, "alibi_bias_max": 8}}, _f)
shutil.copy(f"{ROOT}/tests/tokenizer/gpt-neox-20b_tokenizer.json", f"{HF_DIR}/tokenizer.json")
with open(TEXT1, "w") as _f:
    _f.write("The grass is green. The sky is blue, and the sun is yellow.\n" * 4)
with open(TEXT2, "w") as _f:
    _f.write("Here we go, there and back again; nothing is ever quite the same.\n" * 4)


# Two WikiText directories with only the tokenized files, for a pretrained model's --data.
WIKI1, WIKI2 = f"{W}/wiki1", f"{W}/wiki2"
for _dir, _text in ((WIKI1, " = Grass = \n The grass is green , the sky is blue ( mostly ) .\n" * 6),
                    (WIKI2, " = Roads = \n Here we go @-@ there and back again ; nothing stays .\n" * 6)):
    os.makedirs(_dir)
    for _split in ("train", "valid", "test"):
        with open(f"{_dir}/wiki.{_split}.tokens", "w") as _f:
            _f.write(_text)


def do_eval_pretrained(options):
    return do_eval(options, (HF_DIR,))


def do_eval_encoder(options):  # --mode pll applies to encoders
    return do_eval(options, (ENC_RUN,))


def do_eval_rotary(options):  # yarn applies to rotary runs only
    return do_eval(options, (ROT_RUN,))


def do_eval_three_heads(options):  # --ntk-heads: the two rules differ only when H is not a power of 2
    return do_eval(options, (ALIBI3_RUN,))


def do_probe_pretrained(options):  # positional: HF_DIR (invoke)
    return do_probe(options, (HF_DIR,))


def do_probe(options, positional=()):
    opts = dict(options)
    rc, stdout, err = run(argv("probe", list(positional), opts))
    files = [opts[k] for k in ("--dump-bias", "--dump-attn") if k in opts]
    pngs = [opts["--plot"]] if "--plot" in opts else []
    return rc, err, (lambda: sum((h5_fp(f) for f in files), []) + sum((bytes_fp(p) for p in pngs), [])
                     + [("stdout", stdout)])


SCENARIO = f"{W}/tiny.toml"
with open(SCENARIO, "w") as f:
    f.write(f'description = "option walk"\n[train]\ndata = "{DATA}"\nL = 16\nlayers = 1\nd_model = 16\n'
            'heads = 2\nffn = 32\ndropout = 0.0\nsteps = 2\nbatch = 2\neval_every = 0\neval_tokens = 64\n'
            'threads = 1\n[[variant]]\nname = "alibi"\npos = "alibi"\n[eval]\nlvalid = "16..32"\n')


def do_run(options):
    opts = dict(options)
    opts.setdefault("--runs", fresh("runs"))
    opts.setdefault("--results", fresh("results"))
    rc, stdout, err = run(argv("run", [SCENARIO], opts))
    table = f"{opts['--results']}/tiny/results.csv"
    return rc, err, (lambda: (csv_fp(table) if os.path.exists(table) else [("no results", None)])
                     + [("stdout", re.sub(r"results: .*", "", stdout))])


EVAL_CSV = f"{W}/for-plot.csv"
assert run(argv("eval", [DEC_RUN], {"--Lvalid": "16,32", "--max-tokens": "300", "--threads": "1",
                                     "--no-progress": None, "--out": EVAL_CSV}))[0] == 0


def do_plot(options):
    opts = dict(options)
    opts.setdefault("--out", fresh("plot") + ".png")
    rc, _, err = run(argv("plot", [EVAL_CSV], opts))
    return rc, err, (lambda: bytes_fp(opts["--out"]))


def do_export(options):  # RUN OUT, or RUN --hf DIR (the ALiBi decoder: an mpt directory)
    opts = dict(options)
    positional = [DEC_RUN] if "--hf" in opts else [DEC_RUN, fresh("export")]
    rc, _, err = run(argv("export", positional, opts))
    return rc, err, (lambda: None)


EVAL = {"--Lvalid": "16,32", "--max-tokens": "300", "--threads": "1", "--no-progress": None}
# Retrieval: passkey prompts of 80 tokens (the format's shortest is 67), two depths, two trials.
RET = {"--task": "passkey", "--filler": "repeat", "--Lvalid": "80", "--depths": "0,100", "--trials": "2",
       "--threads": "1", "--no-progress": None}
BIAS = {"--arch": "encoder", "--pos": "alibi", "--heads": "2", "--len": "4"}
ATTN_HF = {"--Lvalid": "12", "--offset": "2", "--threads": "1", "--dump-attn": "A"}
ATTN = {"--Lvalid": "24", "--offset": "10", "--threads": "1"}


# --- the cases ---------------------------------------------------------------------------------
# Each: command, option, kind, runner, baseline options, the option's own setting (merged over the
# baseline; a value None is a flag, "DEL" removes a key), and for `output` the path that must appear.
def case(cmd, opt, kind, runner, base, change, why="", path=None):
    return dict(cmd=cmd, opt=opt, kind=kind, runner=runner, base=base, change=change, why=why, path=path)


def with_(d, **kw):
    out = dict(d)
    for k, v in kw.items():
        out[k] = v
    return out


T = TINY
TE = dict({k: v for k, v in TINY.items() if k != "--adaptive-softmax"}, **{"--arch": "encoder", "--pos": "alibi"})
# train --init: the rotary run adapted to 2L (its model's flags are the source's).
TI = {k: v for k, v in TINY.items() if k not in ("--layers", "--d-model", "--heads", "--ffn", "--adaptive-softmax",
                                                   "--dropout")}
TI["--L"] = "32"
TI_INIT = with_(TI, **{"--init": ROT_RUN})
CASES = [
    case("train", "--arch", "changes", do_train, T, {"--arch": "encoder", "--adaptive-softmax": "DEL"}),
    case("train", "--pos", "changes", do_train, T, {"--pos": "rotary"}),
    case("train", "--pos", "changes", do_train, T, {"--pos": "kerple-log"}),
    case("train", "--pos", "changes", do_train, T, {"--pos": "fire"}),
    case("train", "--pos", "changes", do_train, TE, {"--pos": "kerple-log"}),
    case("train", "--pos", "changes", do_train, TE, {"--pos": "fire"}),
    case("train", "--config", "changes", do_train, TE, {"--config": "baseline", "--arch": "DEL", "--pos": "DEL"}),
    case("train", "--config", "rejected", do_train, TE, {"--config": "baseline"}),
    case("train", "--head", "changes", do_train, TE, {"--head": "roberta"}),
    case("train", "--L", "changes", do_train, T, {"--L": "8"}),
    case("train", "--layers", "changes", do_train, T, {"--layers": "2"}),
    case("train", "--d-model", "changes", do_train, T, {"--d-model": "32"}),
    case("train", "--heads", "changes", do_train, T, {"--heads": "4"}),
    case("train", "--ffn", "changes", do_train, T, {"--ffn": "64"}),
    case("train", "--dropout", "changes", do_train, T, {"--dropout": "0.3"}),
    case("train", "--max-positions", "changes", do_train, with_(T, **{"--pos": "learned"}), {"--max-positions": "64"}),
    case("train", "--max-positions", "rejected", do_train, T, {"--max-positions": "64"}),
    case("train", "--adaptive-softmax", "changes", do_train, T, {"--adaptive-softmax": "100,400"}),
    case("train", "--config", "changes", do_train, T, {"--config": "paper-wt103", "--adaptive-softmax": "100,400"}),
    case("train", "--activation", "changes", do_train, T, {"--activation": "relu"}),
    case("train", "--no-final-norm", "changes", do_train, T, {"--no-final-norm": None}),
    case("train", "--attention-dropout", "changes", do_train, T, {"--attention-dropout": "0.3"}),
    case("train", "--activation-dropout", "changes", do_train, T, {"--activation-dropout": "0.3"}),
    case("train", "--adaptive-softmax-dropout", "changes", do_train, with_(T, **{"--adaptive-softmax": "100,400"}),
         {"--adaptive-softmax-dropout": "0.3"}),
    case("train", "--adaptive-softmax-dropout", "rejected", do_train, T, {"--adaptive-softmax-dropout": "0.3"}),
    case("train", "--adaptive-input", "changes", do_train, with_(T, **{"--adaptive-softmax": "100,400"}),
         {"--adaptive-input": None}),
    case("train", "--adaptive-input", "rejected", do_train, T, {"--adaptive-input": None}),
    case("train", "--alibi-init", "changes", do_train, with_(TE, **{"--pos": "alibi-learned"}),
         {"--alibi-init": "standard"}),
    case("train", "--alibi-init", "rejected", do_train, T, {"--alibi-init": "standard"}),
    case("train", "--bos", "changes", do_train, TE, {"--bos": None}),
    case("train", "--bos", "rejected", do_train, T, {"--bos": None}),
    case("train", "--no-bos", "changes", do_train, with_(TE, **{"--pos": "bialibi"}), {"--no-bos": None}),
    case("train", "--no-bos", "rejected", do_train, T, {"--no-bos": None}),
    case("train", "--clap-beta", "changes", do_train, with_(TE, **{"--head": "clap"}), {"--clap-beta": "3"}),
    case("train", "--clap-beta", "rejected", do_train, T, {"--clap-beta": "3"}),
    case("train", "--no-scale-embedding", "changes", do_train, T, {"--no-scale-embedding": None}),
    case("train", "--data", "changes", do_train, T, {"--data": OTHER}),
    case("train", "--out", "output", do_train, T, {"--out": f"{W}/named-run"}, path=f"{W}/named-run/run.json"),
    case("train", "--resume", "rejected", do_train, T, {"--resume": DEC_RUN}),
    case("train", "--init", "changes", do_train, with_(TI, **{"--pos": "rotary"}), {"--init": ROT_RUN, "--pos": "DEL"}),
    case("train", "--init", "rejected", do_train, T, {"--init": ROT_RUN}),
    case("train", "--interp", "changes", do_train, TI_INIT, {"--interp": "linear"}),
    case("train", "--interp", "changes", do_train, TI_INIT, {"--interp": "yarn"}),
    case("train", "--interp", "rejected", do_train, T, {"--interp": "linear"}),
    case("train", "--interp", "rejected", do_train, TI_INIT, {"--interp": "dynamic-ntk"}),
    case("train", "--scale", "changes", do_train, with_(TI_INIT, **{"--interp": "linear"}), {"--scale": "3"}),
    case("train", "--scale", "rejected", do_train, TI_INIT, {"--scale": "3"}),
    case("train", "--recipe", "changes", do_train, T, {"--recipe": "pi"}),
    case("train", "--recipe", "rejected", do_train, T, {"--recipe": "longlora"}),
    case("train", "--adam-betas", "changes", do_train, T, {"--adam-betas": "0.8,0.9"}),
    case("train", "--adam-betas", "rejected", do_train, T, {"--adam-betas": "1.5,0.9"}),
    case("train", "--steps", "changes", do_train, T, {"--steps": "5"}),
    case("train", "--tokens", "changes", do_train, T, {"--tokens": "160", "--steps": "DEL"}),
    case("train", "--tokens", "rejected", do_train, T, {"--tokens": "160"}),
    case("train", "--batch", "changes", do_train, T, {"--batch": "4"}),
    case("train", "--batch-tokens", "changes", do_train, T, {"--batch-tokens": "64", "--batch": "DEL"}),
    case("train", "--batch-tokens", "rejected", do_train, T, {"--batch-tokens": "64"}),
    case("train", "--accumulate", "same", do_train, T, {"--accumulate": "2"},
         "micro-batches: the same step to float rounding in less memory (test_train_eval.cpp: micro-batches)"),
    case("train", "--lr", "changes", do_train, T, {"--lr": "0.01"}),
    case("train", "--min-lr-ratio", "changes", do_train, T, {"--min-lr-ratio": "0.5"}),
    case("train", "--min-lr-ratio", "rejected", do_train, with_(T, **{"--schedule": "inverse-sqrt"}),
         {"--min-lr-ratio": "0.5"}),
    case("train", "--warmup", "changes", do_train, T, {"--warmup": "2"}),
    case("train", "--schedule", "changes", do_train, T, {"--schedule": "inverse-sqrt"}),
    case("train", "--schedule", "changes", do_train, T, {"--schedule": "constant"}),
    case("train", "--weight-decay", "changes", do_train, T, {"--weight-decay": "0.5"}),
    case("train", "--clip", "changes", do_train, T, {"--clip": "0.01"}),
    case("train", "--seed", "changes", do_train, T, {"--seed": "7"}),
    case("train", "--init-seed", "changes", do_train, T, {"--init-seed": "7"}),
    case("train", "--threads", "same", do_train, T, {"--threads": "2"}, "intra-op threads: speed only"),
    case("train", "--device", "same", do_train, T, {"--device": AUTO_DEVICE}, f"auto is {AUTO_DEVICE} here"),
    case("train", "--cuda-graph", "same", do_train, T, {"--cuda-graph": "uncaptured"},
         "the step without host reads: AdamW's scalars in float32, float rounding only"),
    case("train", "--cuda-graph", "same", do_train, T, {"--cuda-graph": "off"},
         f"auto captures on a GPU only; {AUTO_DEVICE} here"),
    case("train", "--cuda-graph", "rejected", do_train, TE, {"--cuda-graph": "uncaptured"}),
    # Where a captured data-parallel step all-reduces (speed only, on GPUs: bench/gpu_check.sh); a job
    # of one process has nothing to all-reduce, and the CPU captures nothing.
    case("train", "--graph-allreduce", "rejected", do_train, T, {"--graph-allreduce": "inside"}),
    case("train", "--dtype", "changes", do_train, T, {"--dtype": "bfloat16"}),
    case("train", "--dtype", "rejected", do_train, {"--resume": DEC_RUN}, {"--dtype": "bfloat16"}),
    case("train", "--batch-order", "changes", do_train, T, {"--batch-order": "contiguous"}),
    case("train", "--log-every", "changes", do_train, T, {"--log-every": "2"}),
    case("train", "--eval-every", "changes", do_train, T, {"--eval-every": "1"}),
    case("train", "--eval-tokens", "changes", do_train, T, {"--eval-tokens": "32"}),
    case("train", "--checkpoint-every", "same", do_train, T, {"--checkpoint-every": "1"},
         "when checkpoints are written: what a resume can recover (tests/reliability_resume.sh), not the run"),
    case("train", "--mask-prob", "changes", do_train, TE, {"--mask-prob": "0.3"}),
    case("train", "--mask-prob", "rejected", do_train, T, {"--mask-prob": "0.3"}),
    case("train", "--task-mix", "changes", do_train, with_(T, **{"--L": "80"}), {"--task-mix": "passkey:0.5"}),
    case("train", "--task-mix", "changes", do_train, with_(T, **{"--L": "80"}), {"--task-mix": "kv-lines:0.5"}),
    case("train", "--task-mix", "changes", do_train, with_(TE, **{"--L": "80"}), {"--task-mix": "passkey:0.5"}),
    case("train", "--task-mix", "rejected", do_train, T, {"--task-mix": "passkey:2"}),
    case("train", "--task-loss", "changes", do_train, with_(T, **{"--L": "80", "--task-mix": "passkey:0.5"}),
         {"--task-loss": "answer"}),
    case("train", "--task-loss", "changes", do_train, with_(TE, **{"--L": "80", "--task-mix": "passkey:0.5"}),
         {"--task-loss": "answer"}),
    case("train", "--task-loss", "rejected", do_train, T, {"--task-loss": "answer"}, "needs a --task-mix"),
    case("train", "--task-filler", "changes", do_train, with_(T, **{"--L": "80", "--task-mix": "passkey:1"}),
         {"--task-filler": "natural"}),
    case("train", "--task-filler", "rejected", do_train, T, {"--task-filler": "natural"}),
    case("train", "--max-bad-steps", "same", do_train, T, {"--max-bad-steps": "0"},
         "acts only on non-finite steps (tests_reliability_torch: non-finite steps are skipped ...)"),
    case("train", "--no-progress", "same", do_train, with_(T, **{"--no-progress": "DEL"}), {"--no-progress": None},
         "progress bar on stderr only"),
    case("train", "--nproc", "same", do_train, T, {"--nproc": "2"},
         "data parallel: 2 ranks x 1 sequence equal 1 rank x 2 (tests/distributed.sh)"),
    # The fused elementwise kernels run on CUDA only: there LibTorch's operators draw other dropout
    # masks; on the CPU nothing is fused and the flag is an error.
    case("train", "--unfused-elementwise", "rejected" if NO_CUDA else "changes", do_train,
         T if NO_CUDA else with_(T, **{"--device": "cuda", "--dtype": "bfloat16", "--dropout": "0.1"}),
         {"--unfused-elementwise": None}),

    case("eval", "--Lvalid", "changes", do_eval, EVAL, {"--Lvalid": "16,48"}),
    case("eval", "--task", "changes", do_eval, RET, {"--task": "kv-lines", "--filler": "DEL"}),
    case("eval", "--task", "changes", do_eval, EVAL, {"--task": "passkey", "--Lvalid": "80", "--max-tokens": "DEL"}),
    case("eval", "--task", "rejected", do_eval, RET, {"--task": "needle"}),
    case("eval", "--depths", "changes", do_eval, RET, {"--depths": "50"}),
    case("eval", "--depths", "rejected", do_eval, EVAL, {"--depths": "50"}),
    case("eval", "--trials", "changes", do_eval, RET, {"--trials": "3"}),
    case("eval", "--trials", "rejected", do_eval, EVAL, {"--trials": "3"}),
    case("eval", "--filler", "changes", do_eval, RET, {"--filler": "natural"}),
    case("eval", "--filler", "rejected", do_eval, with_(RET, **{"--task": "kv-lines", "--filler": "DEL"}),
         {"--filler": "natural"}),
    case("eval", "--prompt-seed", "changes", do_eval, RET, {"--prompt-seed": "5"}),
    case("eval", "--prompt-seed", "rejected", do_eval, EVAL, {"--prompt-seed": "5"}),
    case("eval", "--max-tokens", "changes", do_eval, with_(RET, **{"--filler": "natural"}), {"--max-tokens": "300"}),
    case("eval", "--max-tokens", "rejected", do_eval, RET, {"--max-tokens": "300"}),
    case("eval", "--mode", "rejected", do_eval, RET, {"--mode": "sliding"}),
    case("eval", "--interp", "changes", do_eval, RET, {"--interp": "ntk"}),
    case("eval", "--batch", "same", do_eval, RET, {"--batch": "1"}, "prompts a forward pass: speed only"),
    case("eval", "--split", "changes", do_eval, EVAL, {"--split": "test"}),
    case("eval", "--data", "changes", do_eval, EVAL, {"--data": OTHER}),
    case("eval", "--text", "changes", do_eval_pretrained, {"--text": TEXT1, "--Lvalid": "16", "--no-progress": None},
         {"--text": TEXT2}),
    case("eval", "--text", "rejected", do_eval, EVAL, {"--text": TEXT1}),
    case("eval", "--mode", "changes", do_eval, EVAL, {"--mode": "sliding"}),
    case("eval", "--mode", "changes", do_eval_encoder, EVAL, {"--mode": "pll"}),
    case("eval", "--mode", "rejected", do_eval, EVAL, {"--mode": "pll"}, "pll is for encoders"),
    case("eval", "--train-length", "changes", do_eval_pretrained,
         {"--text": TEXT1, "--Lvalid": "32", "--interp": "linear", "--no-progress": None}, {"--train-length": "8"}),
    case("eval", "--train-length", "rejected", do_eval, EVAL, {"--train-length": "8"}, "an xtrap run's L is its own"),
    case("eval", "--stride", "changes", do_eval, with_(EVAL, **{"--mode": "sliding"}), {"--stride": "4"}),
    case("eval", "--stride", "rejected", do_eval, EVAL, {"--stride": "4"}),
    case("eval", "--protocol", "changes", do_eval, EVAL, {"--protocol": "llama.cpp"}),
    case("eval", "--protocol", "changes", do_eval, EVAL, {"--protocol": "lm-eval"}),
    case("eval", "--protocol", "changes", do_eval, EVAL, {"--protocol": "strided"}),
    case("eval", "--protocol", "rejected", do_eval, EVAL, {"--protocol": "hf"}),
    case("eval", "--protocol", "rejected", do_eval_encoder, EVAL, {"--protocol": "strided"}, "encoders: xtrap's windows"),
    case("eval", "--protocol", "rejected", do_eval, RET, {"--protocol": "strided"}),
    case("eval", "--mode", "rejected", do_eval, with_(EVAL, **{"--protocol": "lm-eval"}), {"--mode": "sliding"}),
    case("eval", "--stride", "changes", do_eval, with_(EVAL, **{"--protocol": "strided"}), {"--stride": "4"}),
    case("eval", "--stride", "rejected", do_eval, with_(EVAL, **{"--protocol": "llama.cpp"}), {"--stride": "4"}),
    case("eval", "--window-bos", "changes", do_eval, with_(EVAL, **{"--protocol": "strided"}), {"--window-bos": None}),
    case("eval", "--window-bos", "rejected", do_eval, EVAL, {"--window-bos": None}),
    case("eval", "--kl-base", "changes", do_eval, with_(EVAL, **{"--interp": "linear"}), {"--kl-base": "none"}),
    case("eval", "--kl-base", "changes", do_eval, EVAL, {"--kl-base": ALIBI3_RUN}),
    case("eval", "--kl-base", "changes", do_eval, with_(RET, **{"--interp": "linear"}), {"--kl-base": "none"}),
    case("eval", "--kl-base", "rejected", do_eval, with_(RET, **{"--score": "generate"}), {"--kl-base": "none"}),
    case("eval", "--kl-base", "rejected", do_eval_encoder, EVAL, {"--kl-base": "none"}),
    case("eval", "--kl-base", "rejected", do_eval, EVAL, {"--kl-base": ENC_RUN}),
    case("eval", "--interp", "changes", do_eval, EVAL, {"--interp": "linear"}),
    case("eval", "--scale", "changes", do_eval, with_(EVAL, **{"--interp": "ntk"}), {"--scale": "3"}),
    case("eval", "--scale", "rejected", do_eval, EVAL, {"--scale": "3"}),
    case("eval", "--scale-per-length", "changes", do_eval, with_(EVAL, **{"--interp": "linear"}),
         {"--scale-per-length": None}),
    case("eval", "--scale-per-length", "rejected", do_eval, EVAL, {"--scale-per-length": None}),
    case("eval", "--interp", "changes", do_eval_rotary, EVAL, {"--interp": "yarn"}),
    case("eval", "--interp", "rejected", do_eval, EVAL, {"--interp": "yarn"}),
    case("eval", "--scale", "changes", do_eval_rotary, with_(EVAL, **{"--interp": "yarn"}), {"--scale": "3"}),
    case("eval", "--ntk-heads", "changes", do_eval_three_heads, with_(EVAL, **{"--interp": "ntk"}),
         {"--ntk-heads": "leading-power-of-two"}),
    case("eval", "--ntk-heads", "rejected", do_eval, with_(EVAL, **{"--interp": "linear"}),
         {"--ntk-heads": "leading-power-of-two"}),
    case("eval", "--a0", "changes", do_eval, with_(EVAL, **{"--interp": "dynamic-ntk"}), {"--a0": "3"}),
    case("eval", "--interp", "changes", do_eval_rotary, EVAL, {"--interp": "dynamic-yarn"}),
    case("eval", "--a0", "changes", do_eval_rotary, with_(EVAL, **{"--interp": "dynamic-yarn"}), {"--a0": "3"}),
    case("eval", "--a0", "rejected", do_eval, EVAL, {"--a0": "3"}),
    case("eval", "--extend", "changes", do_eval, EVAL, {"--extend": "sinks"}),
    case("eval", "--extend", "changes", do_eval_rotary, EVAL, {"--extend": "self-extend+logn"}),
    case("eval", "--extend", "rejected", do_eval, EVAL, {"--extend": "streaming"}),
    case("eval", "--extend", "changes", do_eval_encoder, EVAL, {"--extend": "rerope"}),
    case("eval", "--extend", "rejected", do_eval_encoder, EVAL, {"--extend": "sinks"}),
    case("eval", "--extend", "rejected", do_eval, with_(EVAL, **{"--interp": "linear"}), {"--extend": "sinks"}),
    case("eval", "--extend-sinks", "changes", do_eval, with_(EVAL, **{"--extend": "sinks"}), {"--extend-sinks": "2"}),
    case("eval", "--extend-sinks", "rejected", do_eval, with_(EVAL, **{"--extend": "rerope"}), {"--extend-sinks": "2"}),
    case("eval", "--extend-window", "changes", do_eval_rotary, with_(EVAL, **{"--extend": "rerope"}),
         {"--extend-window": "3"}),
    case("eval", "--extend-window", "rejected", do_eval, with_(EVAL, **{"--extend": "logn"}), {"--extend-window": "3"}),
    case("eval", "--extend-group", "changes", do_eval_rotary, with_(EVAL, **{"--extend": "self-extend"}),
         {"--extend-group": "2"}),
    case("eval", "--extend-group", "rejected", do_eval, with_(EVAL, **{"--extend": "rerope"}), {"--extend-group": "2"}),
    case("eval", "--extend-leak", "changes", do_eval_rotary, with_(EVAL, **{"--extend": "leaky-rerope"}),
         {"--extend-leak": "4"}),
    case("eval", "--extend-leak", "rejected", do_eval, EVAL, {"--extend-leak": "4"}),
    case("eval", "--extend-limit", "changes", do_eval, with_(EVAL, **{"--extend": "lambda"}), {"--extend-limit": "8"}),
    case("eval", "--extend-limit", "rejected", do_eval, with_(EVAL, **{"--extend": "sinks"}), {"--extend-limit": "8"}),
    case("eval", "--max-tokens", "changes", do_eval, EVAL, {"--max-tokens": "200"}),
    case("eval", "--batch", "same", do_eval, EVAL, {"--batch": "1"}, "windows per forward pass: speed and memory"),
    case("eval", "--nproc", "same", do_eval, EVAL, {"--nproc": "2"}, "ranks split the windows: every token once"),
    case("eval", "--query-block", "same", do_eval, with_(EVAL, **{"--Lvalid": "64"}), {"--query-block": "8"},
         "attention a block of query rows at a time: memory"),
    case("eval", "--per-position", "output", do_eval, EVAL, {"--per-position": f"{W}/pp.csv"}, path=f"{W}/pp.csv"),
    case("eval", "--buckets", "changes", do_eval, with_(EVAL, **{"--per-position": f"{W}/pp0.csv"}),
         {"--buckets": "4"}),
    case("eval", "--buckets", "rejected", do_eval, EVAL, {"--buckets": "4"}),
    case("eval", "--out", "output", do_eval, EVAL, {"--out": f"{W}/named.json"}, path=f"{W}/named.json"),
    case("eval", "--log-samples", "output", do_eval, RET, {"--log-samples": f"{W}/s.jsonl"}, path=f"{W}/s.jsonl"),
    case("eval", "--log-samples", "output", do_eval, EVAL, {"--log-samples": f"{W}/d.jsonl"}, path=f"{W}/d.jsonl"),
    case("eval", "--log-trials", "changes", do_eval, with_(RET, **{"--log-samples": f"{W}/s0.jsonl"}),
         {"--log-trials": "1"}),
    case("eval", "--log-trials", "rejected", do_eval, RET, {"--log-trials": "1"}),
    case("eval", "--score", "changes", do_eval, RET, {"--score": "generate"}),
    case("eval", "--score", "rejected", do_eval, EVAL, {"--score": "generate"}),
    case("eval", "--max-new-tokens", "changes", do_eval, with_(RET, **{"--score": "generate"}),
         {"--max-new-tokens": "8"}),
    case("eval", "--max-new-tokens", "rejected", do_eval, RET, {"--max-new-tokens": "8"}),
    case("eval", "--format", "changes", do_eval_pretrained, with_(RET, **{"--filler": "DEL", "--Lvalid": "160"}),
         {"--format": "native"}),
    case("eval", "--format", "rejected", do_eval, EVAL, {"--format": "native"}),
    case("eval", "--plot", "output", do_eval, EVAL, {"--plot": f"{W}/e.png"}, path=f"{W}/e.png"),
    case("eval", "--plot", "output", do_eval, RET, {"--plot": f"{W}/heat.png"}, path=f"{W}/heat.png"),
    case("eval", "--threads", "same", do_eval, EVAL, {"--threads": "2"}, "intra-op threads: speed only"),
    case("eval", "--device", "same", do_eval, EVAL, {"--device": AUTO_DEVICE}, f"auto is {AUTO_DEVICE} here"),
    case("eval", "--dtype", "changes", do_eval, EVAL, {"--dtype": "bfloat16"}),
    case("eval", "--verbose", "same", do_eval, EVAL, {"--verbose": None}, "also prints the slopes used"),
    case("eval", "--no-progress", "same", do_eval, with_(EVAL, **{"--no-progress": "DEL"}), {"--no-progress": None},
         "progress bar on stderr only"),

    case("probe", "--arch", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--arch": "decoder"}),
    case("probe", "--arch", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--arch": "decoder"}),
    case("probe", "--pos", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--pos": "alibi-offset"}),
    case("probe", "--pos", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--pos": "kerple-log"}),
    case("probe", "--pos", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--pos": "fire"}),
    case("probe", "--heads", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--heads": "4"}),
    case("probe", "--ntk-heads", "changes", do_probe,
         with_(BIAS, **{"--dump-bias": "B", "--heads": "6", "--interp": "ntk", "--scale": "4"}),
         {"--ntk-heads": "leading-power-of-two"}),
    case("probe", "--ntk-heads", "rejected", do_probe, with_(BIAS, **{"--dump-bias": "B"}),
         {"--ntk-heads": "leading-power-of-two"}),
    case("probe", "--dump-bias", "output", do_probe, BIAS, {"--dump-bias": f"{W}/named-bias.h5"},
         path=f"{W}/named-bias.h5"),
    case("probe", "--len", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--len": "6"}),
    case("probe", "--print", "changes", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--print": None}),
    case("probe", "--print", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--print": None}),
    case("probe", "--dump-attn", "output", do_probe, ATTN, {"--dump-attn": f"{W}/named-attn.h5"},
         path=f"{W}/named-attn.h5"),
    case("probe", "--plot", "output", do_probe, ATTN, {"--plot": f"{W}/named-attn.png"}, path=f"{W}/named-attn.png"),
    case("probe", "--cells", "changes", do_probe, with_(ATTN, **{"--plot": "P"}), {"--cells": "8"}),
    case("probe", "--cells", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--cells": "8"}),
    case("probe", "--Lvalid", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--Lvalid": "20"}),
    case("probe", "--Lvalid", "rejected", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--Lvalid": "20"}),
    case("probe", "--offset", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--offset": "50"}),
    case("probe", "--split", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--split": "test"}),
    case("probe", "--layers", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--layers": "1"}),
    case("probe", "--interp", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--interp": "linear"}),
    case("probe", "--scale", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A", "--interp": "ntk"}),
         {"--scale": "4"}),
    case("probe", "--scale", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--scale": "4"}),
    case("probe", "--extend", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--extend": "sinks"}),
    case("probe", "--extend", "rejected", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--extend": "sinks"}),
    case("probe", "--extend-sinks", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A", "--extend": "sinks"}),
         {"--extend-sinks": "2"}),
    case("probe", "--extend-sinks", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--extend-sinks": "2"}),
    case("probe", "--extend-window", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A", "--extend": "rerope"}),
         {"--extend-window": "3"}),
    case("probe", "--extend-window", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--extend-window": "3"}),
    case("probe", "--extend-group", "changes", do_probe,
         with_(ATTN, **{"--dump-attn": "A", "--extend": "self-extend"}), {"--extend-group": "2"}),
    case("probe", "--extend-group", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A", "--extend": "rerope"}),
         {"--extend-group": "2"}),
    case("probe", "--extend-leak", "changes", do_probe,
         with_(ATTN, **{"--dump-attn": "A", "--extend": "leaky-rerope"}), {"--extend-leak": "4"}),
    case("probe", "--extend-leak", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--extend-leak": "4"}),
    case("probe", "--extend-limit", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A", "--extend": "lambda"}),
         {"--extend-limit": "8"}),
    case("probe", "--extend-limit", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--extend-limit": "8"}),
    case("probe", "--store-dtype", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--store-dtype": "float32"}),
    case("probe", "--store-dtype", "rejected", do_probe, with_(ATTN, **{"--plot": "P"}), {"--store-dtype": "float32"}),
    case("probe", "--dtype", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--dtype": "bfloat16"}),
    case("probe", "--dtype", "rejected", do_probe, with_(BIAS, **{"--dump-bias": "B"}), {"--dtype": "bfloat16"}),
    case("probe", "--dtype", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--dtype": "float16"}),
    case("probe", "--device", "same", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--device": AUTO_DEVICE},
         f"auto is {AUTO_DEVICE} here"),
    case("probe", "--stats-only", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--stats-only": None}),
    case("probe", "--with-bias", "changes", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--with-bias": None}),
    case("probe", "--with-bias", "rejected", do_probe, with_(ATTN, **{"--plot": "P"}), {"--with-bias": None}),
    case("probe", "--query-block", "same", do_probe, with_(ATTN, **{"--dump-attn": "A", "--store-dtype": "float32"}),
         {"--query-block": "4"}, "attention a block of query rows at a time: memory"),
    case("probe", "--text", "changes", do_probe_pretrained, with_(ATTN_HF, **{"--text": TEXT1}), {"--text": TEXT2}),
    case("probe", "--train-length", "changes", do_probe_pretrained,
         with_(ATTN_HF, **{"--text": TEXT1, "--interp": "linear"}), {"--train-length": "4"}),
    case("probe", "--train-length", "rejected", do_probe, with_(BIAS, **{"--dump-bias": "B"}),
         {"--train-length": "4"}, "a fresh spec has no training length"),
    case("probe", "--text", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--text": TEXT1}),
    case("probe", "--data", "changes", do_probe_pretrained, with_(ATTN_HF, **{"--data": WIKI1}), {"--data": WIKI2}),
    case("probe", "--data", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--data": WIKI1}),
    case("probe", "--threads", "same", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--threads": "2"},
         "intra-op threads: speed only"),

    case("run", "--dry-run", "changes", do_run, {"--no-progress": None}, {"--dry-run": None}),
    case("run", "--runs", "output", do_run, {"--no-progress": None}, {"--runs": f"{W}/named-runs"},
         path=f"{W}/named-runs"),
    case("run", "--results", "output", do_run, {"--no-progress": None}, {"--results": f"{W}/named-results"},
         path=f"{W}/named-results/tiny/results.csv"),
    case("run", "--verify", "rejected", do_run, {}, {"--verify": None}),
    case("run", "--verify", "rejected", do_run, {}, {"--verify": None, "--dry-run": None}),
    case("run", "--no-progress", "same", do_run, {}, {"--no-progress": None}, "progress bars on stderr only"),
    case("run", "--device", "same", do_run, {"--no-progress": None}, {"--device": AUTO_DEVICE},
         f"auto is {AUTO_DEVICE} here"),
    case("run", "--dtype", "changes", do_run, {"--no-progress": None}, {"--dtype": "bfloat16"}),

    case("plot", "--out", "output", do_plot, {}, {"--out": f"{W}/named-plot.png"}, path=f"{W}/named-plot.png"),
    case("export", "--hf", "output", do_export, {}, {"--hf": f"{W}/dec-hf"}, path=f"{W}/dec-hf/config.json"),
    case("plot", "--title", "changes", do_plot, {}, {"--title": "another title"}),
]
# Without CUDA, --device cuda is a one-line error on every command that computes.
if NO_CUDA:
    CASES += [case("train", "--device", "rejected", do_train, T, {"--device": "cuda"}),
              case("eval", "--device", "rejected", do_eval, EVAL, {"--device": "cuda"}),
              case("probe", "--device", "rejected", do_probe, with_(ATTN, **{"--dump-attn": "A"}), {"--device": "cuda"}),
              case("run", "--device", "rejected", do_run, {"--no-progress": None}, {"--device": "cuda"})]
PROBE_RUN_NEEDED = ("--dump-attn", "--plot")


def materialise(c, options):
    """Fresh output files for the placeholders A/B/P; probe maps read the decoder run."""
    out = {}
    for k, v in options.items():
        if v == "DEL":
            continue
        if c["cmd"] == "probe" and v in ("A", "B", "P") and k in ("--dump-attn", "--dump-bias", "--plot"):
            v = fresh("probe") + (".png" if v == "P" else ".h5")
        out[k] = v
    return out


def invoke(c, options):
    """Runs the command; its results are read at once (a later run may reuse a file name)."""
    options = materialise(c, options)
    if c["cmd"] == "probe" and c["runner"] is do_probe_pretrained:
        rc, err, fingerprint = do_probe_pretrained(options)
    elif c["cmd"] == "probe":
        positional = (DEC_RUN,) if any(k in options for k in PROBE_RUN_NEEDED) and "--arch" not in options else ()
        rc, err, fingerprint = do_probe(options, positional)
    else:
        rc, err, fingerprint = c["runner"](options)
    return rc, err, fingerprint() if rc == 0 else None


def check_case(c):
    base = dict(c["base"])
    changed = dict(base, **c["change"])
    head = f"{c['cmd']} {c['opt']}: {c['kind']}"
    if c["opt"] == "--nproc" and os.environ.get("XTRAP_NO_GLOO"):
        return True, f"{head} (skipped: no CPU process groups in this build, its LibTorch ships no Gloo headers)"
    if c["kind"] == "rejected":
        rc, err, _ = invoke(c, changed)
        lines = err.strip().splitlines()
        ok = rc == 1 and len(lines) == 1 and lines[0].startswith("xtrap: error:")
        return ok, f"{head} ({lines[0] if lines else 'no message'})" if ok else f"{head} FAILED: rc {rc}, {err!r}"
    if c["kind"] == "output":
        rc, err, _ = invoke(c, changed)
        ok = rc == 0 and os.path.exists(c["path"])
        return ok, f"{head} ({os.path.relpath(c['path'], W)})" if ok else f"{head} FAILED: rc {rc}, {err!r}"
    rc0, err0, fp0 = invoke(c, base)
    rc1, err1, fp1 = invoke(c, changed)
    if rc0 != 0 or rc1 != 0:
        return False, f"{head} FAILED: baseline rc {rc0} {err0!r}; with the option rc {rc1} {err1!r}"
    same = close(fp0, fp1)
    if c["kind"] == "changes":
        return not same, head if not same else f"{head} FAILED: the results did not change"
    return same, f"{head} ({c['why']})" if same else f"{head} FAILED: the results changed"


def listed_options(cmd):
    text = subprocess.run([XTRAP, cmd, "--help"], capture_output=True, text=True).stdout
    section = text.split("Options:", 1)[1]
    return {m.group(1) for m in re.finditer(r"^\s+(?:-\w,)?(--[\w-]+)", section, re.M)} - {"--help"}


# A machine without gnuplot (the GPU machine has none) cannot draw: the cases that draw are skipped
# there, and tests/plots_without_gnuplot.sh checks what xtrap says instead.
HAS_GNUPLOT = bool(os.environ.get("XTRAP_GNUPLOT") or shutil.which("gnuplot"))


def check(c):
    ok, line = check_case(c)
    if not ok and not HAS_GNUPLOT and "gnuplot not found" in line:
        return True, f"{c['cmd']} {c['opt']}: {c['kind']} (skipped: no gnuplot on this machine)"
    return ok, line


failures = 0
for cmd in ("train", "eval", "probe", "run", "plot", "export"):
    covered = {c["opt"] for c in CASES if c["cmd"] == cmd}
    listed = listed_options(cmd)
    for opt in sorted(listed - covered):
        print(f"{cmd} {opt}: FAILED: not classified in tests/option_walk.py")
        failures += 1
    for opt in sorted(covered - listed):
        print(f"{cmd} {opt}: FAILED: classified but not in `xtrap {cmd} --help`")
        failures += 1
    print(f"{cmd}: {len(listed)} options")

with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    for ok, line in pool.map(check, CASES):
        print(line)
        failures += not ok
shutil.rmtree(W)
print(f"option walk: {len(CASES)} cases, {failures} failed")
sys.exit(1 if failures else 0)
