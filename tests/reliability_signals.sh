#!/usr/bin/env bash
# SIGTERM/SIGINT: train checkpoints the current step, marks the run interrupted and exits with
# 128+signal; a resume continues from that step. eval and probe stop between batches / blocks
# and leave neither their output file nor a temporary.
# usage: reliability_signals.sh XTRAP [unused]
source "$(dirname "$0")/reliability_lib.sh" "$@"
make_corpus "$WORK/data" 3000 400 12

# wait_for_file PATTERN: until a file matching the glob exists (at most ~60 s).
wait_for_file() {
  for _ in $(seq 600); do
    compgen -G "$1" > /dev/null && return 0
    sleep 0.1
  done
  fail "no file $1 appeared"
}

# --- train: SIGTERM, then SIGINT after resuming ---
"$XTRAP" train --out "$WORK/run" --data "$WORK/data" "${TINY[@]}" --steps 100000 --log-every 1 --eval-every 0 \
  --checkpoint-every 1000 2> "$WORK/err" > /dev/null &
pid=$!
wait_for_lines "$WORK/run/train.jsonl" 3
kill -TERM "$pid"
wait "$pid"
rc=$?
[[ $rc -eq 143 ]] || fail "train after SIGTERM exited $rc: $(cat "$WORK/err")"
grep -Eq "^xtrap: interrupted by SIGTERM at step [0-9]+: checkpoint saved; continue with xtrap train --resume $WORK/run$" \
  "$WORK/err" || fail "unexpected message: $(cat "$WORK/err")"
step=$(grep -Eo 'step [0-9]+' "$WORK/err" | grep -Eo '[0-9]+')
grep -q '"status": "interrupted"' "$WORK/run/run.json" || fail "run.json not marked interrupted"
grep -q "\"steps_done\": $step" "$WORK/run/run.json" || fail "run.json steps_done is not $step"
[[ -f "$WORK/run/checkpoint.pt" ]] || fail "no checkpoint after SIGTERM"
no_temporaries "$WORK/run"

"$XTRAP" train --resume "$WORK/run" --no-progress 2> "$WORK/err" > /dev/null &
pid=$!
wait_for_lines "$WORK/run/train.jsonl" $((step + 3))
kill -INT "$pid"
wait "$pid"
rc=$?
[[ $rc -eq 130 ]] || fail "resumed train after SIGINT exited $rc: $(cat "$WORK/err")"
grep -q "^xtrap: interrupted by SIGINT at step" "$WORK/err" || fail "unexpected message: $(cat "$WORK/err")"
first_resumed=$(sed -n "$((step + 1))p" "$WORK/run/train.jsonl" | grep -Eo '"step":[0-9]+' | grep -Eo '[0-9]+')
[[ $first_resumed -eq $((step + 1)) ]] || fail "resume did not continue at step $((step + 1)) (got $first_resumed)"
no_temporaries "$WORK/run"

# --- eval: sliding windows with stride 1 take seconds; signalled once its progress line shows scoring began ---
"$XTRAP" train --out "$WORK/small" --data "$WORK/data" "${TINY[@]}" --steps 2 --eval-tokens 64 > /dev/null ||
  fail "training the eval run failed"
# err still holds the resumed train's line: waiting on it could signal the shell's child before it
# runs xtrap (that child runs this script's EXIT trap on SIGINT, or ignores SIGINT and xtrap never sees it).
rm -f "$WORK/err"
"$XTRAP" eval "$WORK/small" --Lvalid 64 --mode sliding --stride 1 --threads 1 \
  --out "$WORK/eval.csv" --per-position "$WORK/pos.csv" > /dev/null 2> "$WORK/err" &
pid=$!
wait_for_lines "$WORK/err" 1
kill -INT "$pid" || fail "eval finished before the signal"
wait "$pid"
rc=$?
[[ $rc -eq 130 ]] || fail "eval after SIGINT exited $rc: $(cat "$WORK/err")"
[[ $(tail -n 1 "$WORK/err") == "xtrap: interrupted by SIGINT" ]] || fail "unexpected message: $(cat "$WORK/err")"
[[ ! -e "$WORK/eval.csv" && ! -e "$WORK/pos.csv" ]] || fail "eval left an output file"
no_temporaries "$WORK"

# --- probe: an attention dump of 8192 tokens in 16-row blocks, signalled once its HDF5 temporary exists ---
"$XTRAP" probe "$WORK/small" --dump-attn "$WORK/attn.h5" --Lvalid 8192 --query-block 16 --threads 1 \
  > /dev/null 2> "$WORK/err" &
pid=$!
wait_for_file "$WORK/attn.h5.tmp.*"
kill -TERM "$pid" || fail "probe finished before the signal"
wait "$pid"
rc=$?
[[ $rc -eq 143 ]] || fail "probe after SIGTERM exited $rc: $(cat "$WORK/err")"
grep -q "^xtrap: interrupted by SIGTERM$" "$WORK/err" || fail "unexpected message: $(cat "$WORK/err")"
[[ ! -e "$WORK/attn.h5" ]] || fail "probe left attn.h5"
no_temporaries "$WORK"
echo "PASS: train checkpointed at step $step on SIGTERM and resumed; eval and probe left no files"
