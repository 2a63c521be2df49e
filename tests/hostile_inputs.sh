#!/usr/bin/env bash
# Hostile inputs: each must end with exit status 1 and one line "xtrap: error: ..." on stderr
# (never a crash), and leave no output file and no temporary behind.
# usage: hostile_inputs.sh XTRAP [unused]
source "$(dirname "$0")/reliability_lib.sh" "$@"
chmod 755 "$WORK"  # the read-only cases run as an unprivileged user when we are root
cases=0

# As an unprivileged user when root (root ignores permission bits), else as ourselves.
as_user() {
  if [[ $(id -u) -eq 0 ]]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi
}

make_corpus "$WORK/data" 400 60 21
make_corpus "$WORK/other" 400 90 22
chmod -R a+rX "$WORK/data"
# Flags a case may vary are left out of BASE (CLI11 rejects an option given twice).
BASE=("$XTRAP" train --layers 1 --ffn 64 --batch 4 --threads 1 --no-progress --steps 4 --eval-tokens 64
      --checkpoint-every 2 --data "$WORK/data" --out "$WORK/r1")
TRAIN=("$XTRAP" train "${TINY[@]}" --steps 4 --eval-tokens 64 --checkpoint-every 2)
"${TRAIN[@]}" --data "$WORK/data" --out "$WORK/run" > /dev/null 2>&1 || fail "training the reference run failed"
chmod -R a+rX "$WORK/run"

# --- data directories and files ---
expect_error "missing data directory" "data directory not found: $WORK/nope$" -- \
  "${TRAIN[@]}" --data "$WORK/nope" --out "$WORK/r1"
mkdir "$WORK/emptydir"
expect_error "empty data directory" "missing split file: $WORK/emptydir/wiki.train.tokens$" -- \
  "${TRAIN[@]}" --data "$WORK/emptydir" --out "$WORK/r1"
cp -r "$WORK/data" "$WORK/emptysplit" && : > "$WORK/emptysplit/wiki.valid.tokens"
expect_error "empty split" "empty split: $WORK/emptysplit/wiki.valid.tokens$" -- \
  "${TRAIN[@]}" --data "$WORK/emptysplit" --out "$WORK/r1"
cp -r "$WORK/data" "$WORK/nosplit" && rm "$WORK/nosplit/wiki.test.tokens"
expect_error "missing split" "missing split file: $WORK/nosplit/wiki.test.tokens$" -- \
  "${TRAIN[@]}" --data "$WORK/nosplit" --out "$WORK/r1"
cp -r "$WORK/data" "$WORK/unreadable" && rm -f "$WORK/unreadable/.xtrap-cache.bin"
chmod 755 "$WORK/unreadable" && chmod 000 "$WORK/unreadable/wiki.train.tokens"
expect_error "unreadable split" "cannot read split file: $WORK/unreadable/wiki.train.tokens$" -- \
  as_user "${TRAIN[@]}" --data "$WORK/unreadable" --out "$WORK/r1"
cp -r "$WORK/data" "$WORK/lockeddir" && chmod 000 "$WORK/lockeddir"
expect_error "unreadable data directory" "cannot read data directory: $WORK/lockeddir$" -- \
  as_user "${TRAIN[@]}" --data "$WORK/lockeddir" --out "$WORK/r1"
cp -r "$WORK/data" "$WORK/binary" && rm -f "$WORK/binary/.xtrap-cache.bin"
printf 'fine words\nthen \xff\xfe junk\n' >> "$WORK/binary/wiki.train.tokens"
expect_error "non-UTF-8 bytes" "$WORK/binary/wiki.train.tokens: invalid UTF-8 at line 402, byte offset [0-9]+ \\(0xFF\\)$" -- \
  "${TRAIN[@]}" --data "$WORK/binary" --out "$WORK/r1"
cp -r "$WORK/data" "$WORK/longline" && rm -f "$WORK/longline/.xtrap-cache.bin"
head -c 10485760 /dev/zero | tr '\0' 'a' >> "$WORK/longline/wiki.valid.tokens"
expect_error "10 MB line" "$WORK/longline/wiki.valid.tokens: line 401 is 10485760 bytes long \\(limit 1048576\\)$" -- \
  "${TRAIN[@]}" --data "$WORK/longline" --out "$WORK/r1"
[[ ! -e "$WORK/r1" ]] || fail "a failed train created its run directory"

# --- runs vs data, Lvalid ---
expect_error "vocabulary mismatch" "vocabulary mismatch: run $WORK/run was trained with [0-9]+ words, $WORK/other gives [0-9]+$" -- \
  "$XTRAP" eval "$WORK/run" --data "$WORK/other" --no-progress --out "$WORK/e.csv"
for bad in abc 0 -5 64..32 8..1024*0.5 8..1024*1.0 8..x 1,,2 99999999999 , 8..1024:0; do
  expect_error "--Lvalid '$bad'" "bad --Lvalid item" -- \
    "$XTRAP" eval "$WORK/run" --Lvalid="$bad" --no-progress --out "$WORK/e.csv"
done
[[ ! -e "$WORK/e.csv" ]] || fail "a failed eval wrote e.csv"
"$XTRAP" eval "$WORK/run" --Lvalid 1000000 --threads 1 --no-progress --out "$WORK/big.csv" > /dev/null 2> "$WORK/err" ||
  fail "Lvalid above the split size failed: $(cat "$WORK/err")"
grep -Eq "^note: Lvalid 1000000 exceeds the valid split \([0-9]+ tokens\); scoring one window of all of it$" "$WORK/err" ||
  fail "Lvalid above the split size: no note ($(cat "$WORK/err"))"
printf '%-34s %s (exit 0)\n' "Lvalid larger than the split" "$(head -n 1 "$WORK/err")"

# --- model flags ---
expect_error "--L 0" "--L must be in 1..1048576, got 0$" -- "${BASE[@]}" --d-model 32 --heads 2 --L 0
expect_error "--L huge" "--L must be in 1..1048576, got 4294967296$" -- \
  "${BASE[@]}" --d-model 32 --heads 2 --L 4294967296
expect_error "--L larger than the data" "the train split has [0-9]+ tokens, fewer than one sequence of 1048577$" -- \
  "${BASE[@]}" --d-model 32 --heads 2 --L 1048576
expect_error "heads not dividing d_model" "--heads \\(3\\) must divide --d-model \\(32\\)$" -- \
  "${BASE[@]}" --d-model 32 --heads 3 --L 32
expect_error "alibi-onesided, odd heads" "alibi-onesided needs an even number of heads$" -- \
  "${BASE[@]}" --arch encoder --pos alibi-onesided --d-model 33 --heads 3 --L 32
expect_error "unknown --pos" "unknown position method 'alibix' \\(valid: none, " -- \
  "${BASE[@]}" --d-model 32 --heads 2 --L 32 --pos alibix
expect_error "unknown --head" "unknown --head 'softmax' \\(valid: lm, roberta, clap\\)$" -- \
  "${BASE[@]}" --d-model 32 --heads 2 --L 32 --head softmax
[[ ! -e "$WORK/r1" ]] || fail "a failed train created its run directory"

# --- output locations ---
expect_error "eval --train-length 0" "--train-length must be >= 1$" -- \
  "$XTRAP" eval "$WORK/run" --train-length 0 --no-progress --out "$WORK/e.csv"
expect_error "eval --train-length of an xtrap run" "--train-length applies to pretrained models; $WORK/run is an xtrap run" -- \
  "$XTRAP" eval "$WORK/run" --train-length 64 --no-progress --out "$WORK/e.csv"
expect_error "eval --extend unknown" "unknown --extend 'streaming' \\(valid: none, sinks, " -- \
  "$XTRAP" eval "$WORK/run" --extend streaming --no-progress --out "$WORK/e.csv"
expect_error "eval --extend-window -3" "--extend-window must be >= 1 \\(0 = its default\\), got -3$" -- \
  "$XTRAP" eval "$WORK/run" --extend rerope --extend-window -3 --no-progress --out "$WORK/e.csv"
expect_error "eval --extend sinks with --interp linear" "--interp linear with --extend sinks S=4 W=" -- \
  "$XTRAP" eval "$WORK/run" --extend sinks --interp linear --no-progress --out "$WORK/e.csv"
expect_error "probe --train-length -3" "--train-length must be >= 1$" -- \
  "$XTRAP" probe "$WORK/run" --dump-attn "$WORK/a.h5" --train-length -3
expect_error "eval --protocol unknown" "unknown --protocol 'hf' \\(valid: xtrap, llama.cpp, lm-eval, strided\\)$" -- \
  "$XTRAP" eval "$WORK/run" --protocol hf --no-progress --out "$WORK/e.csv"
expect_error "eval --protocol llama.cpp, short text" "--protocol llama.cpp needs at least 2 \\* Lvalid = 2048 tokens" -- \
  "$XTRAP" eval "$WORK/run" --protocol llama.cpp --Lvalid 1024 --max-tokens 100 --no-progress --out "$WORK/e.csv"
expect_error "eval --window-bos without strided" "--window-bos applies to --protocol strided$" -- \
  "$XTRAP" eval "$WORK/run" --window-bos --no-progress --out "$WORK/e.csv"
expect_error "eval --kl-base, no such run" "not a run directory: $WORK/nope does not exist$" -- \
  "$XTRAP" eval "$WORK/run" --kl-base "$WORK/nope" --no-progress --out "$WORK/e.csv"
expect_error "eval --mode pll of a decoder" "--mode pll \\(pseudo-log-likelihood\\) is for encoders" -- \
  "$XTRAP" eval "$WORK/run" --mode pll --no-progress --out "$WORK/e.csv"
expect_error "train --task-loss bogus" "--task-loss must be all or answer, not bogus$" -- \
  "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/r1" --task-mix passkey:0.5 --task-loss bogus
expect_error "eval --out, missing directory" "cannot write $WORK/missing/e.csv: directory $WORK/missing does not exist$" -- \
  "$XTRAP" eval "$WORK/run" --no-progress --out "$WORK/missing/e.csv"
expect_error "probe --dump-bias, missing dir" "cannot write $WORK/missing/b.h5: directory $WORK/missing does not exist$" -- \
  "$XTRAP" probe "$WORK/run" --dump-bias "$WORK/missing/b.h5"
mkdir "$WORK/ro" && chmod 555 "$WORK/ro"
expect_error "eval --out, read-only directory" "cannot write $WORK/ro/e.csv: directory $WORK/ro is not writable" -- \
  as_user "$XTRAP" eval "$WORK/run" --no-progress --out "$WORK/ro/e.csv"
expect_error "train --out, read-only directory" "cannot create run directory $WORK/ro/run: Permission denied$" -- \
  as_user "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/ro/run"
[[ -z $(ls -A "$WORK/ro") ]] || fail "files appeared in the read-only directory"

# --- checkpoints ---
cp -r "$WORK/run" "$WORK/torn"
truncate -s 5000 "$WORK/torn/checkpoint.pt"
expect_error "truncated checkpoint" "truncated checkpoint $WORK/torn/checkpoint.pt: 4972 of [0-9]+ payload bytes$" -- \
  "$XTRAP" eval "$WORK/torn" --no-progress --out "$WORK/e.csv"
expect_error "truncated checkpoint, resume" "truncated checkpoint $WORK/torn/checkpoint.pt" -- \
  "$XTRAP" train --resume "$WORK/torn" --no-progress
echo "this is not a checkpoint" > "$WORK/torn/checkpoint.pt"
expect_error "foreign checkpoint" "not an xtrap checkpoint: $WORK/torn/checkpoint.pt$" -- \
  "$XTRAP" probe "$WORK/torn" --dump-bias "$WORK/b.h5"
[[ ! -e "$WORK/b.h5" && ! -e "$WORK/e.csv" ]] || fail "output written from a bad checkpoint"

# --- disk full (RLIMIT_FSIZE): writes fail with EFBIG, nothing half-written keeps a final name ---
expect_error "disk full: checkpoint" "cannot write $WORK/full/checkpoint.pt: File too large$" -- \
  bash -c 'ulimit -f 64; exec "$@"' _ "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/full"
[[ ! -e "$WORK/full/checkpoint.pt" ]] || fail "disk full left checkpoint.pt"
no_temporaries "$WORK/full"
expect_error "disk full: HDF5 dump" "HDF5 error while writing dataset bias: File too large$" -- \
  bash -c 'ulimit -f 64; exec "$@"' _ "$XTRAP" probe "$WORK/run" --dump-bias "$WORK/bias.h5" --len 1024
[[ ! -e "$WORK/bias.h5" ]] || fail "disk full left bias.h5"
expect_error "disk full: eval results" "cannot write $WORK/e.json: File too large$" -- \
  bash -c 'ulimit -f 1; exec "$@"' _ "$XTRAP" eval "$WORK/run" "$WORK/run" "$WORK/run" "$WORK/run" --Lvalid 1..64:1 \
  --threads 1 --no-progress --out "$WORK/e.json"
[[ ! -e "$WORK/e.json" ]] || fail "disk full left e.json"
no_temporaries "$WORK"

# --- scenario files: unknown and ill-typed keys are named with their line ---
printf '[train]\narch = "decoder"\nstepz = 5\n[[variant]]\nname = "a"\npos = "alibi"\n' > "$WORK/unknown.toml"
expect_error "unknown scenario key" "$WORK/unknown.toml:3:1: unknown key 'stepz' in \[train\]$" -- "$XTRAP" run "$WORK/unknown.toml" --dry-run --results "$WORK/res"
printf '[train]\narch = "decoder"\nsteps = "many"\n[[variant]]\nname = "a"\npos = "alibi"\n' > "$WORK/typed.toml"
expect_error "ill-typed scenario key" "$WORK/typed.toml:3:9: steps: expected an integer$" -- "$XTRAP" run "$WORK/typed.toml" --dry-run --results "$WORK/res"
[[ ! -e "$WORK/res" ]] || fail "a rejected scenario left results"

# --- device and precision ---
if grep -q '"device": "cpu"' "$WORK/run/run.json"; then  # auto found no CUDA: this LibTorch or machine has none
  expect_error "train --device cuda without CUDA" "--device cuda: .*no CUDA.*$" -- \
    "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/r1" --device cuda
  expect_error "eval --device cuda without CUDA" "--device cuda: .*no CUDA.*$" -- \
    "$XTRAP" eval "$WORK/run" --device cuda --no-progress --out "$WORK/e.csv"
else
  printf '%-34s %s\n' "--device cuda" "skipped: CUDA is present (the gpu tests cover it)"
fi
expect_error "train --device gpu" "unknown device 'gpu' \\(valid: auto \\| cpu \\| cuda\\)$" -- \
  "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/r1" --device gpu
expect_error "eval --dtype bogus" "unknown dtype 'bogus' \\(valid: float32 \\| bfloat16\\)$" -- \
  "$XTRAP" eval "$WORK/run" --dtype bogus --no-progress --out "$WORK/e.csv"
expect_error "probe --dtype float16 (renamed)" "--dtype float16: the stored maps' type is now --store-dtype" -- \
  "$XTRAP" probe "$WORK/run" --dump-attn "$WORK/a.h5" --dtype float16
expect_error "train --resume --dtype" "--dtype does not apply with --resume" -- \
  "$XTRAP" train --resume "$WORK/run" --dtype bfloat16 --no-progress
expect_error "train --init without --L" "--init needs --L, the length to adapt to$" -- \
  "$XTRAP" train --init "$WORK/run" --no-progress --out "$WORK/r1"
expect_error "train --init --layers" "--layers does not apply with --init \\(the source run's model is adapted\\)" -- \
  "$XTRAP" train --init "$WORK/run" --L 64 --layers 3 --no-progress --out "$WORK/r1"
expect_error "train --init dynamic-ntk" "--init with --interp dynamic-ntk: a dynamic interpolation" -- \
  "$XTRAP" train --init "$WORK/run" --L 64 --interp dynamic-ntk --no-progress --out "$WORK/r1"
expect_error "train --init other data" "--init $WORK/run was trained on other data than $WORK/other" -- \
  "$XTRAP" train --init "$WORK/run" --L 64 --data "$WORK/other" --no-progress --out "$WORK/r1"
printf '[train]\ndevice = "gpu"\n[[variant]]\nname = "a"\npos = "alibi"\n' > "$WORK/device.toml"
expect_error "scenario device key" "$WORK/device.toml:2:10: device: unknown device 'gpu'" -- \
  "$XTRAP" run "$WORK/device.toml" --dry-run --results "$WORK/res"
[[ ! -e "$WORK/r1" && ! -e "$WORK/e.csv" && ! -e "$WORK/a.h5" && ! -e "$WORK/res" ]] ||
  fail "a rejected device or precision left output"

# --- numerical guard: injected NaN losses stop the run at --max-bad-steps ---
expect_error "NaN losses, --max-bad-steps 2" \
  "training stopped at step 4: 2 steps had a non-finite loss or gradient \\(--max-bad-steps 2\\); last good checkpoint $WORK/nan/checkpoint.pt \\(step 2\\)$" -- \
  "$XTRAP" train "${TINY[@]}" --steps 8 --eval-tokens 64 --checkpoint-every 2 --data "$WORK/data" --out "$WORK/nan" \
  --inject-nan-at 3,4 --max-bad-steps 2
grep -q '"status": "stopped"' "$WORK/nan/run.json" || fail "stopped run not marked stopped"
tail -n 1 "$WORK/nan/train.jsonl" | grep -q '"bad_steps":2' || fail "train.jsonl does not report 2 bad steps"
echo "PASS: $cases hostile inputs rejected cleanly"
