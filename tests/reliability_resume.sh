#!/usr/bin/env bash
# Exact resume: a run killed with SIGKILL at random moments (several times, including during
# checkpoint writes) and resumed each time ends with the same parameters, optimizer-driven
# updates, data order, RNG state and logged losses as an uninterrupted run.
# usage: reliability_resume.sh XTRAP COMPARE_CHECKPOINTS
source "$(dirname "$0")/reliability_lib.sh" "$@"
make_corpus "$WORK/data" 3000 400 11

ARGS=(--data "$WORK/data" "${TINY[@]}" --steps 600 --dropout 0.1 --seed 5 --checkpoint-every 4 --log-every 1
      --eval-every 20 --eval-tokens 256 --batch-order contiguous)
"$XTRAP" train --out "$WORK/straight" "${ARGS[@]}" > /dev/null || fail "uninterrupted run failed"

RANDOM=${XTRAP_TEST_SEED:-$$}
kills=0
resumes=0
finished=0
log_lines() { if [[ -f "$WORK/killed/train.jsonl" ]]; then wc -l < "$WORK/killed/train.jsonl"; else echo 0; fi; }
while (( kills < 5 )); do
  before=$(log_lines)
  if [[ -f "$WORK/killed/run.json" ]]; then
    "$XTRAP" train --resume "$WORK/killed" --no-progress > /dev/null 2> "$WORK/err" &
    resumes=$((resumes + 1))
  else  # killed before run.json existed: nothing to resume, start over
    rm -rf "$WORK/killed"
    "$XTRAP" train --out "$WORK/killed" "${ARGS[@]}" > /dev/null 2> "$WORK/err" &
  fi
  pid=$!
  # Past start-up (~1 s of LibTorch and data loading) once a new step is logged; then a random delay.
  for _ in $(seq 500); do
    (( $(log_lines) > before )) && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.02
  done
  sleep "0.$(( RANDOM % 30 ))"
  if ! kill -KILL "$pid" 2> /dev/null; then
    wait "$pid" || fail "run exited with an error: $(cat "$WORK/err")"
    finished=1
    break
  fi
  wait "$pid" 2> /dev/null
  kills=$((kills + 1))
  echo "SIGKILL $kills at step $(tail -n 1 "$WORK/killed/train.jsonl" 2> /dev/null | python3 -c 'import json,sys
try: print(json.loads(sys.stdin.read())["step"])
except Exception: print("?")')"
done
if (( !finished )); then
  "$XTRAP" train --resume "$WORK/killed" --no-progress > /dev/null || fail "final resume failed"
fi
(( kills > 0 )) || fail "the run finished before the first SIGKILL; the test proved nothing"

diff <(jsonl_core "$WORK/straight/train.jsonl") <(jsonl_core "$WORK/killed/train.jsonl") ||
  fail "train.jsonl differs after $kills kills"
"$COMPARE" "$WORK/straight" "$WORK/killed" || fail "final checkpoints differ after $kills kills"
no_temporaries "$WORK/killed"
grep -q '"status": "finished"' "$WORK/killed/run.json" || fail "resumed run is not marked finished"
echo "PASS: $kills SIGKILLs, $resumes resumes, identical losses and parameters"
