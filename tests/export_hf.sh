#!/usr/bin/env bash
# `xtrap export RUN --hf DIR` round trip: tiny rotary and ALiBi decoders (and rotary runs adapted with
# linear, NTK and YaRN positions) trained on a slice of the shipped data, exported in Hugging Face
# layout, then scored by xtrap's pretrained loader (`xtrap eval DIR`, which applies the same key
# checks as to a downloaded model) with the exported tokenizer.json: the NLL must be the run's own
# to 1e-6 and the tokens scored the same. Also the refusals, each one line naming the setting and
# the training flag that avoids it, and the config's model type and rope_scaling.
set -euo pipefail
XTRAP=$1
PYTHON=${XTRAP_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/data"
for split in train valid test; do head -n 300 data/wikitext-2/wiki.$split.tokens >"$work/data/wiki.$split.tokens"; done
status=0
fail() {
  echo "FAIL: $*"
  status=1
}

train() {  # NAME ARGS...
  local name=$1
  shift
  "$XTRAP" train --data "$work/data" --out "$work/$name" --steps 4 --L 16 --layers 2 --d-model 32 --heads 4 \
    --ffn 64 --batch 4 --warmup 1 --lr 0.01 --threads 1 --no-progress --eval-tokens 64 "$@" >/dev/null
}

# NAME MODEL-TYPE: export, check the config's model type, score both at 16 and 64 tokens.
round_trip() {
  local name=$1 type=$2
  "$XTRAP" export "$work/$name" --hf "$work/$name-hf" >/dev/null
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [[ -f $work/$name-hf/$f ]] || fail "$name: no $f"
  done
  "$XTRAP" eval "$work/$name" --Lvalid 16,64 --threads 1 --no-progress --out "$work/$name.json" >/dev/null
  "$XTRAP" eval "$work/$name-hf" --data "$work/data" --Lvalid 16,64 --threads 1 --no-progress \
    --out "$work/$name-hf.json" >/dev/null
  "$PYTHON" - "$work/$name" "$type" <<'PY' || status=1
import json, sys
run, model_type = sys.argv[1], sys.argv[2]
config = json.load(open(run + "-hf/config.json"))
assert config["model_type"] == model_type, (run, config["model_type"])
assert config["tie_word_embeddings"] is False  # the sqrt(d) scale folded into the input embedding
own = json.load(open(run + ".json"))
exported = json.load(open(run + "-hf.json"))
assert len(own) == len(exported) == 2, (len(own), len(exported))
for a, b in zip(own, exported):
    assert a["Lvalid"] == b["Lvalid"] and a["tokens_scored"] == b["tokens_scored"], (a, b)
    na, nb = float(a["nll"]), float(b["nll"])
    assert abs(na - nb) <= 1e-6 * max(1.0, abs(na)), f"{run} Lvalid {a['Lvalid']}: nll {na!r} vs exported {nb!r}"
    print(f"{run.rsplit('/', 1)[-1]} Lvalid {a['Lvalid']}: {a['tokens_scored']} tokens, nll {na:.9f} vs {nb:.9f}")
PY
}

train rotary --pos rotary --adaptive-softmax none
round_trip rotary gpt_neox
train alibi --pos alibi --adaptive-softmax none
round_trip alibi mpt
# The model types' own computation (tests/export_hf_reference.py, float64, from transformers' and
# llm-foundry's code) gives the NLL xtrap's loader gives for the exported directory.
reference() {  # NAME
  "$XTRAP" eval "$work/$1-hf" --data "$work/data" --Lvalid 48 --max-tokens 200 --threads 1 --no-progress \
    --out "$work/$1-ref.json" >/dev/null
  nll=$("$PYTHON" -c "import json, sys; print(repr(json.load(open(sys.argv[1]))[0]['nll']))" "$work/$1-ref.json")
  "$PYTHON" "$(dirname "$0")/export_hf_reference.py" "$work/$1-hf" "$work/data/wiki.valid.tokens.xtrap-bpe" 200 48 \
    "$nll" || status=1
}
reference rotary
reference alibi
train alibi-relu --pos alibi --adaptive-softmax none --activation relu --no-scale-embedding
round_trip alibi-relu mpt
for interp in linear ntk yarn; do
  "$XTRAP" train --init "$work/rotary" --L 32 --interp $interp --data "$work/data" --out "$work/rotary-$interp" \
    --steps 2 --batch 2 --warmup 1 --threads 1 --no-progress --eval-tokens 64 >/dev/null
  round_trip rotary-$interp gpt_neox
done
reference rotary-linear
"$PYTHON" - "$work" <<'PY' || status=1
import json, sys
work = sys.argv[1]
# The baked transforms, as transformers reads them: PI and YaRN as rope_scaling with a = 32 / 16,
# NTK-aware as a larger rope_theta (base * a^(d / (d - 2)), d = 8 rotated channels).
linear = json.load(open(work + "/rotary-linear-hf/config.json"))
assert linear["rope_scaling"]["rope_type"] == "linear" and linear["rope_scaling"]["factor"] == 2.0, linear["rope_scaling"]
yarn = json.load(open(work + "/rotary-yarn-hf/config.json"))["rope_scaling"]
assert yarn["rope_type"] == "yarn" and yarn["factor"] == 2.0 and yarn["original_max_position_embeddings"] == 16, yarn
ntk = json.load(open(work + "/rotary-ntk-hf/config.json"))
assert ntk["rope_scaling"] is None and abs(ntk["rope_theta"] - 10000 * 2 ** (8 / 6)) < 1e-6, ntk["rope_theta"]
PY

# Refusals: one line each, naming the flag.
refused() {  # NAME EXPECTED-TEXT
  local out
  if out=$("$XTRAP" export "$work/$1" --hf "$work/$1-refused" 2>&1); then
    fail "$1: export --hf succeeded"
  elif [[ $(printf '%s\n' "$out" | wc -l) -ne 1 || $out != *"$2"* ]]; then
    fail "$1: expected one line with '$2', got: $out"
  fi
  [[ ! -e $work/$1-refused ]] || fail "$1: a refused export left $work/$1-refused"
}
train adaptive --pos rotary
refused adaptive "--adaptive-softmax none"
train encoder --arch encoder --pos alibi --adaptive-softmax none
refused encoder "encoder"
train sinusoidal --pos sinusoidal --adaptive-softmax none
refused sinusoidal "not sinusoidal"
"$XTRAP" train --init "$work/alibi" --L 32 --interp linear --data "$work/data" --out "$work/alibi-linear" \
  --steps 1 --batch 2 --warmup 1 --threads 1 --no-progress --eval-tokens 64 >/dev/null
refused alibi-linear "--interp none"
out=$("$XTRAP" export "$work/rotary" "$work/x" --hf "$work/y" 2>&1) && fail "OUT and --hf together accepted"

# train --init from an exported directory, which reads the data through its WordLevel tokenizer (the
# run's words, so the same ids): one step at lr 1e-12 (no weight moves measurably), then `eval` of
# the adapted run with no flags scores what the xtrap run scores under the same interpolation at
# a = 2; its export is gpt_neox again with the transform in its config and scores the same.
for interp in linear ntk yarn; do
  "$XTRAP" train --init "$work/rotary-hf" --L 32 --interp $interp --data "$work/data" --out "$work/hf-$interp" \
    --steps 1 --lr 1e-12 --warmup 0 --batch 2 --threads 1 --no-progress --eval-tokens 64 >/dev/null ||
    fail "train --init rotary-hf --interp $interp"
  "$XTRAP" eval "$work/hf-$interp" --Lvalid 32,64 --threads 1 --no-progress --out "$work/hf-$interp.json" >/dev/null
  "$XTRAP" eval "$work/rotary" --interp $interp --scale 2 --Lvalid 32,64 --threads 1 --no-progress \
    --out "$work/rotary-at-2-$interp.json" >/dev/null
  "$XTRAP" export "$work/hf-$interp" --hf "$work/hf-$interp-hf" >/dev/null || fail "export --hf of hf-$interp"
  "$XTRAP" eval "$work/hf-$interp-hf" --data "$work/data" --Lvalid 32,64 --threads 1 --no-progress \
    --out "$work/hf-$interp-hf.json" >/dev/null
  "$PYTHON" - "$work" $interp <<'PY' || status=1
import json, sys
work, interp = sys.argv[1], sys.argv[2]
run, interpolated, exported = (json.load(open(f"{work}/{name}.json"))
                               for name in (f"hf-{interp}", f"rotary-at-2-{interp}", f"hf-{interp}-hf"))
for a, b, c in zip(run, interpolated, exported):
    assert a["tokens_scored"] == b["tokens_scored"] == c["tokens_scored"], (a, b, c)
    na, nb, nc = float(a["nll"]), float(b["nll"]), float(c["nll"])
    assert abs(na - nb) <= 1e-6 * abs(nb) and na == nc, f"{interp} Lvalid {a['Lvalid']}: {na!r} {nb!r} {nc!r}"
    print(f"init from gpt_neox, {interp}, Lvalid {a['Lvalid']}: nll {na:.9f} (xtrap run interpolated {nb:.9f})")
config = json.load(open(f"{work}/hf-{interp}-hf/config.json"))
assert config["model_type"] == "gpt_neox" and config["max_position_embeddings"] == 32, config
if interp == "ntk":
    assert config["rope_scaling"] is None and abs(config["rope_theta"] - 10000 * 2 ** (8 / 6)) < 1e-6, config
else:
    assert config["rope_scaling"]["rope_type"] == interp and config["rope_scaling"]["factor"] == 2.0, config
assert json.load(open(f"{work}/hf-{interp}/run.json"))["tokenizer"]["family"] == "gpt_neox"
PY
done
# From the ALiBi run's export (mpt), at twice its length with --interp none: the run scores what the
# ALiBi run scores, and exports as mpt again with max_seq_len 32.
"$XTRAP" train --init "$work/alibi-hf" --L 32 --data "$work/data" --out "$work/hf-mpt" --steps 1 --lr 1e-12 \
  --warmup 0 --batch 2 --threads 1 --no-progress --eval-tokens 64 >/dev/null || fail "train --init alibi-hf"
"$XTRAP" eval "$work/hf-mpt" --Lvalid 32,64 --threads 1 --no-progress --out "$work/hf-mpt.json" >/dev/null
"$XTRAP" eval "$work/alibi" --Lvalid 32,64 --threads 1 --no-progress --out "$work/alibi-32-64.json" >/dev/null
"$XTRAP" export "$work/hf-mpt" --hf "$work/hf-mpt-hf" >/dev/null || fail "export --hf of hf-mpt"
"$XTRAP" eval "$work/hf-mpt-hf" --data "$work/data" --Lvalid 32,64 --threads 1 --no-progress \
  --out "$work/hf-mpt-hf.json" >/dev/null
"$PYTHON" - "$work" <<'PY' || status=1
import json, sys
work = sys.argv[1]
run, source, exported = (json.load(open(f"{work}/{name}.json")) for name in ("hf-mpt", "alibi-32-64", "hf-mpt-hf"))
for a, b, c in zip(run, source, exported):
    na, nb, nc = float(a["nll"]), float(b["nll"]), float(c["nll"])
    assert a["tokens_scored"] == b["tokens_scored"] == c["tokens_scored"] and abs(na - nb) <= 1e-6 * nb and na == nc, (
        a["Lvalid"], na, nb, nc)
    print(f"init from mpt, Lvalid {a['Lvalid']}: nll {na:.9f} (ALiBi run {nb:.9f})")
config = json.load(open(f"{work}/hf-mpt-hf/config.json"))
assert config["model_type"] == "mpt" and config["max_seq_len"] == 32, config
PY
# The task mix trains through the tokenizer (its prompts in the tokenizer's ids, probed at L); the
# Python export has no place for a tokenizer run.
"$XTRAP" train --init "$work/rotary-hf" --L 128 --data "$work/data" --out "$work/hf-tasks" --task-mix passkey:0.5 \
  --steps 2 --eval-every 1 --batch 2 --threads 1 --no-progress --eval-tokens 64 >/dev/null || fail "init with a task mix"
grep -q '"passkey"' "$work/hf-tasks/train.jsonl" || fail "init with a task mix: no passkey probe in train.jsonl"
# probe reads such a run's own data through its tokenizer, as eval does.
"$XTRAP" probe "$work/hf-linear" --dump-attn "$work/hf-linear-attn.h5" --Lvalid 16 --threads 1 >/dev/null 2>&1 &&
  [[ -s $work/hf-linear-attn.h5 ]] || fail "probe --dump-attn of a run from a Hugging Face directory"
out=$("$XTRAP" export "$work/hf-tasks" "$work/hf-tasks-py" 2>&1) && fail "export OUT of a tokenizer run accepted"
[[ $(printf '%s\n' "$out" | wc -l) -eq 1 && $out == *"--hf"* ]] || fail "export OUT of a tokenizer run: $out"
out=$("$XTRAP" export "$work/rotary" 2>&1) && fail "export without OUT or --hf accepted"
[[ $out == *"give OUT or --hf"* ]] || fail "export without a target: $out"
exit $status
