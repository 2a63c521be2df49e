#!/usr/bin/env bash
# The command line end to end on a tiny model: help lists every option with its default, bad
# values are rejected with one line and a non-zero exit, and train -> eval -> probe works.
set -uo pipefail
XTRAP=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --help of every subcommand lists its options; defaults are shown.
# (Each help is read whole first: grep -q stops reading at its match, and with pipefail the
# writer's broken pipe would fail the check.)
help() { "$XTRAP" "$1" --help || fail "$1 --help exited non-zero"; }
help train | grep -- "--pos" >/dev/null || fail "train --help lacks --pos"
help train | grep "alibi" >/dev/null || fail "train --help lacks the default pos"
help eval | grep -- "--Lvalid" >/dev/null || fail "eval --help lacks --Lvalid"
help probe | grep -- "--dump-attn" >/dev/null || fail "probe --help lacks --dump-attn"
# Device and precision on every command that computes, with their choices and defaults.
for cmd in train eval probe; do
  "$XTRAP" $cmd --help | grep -- "--device" | grep -q "auto | cpu | cuda" || fail "$cmd --help: --device choices"
  "$XTRAP" $cmd --help | grep -- "--device" | grep -q "TEXT=auto" || fail "$cmd --help: --device default"
  "$XTRAP" $cmd --help | grep -- "--dtype" | grep -q "float32 | bfloat16" || fail "$cmd --help: --dtype choices"
  "$XTRAP" $cmd --help | grep -- "--dtype" | grep -q "TEXT=float32" || fail "$cmd --help: --dtype default"
done
"$XTRAP" run --help | grep -- "--device" | grep -q "auto | cpu | cuda" || fail "run --help: --device choices"
"$XTRAP" run --help | grep -- "--dtype" | grep -q "float32 | bfloat16" || fail "run --help: --dtype choices"
"$XTRAP" probe --help | grep -- "--store-dtype" | grep -q "TEXT=float16" || fail "probe --help: --store-dtype default"

# expect_error "message fragment" args...: exit code 1 or 2 (CLI11), one line on stderr.
expect_error() {
  local fragment=$1; shift
  local err rc
  err=$("$XTRAP" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -ne 0 ] || fail "'$*' exited 0"
  echo "$err" | grep -q -- "$fragment" || fail "'$*' said: $err (expected '$fragment')"
}
expect_error "unknown position method 'xpos'" train --pos xpos --out "$work/x"
expect_error "must divide --d-model" train --heads 3 --out "$work/x"
expect_error "alibi-onesided needs an even number of heads" train --arch encoder --pos alibi-onesided --heads 3 --d-model 96 --out "$work/x"
expect_error "--L must be" train --L 0 --out "$work/x"
expect_error "data directory not found" train --data /nonexistent --steps 1 --out "$work/x"
expect_error "unknown --head" train --head mlp --out "$work/x"
[ ! -e "$work/x" ] || fail "a rejected train left a run directory"

tiny=(--layers 1 --d-model 16 --heads 2 --ffn 32 --L 16 --batch 4 --steps 6 --eval-tokens 512 --threads 1 --no-progress)
"$XTRAP" train "${tiny[@]}" --out "$work/run" >/dev/null || fail "train"
[ -f "$work/run/run.json" ] && [ -f "$work/run/checkpoint.pt" ] && [ -f "$work/run/train.jsonl" ] || fail "run files"
expect_error "already holds a run" train "${tiny[@]}" --out "$work/run"
expect_error "bad --Lvalid item '12x'" eval "$work/run" --Lvalid 12x
expect_error "descending" eval "$work/run" --Lvalid 64..16
expect_error "not a run directory" eval "$work/nope" --Lvalid 16

out=$("$XTRAP" eval "$work/run" --Lvalid 16..64 --max-tokens 2000 --mode both --interp none,linear \
      --out "$work/eval.json" --threads 1 --no-progress) || fail "eval"
[ "$(echo "$out" | grep -c " alibi ")" -eq 12 ] || fail "eval table rows: $out"
grep -q '"ppl"' "$work/eval.json" || fail "eval json"

"$XTRAP" probe "$work/run" --dump-attn "$work/a.h5" --Lvalid 64 --threads 1 2>/dev/null || fail "probe --dump-attn"
"$XTRAP" probe --dump-bias "$work/b.h5" --arch encoder --pos alibi-offset --heads 1 --len 5 --print > "$work/b.txt" \
  || fail "probe --dump-bias"
[ "$(grep -c . "$work/b.txt")" -eq 6 ] && grep -q "head 0" "$work/b.txt" || fail "--print matrix"
[ -f "$work/a.h5" ] && [ -f "$work/b.h5" ] || fail "probe outputs"
# Acceptance (issue 14): NTK-ALiBi of a fresh 12-head encoder spec with a = 3 gives
# m_h / 3^((r-1)/(H-1)), r the head's rank by slope (steepest r = 1). Standard 12-head slopes:
# 2^-1..2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (every other slope of the 16-head set).
"$XTRAP" probe --dump-bias "$work/ntk.h5" --arch encoder --pos alibi --heads 12 --interp ntk --scale 3 --len 2 \
  --print > "$work/ntk.txt" || fail "probe --dump-bias --interp ntk --scale 3"
python3 - "$work/ntk.txt" <<'PY' || fail "ntk slopes differ from m_h / 3^((r-1)/11)"
import sys
m = [2 ** -k for k in range(1, 9)] + [2 ** -(k + 0.5) for k in range(0, 4)]
rank = {s: r for r, s in enumerate(sorted(m, reverse=True))}
want = [s / 3 ** (rank[s] / 11) for s in m]
lines = open(sys.argv[1]).read().split("\n")
got = [-float(lines[lines.index(f"head {h}") + 1].split()[1]) for h in range(12)]
assert all(abs(g - w) <= 1e-3 * w for g, w in zip(got, want)), (got, want)
PY
# bfloat16 autocast on the CPU end to end; run.json and eval.csv record the device and precision.
"$XTRAP" train "${tiny[@]}" --device cpu --dtype bfloat16 --out "$work/bf16" >/dev/null || fail "train --dtype bfloat16"
grep -q '"device": "cpu"' "$work/bf16/run.json" && grep -q '"dtype": "bfloat16"' "$work/bf16/run.json" \
  || fail "run.json lacks device / dtype"
"$XTRAP" eval "$work/bf16" --Lvalid 16,32 --max-tokens 500 --dtype bfloat16 --out "$work/bf16.csv" --threads 1 \
  --no-progress >/dev/null || fail "eval --dtype bfloat16"
head -n 1 "$work/bf16.csv" | grep -q ",device,dtype,seed,peak_mib," || fail "eval.csv header lacks device,dtype,seed,peak_mib"
[ "$(grep -c ',cpu,bfloat16,[0-9]*,,perplexity,' "$work/bf16.csv")" -eq 2 ] || fail "eval.csv rows lack cpu,bfloat16"
"$XTRAP" probe "$work/bf16" --dump-attn "$work/bf16.h5" --Lvalid 32 --dtype bfloat16 --threads 1 2>/dev/null \
  || fail "probe --dtype bfloat16"
expect_error "--dtype float16: the stored maps' type is now --store-dtype" probe "$work/run" --dump-attn "$work/x.h5" \
  --dtype float16
expect_error "unknown dtype 'bogus'" eval "$work/run" --dtype bogus
if grep -q '"device": "cpu"' "$work/run/run.json"; then  # auto found no CUDA
  expect_error "--device cuda" train "${tiny[@]}" --device cuda --out "$work/cuda"
  [ "$("$XTRAP" train "${tiny[@]}" --device cuda --out "$work/cuda" 2>&1 >/dev/null | wc -l)" -eq 1 ] \
    || fail "train --device cuda without CUDA: not one line"
  [ ! -e "$work/cuda" ] || fail "train --device cuda left a run directory"
fi
expect_fail() { "$@" > /dev/null 2>&1 && fail "accepted: $*"; true; }
expect_fail "$XTRAP" probe --dump-bias "$work/x.h5" --arch encoder --pos alibi --heads 4 --interp ntk
echo "cli smoke: ok"
