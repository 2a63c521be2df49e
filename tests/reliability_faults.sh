#!/usr/bin/env bash
# Faults of issue 27 in one process: a checkpoint that does not belong to its run.json, two writers
# of one run directory, incomplete plots, signals and stale temporaries around exports and probes,
# HDF5 errors with their reason, an address-space limit, and the small messages (a path through a
# file, a second signal, data changed after training). Each case must end with exit status 1 and
# one line (or the signal's status), never with wrong numbers, a crash, a hang or a file left.
# usage: reliability_faults.sh XTRAP [unused]
source "$(dirname "$0")/reliability_lib.sh" "$@"
cases=0

# with_pending_signal SIG COMMAND...: COMMAND starts with SIG already sent and waiting (blocked
# across exec until xtrap installs its handlers), so the signal lands at a known point: before
# any work.
with_pending_signal() {
  python3 -c 'import os, signal, sys
sig = getattr(signal, sys.argv[1])
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
os.kill(os.getpid(), sig)
os.execv(sys.argv[2], sys.argv[2:])' "$@"
}

make_corpus "$WORK/data" 400 60 21
TRAIN=("$XTRAP" train "${TINY[@]}" --steps 4 --eval-tokens 64 --checkpoint-every 2)
"${TRAIN[@]}" --data "$WORK/data" --out "$WORK/run" > /dev/null 2>&1 || fail "training the reference run failed"
"$XTRAP" train --layers 1 --d-model 64 --heads 2 --ffn 64 --L 32 --batch 4 --threads 1 --no-progress --steps 4 \
  --eval-tokens 64 --data "$WORK/data" --out "$WORK/wide" > /dev/null 2>&1 || fail "training the wide run failed"

# --- 1. a checkpoint that does not belong to its run.json ---
cp -r "$WORK/run" "$WORK/copied"
cp "$WORK/wide/checkpoint.pt" "$WORK/copied/checkpoint.pt"
for cmd in eval probe export; do
  args=("$WORK/copied")
  [[ $cmd == eval ]] && args+=(--Lvalid 32 --threads 1)
  [[ $cmd == probe ]] && args+=(--dump-bias "$WORK/b.h5")
  [[ $cmd == export ]] && args+=("$WORK/exported")
  expect_error "$cmd: another run's checkpoint" \
    "checkpoint $WORK/copied/checkpoint.pt does not belong to $WORK/copied/run.json: d_model is 64 in the checkpoint, 32 in run.json$" \
    -- "$XTRAP" "$cmd" "${args[@]}"
done
expect_error "resume: another run's checkpoint" "checkpoint $WORK/copied/checkpoint.pt does not belong to $WORK/copied/run.json: d_model is 64" \
  -- "$XTRAP" train --resume "$WORK/copied" --no-progress
cp -r "$WORK/run" "$WORK/edited"
sed -i 's/"pos": "alibi"/"pos": "rotary"/' "$WORK/edited/run.json"
expect_error "eval: run.json pos edited" \
  "checkpoint $WORK/edited/checkpoint.pt does not belong to $WORK/edited/run.json: pos is \"alibi\" in the checkpoint, \"rotary\" in run.json$" \
  -- "$XTRAP" eval "$WORK/edited" --Lvalid 32 --threads 1
sed -i 's/"pos": "rotary"/"pos": "alibi"/; s/"d_model": 32/"d_model": 64/' "$WORK/edited/run.json"
expect_error "export: run.json d_model edited" \
  "checkpoint $WORK/edited/checkpoint.pt does not belong to $WORK/edited/run.json: d_model is 32 in the checkpoint, 64 in run.json$" \
  -- "$XTRAP" export "$WORK/edited" "$WORK/exported"
[[ ! -e "$WORK/b.h5" && ! -e "$WORK/exported" ]] || fail "output written from a checkpoint of another model"
no_temporaries "$WORK"

# --- 2. one writer per run directory ---
"$XTRAP" train --out "$WORK/busy" --data "$WORK/data" "${TINY[@]}" --steps 100000 --log-every 1 --eval-every 0 \
  --eval-tokens 64 --checkpoint-every 1000 > /dev/null 2> "$WORK/busy_err" &
busy=$!
wait_for_lines "$WORK/busy/train.jsonl" 2
expect_error "resume beside a running train" "run directory $WORK/busy is in use by process $busy \(one writer per run\)$" \
  -- "$XTRAP" train --resume "$WORK/busy" --no-progress
kill -KILL "$busy"
wait "$busy" 2> /dev/null
# The kernel dropped the lock with the process: a resume takes over at once.
"$XTRAP" train --resume "$WORK/busy" --no-progress > /dev/null 2> "$WORK/err" &
resumed=$!
lines=$(wc -l < "$WORK/busy/train.jsonl")
wait_for_lines "$WORK/busy/train.jsonl" $((lines + 2))
kill -TERM "$resumed"
wait "$resumed"
rc=$?
[[ $rc -eq 143 ]] || fail "resume after kill -9 of the holder exited $rc: $(cat "$WORK/err")"
echo "resume after kill -9 of the lock holder   ran, then exit 143 on SIGTERM"
# Two fresh trains started together: one trains, the other is refused with one line.
for k in 1 2; do
  "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/race" > /dev/null 2> "$WORK/race_err$k" &
  racer[k]=$!
done
wait "${racer[1]}"
rc1=$?
wait "${racer[2]}"
rc2=$?
[[ $((rc1 + rc2)) -eq 1 ]] || fail "two trains into one directory: exit statuses $rc1 and $rc2"
loser=$([[ $rc1 -eq 1 ]] && echo 1 || echo 2)
[[ $(wc -l < "$WORK/race_err$loser") -eq 1 ]] &&
  grep -Eq "^xtrap: error: run directory $WORK/race (is in use by process [0-9]+ \(one writer per run\)|already holds a run)" \
    "$WORK/race_err$loser" || fail "the refused train said: $(cat "$WORK/race_err$loser")"
grep -q '"status": "finished"' "$WORK/race/run.json" || fail "the winning train did not finish its run"
echo "two trains into one directory            $(cat "$WORK/race_err$loser")"

# --- 5. plots: an incomplete PNG never gets the final name ---
"$XTRAP" eval "$WORK/run" --Lvalid 16,32 --threads 1 --out "$WORK/e.csv" > /dev/null 2>&1 || fail "eval failed"
# A gnuplot that exits 0 after writing half a PNG (as on a full disk).
cat > "$WORK/torn_gnuplot" << 'EOF'
#!/bin/sh
[ "$1" = --version ] && exit 0
out=$(sed -n "s/^set output '\(.*\)'$/\1/p" "$1")
printf '\211PNG\r\n\032\n\0\0\0\rIHDR' > "$out"
exit 0
EOF
chmod +x "$WORK/torn_gnuplot"
expect_error "plot: gnuplot leaves a torn PNG" \
  "gnuplot failed to draw $WORK/p.png: the file it wrote is incomplete \(disk full\?\)$" \
  -- env XTRAP_GNUPLOT="$WORK/torn_gnuplot" "$XTRAP" plot "$WORK/e.csv" --out "$WORK/p.png"
[[ ! -e "$WORK/p.png" ]] || fail "a torn PNG got the final name"
if command -v gnuplot > /dev/null; then
  # The real gnuplot over a file-size limit: it exits 0 with a truncated PNG.
  expect_error "plot: file-size limit" "gnuplot failed to draw $WORK/p.png" \
    -- bash -c 'ulimit -f 2; exec "$@"' _ "$XTRAP" plot "$WORK/e.csv" --out "$WORK/p.png"
  # eval has written its results (and said where) when the plot fails: the error is its last line.
  bash -c 'ulimit -f 2; exec "$@"' _ "$XTRAP" eval "$WORK/run" --Lvalid 16,32 --threads 1 --no-progress \
    --plot "$WORK/q.png" > /dev/null 2> "$WORK/err"
  rc=$?
  [[ $rc -eq 1 && $(tail -n 1 "$WORK/err") == "xtrap: error: gnuplot failed to draw $WORK/q.png: "* ]] ||
    fail "eval --plot over a file-size limit: exit $rc, stderr: $(cat "$WORK/err")"
  ! grep -q '^plot: ' "$WORK/err" || fail "eval --plot claimed a plot: $(cat "$WORK/err")"
  printf '%-40s %s\n' "eval --plot: file-size limit" "$(tail -n 1 "$WORK/err")"
  [[ ! -e "$WORK/p.png" && ! -e "$WORK/q.png" ]] || fail "a plot was left over a file-size limit"
fi
no_temporaries "$WORK"

# --- 6. exports and probes: signals, stale temporaries, HDF5 reasons ---
with_pending_signal SIGTERM "$XTRAP" export "$WORK/run" "$WORK/exported" > /dev/null 2> "$WORK/err"
rc=$?
[[ $rc -eq 143 && $(cat "$WORK/err") == "xtrap: interrupted by SIGTERM" ]] ||
  fail "export under SIGTERM: exit $rc, stderr: $(cat "$WORK/err")"
[[ ! -e "$WORK/exported" ]] || fail "export under SIGTERM left its output"
echo "export under SIGTERM                     exit 143, xtrap: interrupted by SIGTERM"
# Temporaries of processes killed with SIGKILL (a pid above pid_max belongs to no process).
mkdir -p "$WORK/exported.tmp.99999999" && echo x > "$WORK/exported.tmp.99999999/model.safetensors"
echo x > "$WORK/b.h5.tmp.99999999"
"$XTRAP" export "$WORK/run" "$WORK/exported" > /dev/null || fail "export failed"
"$XTRAP" probe "$WORK/run" --dump-bias "$WORK/b.h5" --len 64 > /dev/null || fail "probe failed"
no_temporaries "$WORK"
echo "stale OUT.tmp.PID/ and b.h5.tmp.PID       removed by the next export / probe"
# ulimit -f 0 (as a full disk) for xtrap alone: its stderr goes through a pipe to a file.
expect_error "probe into a full directory" "(cannot write $WORK/full.h5|HDF5 error while [a-z]+ .*): File too large$" \
  -- bash -c '(ulimit -f 0; exec "$@") 2>&1 > /dev/null | cat >&2; exit ${PIPESTATUS[0]}' _ \
  "$XTRAP" probe "$WORK/run" --dump-bias "$WORK/full.h5" --len 64
[[ ! -e "$WORK/full.h5" ]] || fail "probe into a full directory left full.h5"
no_temporaries "$WORK"

# --- 7. an address-space limit: never a hang ---
for limit_kb in 700000 1000000; do
  timeout 60 bash -c "ulimit -v $limit_kb; exec \"\$@\"" _ "$XTRAP" --version > /dev/null 2> "$WORK/err"
  rc=$?
  [[ $rc -ne 124 ]] || fail "xtrap --version hung under ulimit -v $limit_kb"
  # A CUDA LibTorch (libtorch_cuda.so and the CUDA libraries it loads) does not fit these limits:
  # the dynamic loader refuses the program in one line before it starts (exit 127).
  if [[ $rc -eq 127 ]] && ldd "$XTRAP" | grep -q 'libtorch_cuda\.so'; then
    [[ $(wc -l < "$WORK/err") -eq 1 ]] && grep -q "error while loading shared libraries: .*failed to map segment" "$WORK/err" ||
      fail "ulimit -v $limit_kb: exit $rc, stderr: $(cat "$WORK/err")"
  elif [[ $rc -ne 0 ]]; then
    [[ $rc -eq 1 && $(wc -l < "$WORK/err") -eq 1 ]] &&
      grep -q "^xtrap: error: the address-space limit (ulimit -v) of [0-9]* MiB is too small" "$WORK/err" ||
      fail "ulimit -v $limit_kb: exit $rc, stderr: $(cat "$WORK/err")"
  fi
  printf '%-40s exit %s %s\n' "--version under ulimit -v $limit_kb" "$rc" "$(cat "$WORK/err")"
done

# --- 9. small messages ---
echo x > "$WORK/afile"
expect_error "eval --out under a file" "cannot write $WORK/afile/e.csv: $WORK/afile is not a directory$" \
  -- "$XTRAP" eval "$WORK/run" --Lvalid 32 --threads 1 --out "$WORK/afile/e.csv"
expect_error "train --out on a file" "cannot create run directory $WORK/afile: $WORK/afile is not a directory$" \
  -- "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/afile"
expect_error "train --out below a file" "cannot create run directory $WORK/afile/run: $WORK/afile is not a directory$" \
  -- "${TRAIN[@]}" --data "$WORK/data" --out "$WORK/afile/run"
# Data edited after training, keeping the vocabulary size: a warning on eval and on resume.
cp -r "$WORK/run" "$WORK/drift" && cp -r "$WORK/data" "$WORK/drift_data"
python3 - "$WORK/drift/run.json" "$WORK/drift_data" << 'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["train"]["data"] = sys.argv[2]; j["train"]["steps"] = 6
json.dump(j, open(sys.argv[1], "w"), indent=2)
PY
"$XTRAP" eval "$WORK/drift" --Lvalid 32 --threads 1 > /dev/null 2> "$WORK/err" || fail "eval of the copied run failed"
grep -q warning "$WORK/err" && fail "eval warned about unchanged data: $(cat "$WORK/err")"
tac "$WORK/drift_data/wiki.valid.tokens" > "$WORK/reversed" && mv "$WORK/reversed" "$WORK/drift_data/wiki.valid.tokens"
warning="^xtrap: warning: the data in $WORK/drift_data changed since run $WORK/drift was trained \(data digest fnv1a64:[0-9a-f]{16} in run.json, fnv1a64:[0-9a-f]{16} now\)$"
"$XTRAP" eval "$WORK/drift" --Lvalid 32 --threads 1 > /dev/null 2> "$WORK/err" || fail "eval after the data changed failed"
grep -Eq "$warning" "$WORK/err" || fail "eval after the data changed: $(cat "$WORK/err")"
"$XTRAP" train --resume "$WORK/drift" --no-progress > /dev/null 2> "$WORK/err" || fail "resume after the data changed failed"
grep -Eq "$warning" "$WORK/err" || fail "resume after the data changed: $(cat "$WORK/err")"
echo "data changed after training              $(grep warning "$WORK/err")"
echo "PASS: $cases error cases, lock, signals, plots, temporaries, memory limit and data digest"
