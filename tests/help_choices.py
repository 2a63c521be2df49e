#!/usr/bin/python3
"""help_choices.py XTRAP: every option with fixed choices lists, in `xtrap CMD --help`, every value
its parser accepts (issue 59: `train --help` once listed no kerple-log or fire).

The accepted values are written out here by hand. Each must appear, as a whole word, in the help
text of its option. Where a bad value is refused before any data is read, the refusal's
"(valid: ...)" list must be exactly these values too, so the help, the parser and this list agree.
"""
import os
import re
import subprocess
import sys
import tempfile

XTRAP = os.path.abspath(sys.argv[1])
POSITIONS = ["none", "sinusoidal", "learned", "rotary", "t5", "alibi", "alibi-offset", "alibi-onesided",
             "alibi-learned", "bialibi", "kerple-log", "fire"]
INTERPS = ["none", "linear", "ntk", "dynamic-ntk", "yarn", "dynamic-yarn"]
NTK_HEADS = ["all", "leading-power-of-two"]
DEVICES = ["auto", "cpu", "cuda"]
DTYPES = ["float32", "bfloat16"]

# (command, option, accepted values, the other arguments of a command that refuses a bad value of
# the option before reading data ({work}: a scratch folder), or None where none does that cheaply)
TRAIN = ["--out", "{work}/run"]
CASES = [
    ("train", "--pos", POSITIONS, TRAIN),
    ("train", "--arch", ["decoder", "encoder"], TRAIN),
    ("train", "--head", ["lm", "roberta", "clap"], TRAIN + ["--adaptive-softmax", "none"]),
    ("train", "--activation", ["gelu", "gelu-tanh", "relu", "silu"], TRAIN),
    ("train", "--alibi-init", ["random", "standard"], TRAIN + ["--arch", "encoder", "--pos", "alibi-learned"]),
    ("train", "--config", ["baseline", "learned-clap", "alibi", "zero-clap", "paper-wt103"], TRAIN),
    ("train", "--schedule", ["cosine", "inverse-sqrt", "constant"], TRAIN),
    ("train", "--batch-order", ["random", "contiguous"], TRAIN),
    ("train", "--device", DEVICES, None),
    ("train", "--dtype", DTYPES, None),
    ("train", "--cuda-graph", ["auto", "off", "uncaptured"], TRAIN),
    ("eval", "--interp", INTERPS, None),
    ("eval", "--ntk-heads", NTK_HEADS, None),
    ("eval", "--mode", ["nonoverlap", "sliding", "both"], None),
    ("eval", "--protocol", ["xtrap", "llama.cpp", "lm-eval", "strided"], ["{work}/no-run"]),
    ("eval", "--split", ["valid", "test"], None),
    ("eval", "--device", DEVICES, None),
    ("eval", "--dtype", DTYPES, None),
    ("probe", "--pos", POSITIONS, None),
    ("probe", "--arch", ["decoder", "encoder"], None),
    ("probe", "--interp", INTERPS, ["--arch", "decoder", "--pos", "alibi", "--scale", "2", "--dump-bias", "{work}/b.h5"]),
    ("probe", "--ntk-heads", NTK_HEADS, None),
    ("probe", "--split", ["valid", "test"], None),
    ("probe", "--store-dtype", ["float16", "float32"], None),
    ("probe", "--device", DEVICES, None),
    ("probe", "--dtype", DTYPES, None),
    ("run", "--device", DEVICES, None),
    ("run", "--dtype", DTYPES, None),
]

failures = []


def option_help(help_text, option):
    """The help text of `option`: its line and the continuation lines up to the next option."""
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\s+(-\w,)?" + re.escape(option) + r"(?![\w-])", line):
            block = [line]
            for more in lines[i + 1:]:
                if not more.strip() or re.match(r"\s+-", more) or not more.startswith(" "):
                    break
                block.append(more)
            return " ".join(block)
    return None


helps = {}
with tempfile.TemporaryDirectory(prefix="xtrap-help-choices-") as work:
    for command, option, values, refusal in CASES:
        if command not in helps:
            helps[command] = subprocess.run([XTRAP, command, "--help"], capture_output=True, text=True).stdout
        text = option_help(helps[command], option)
        if text is None:
            failures.append(f"{command} --help has no {option}")
            continue
        missing = [v for v in values if not re.search(r"(?<![\w-])" + re.escape(v) + r"(?![\w-])", text)]
        if missing:
            failures.append(f"{command} --help, {option}: {missing} missing from: {text.strip()}")
        if refusal is None:
            continue
        args = [a.replace("{work}", work) for a in refusal]
        p = subprocess.run([XTRAP, command, option, "bogus-choice", *args],
                           capture_output=True, text=True, cwd=work)
        listed = re.search(r"\(valid: ([^)]*)\)", p.stderr)
        if p.returncode == 0 or not listed:
            failures.append(f"{command} {option} bogus-choice: exit {p.returncode}, said {p.stderr.strip()!r}")
        elif listed.group(1).split(", ") != values:
            failures.append(f"{command} {option}: the parser lists {listed.group(1)!r}, expected {values}")

for f in failures:
    print("FAIL", f)
print(f"help_choices: {len(CASES)} options, {len(failures)} failures")
sys.exit(1 if failures else 0)
