#!/usr/bin/env bash
# Faults of issue 27 around ranks: the ranks of `train --nproc` die with their launcher (kill -9)
# and stop with it (SIGTERM: exit 143, one line); a rank whose MASTER_PORT is taken (by a plain
# listener, or by another xtrap job's store) fails with one line naming the port or obeys SIGTERM
# while it waits, and never joins the other job.
# usage: reliability_ranks.sh XTRAP [unused]
# A build whose LibTorch ships no Gloo headers (a pip wheel's) has no CPU process groups.
[[ -z ${XTRAP_NO_GLOO:-} ]] || { echo "skipped: no CPU process groups in this build (its LibTorch ships no Gloo headers)"; exit 77; }
source "$(dirname "$0")/reliability_lib.sh" "$@"
make_corpus "$WORK/data" 3000 400 12
LONG=(--data "$WORK/data" "${TINY[@]}" --steps 100000 --log-every 1 --eval-every 0 --eval-tokens 64
      --checkpoint-every 1000)

# gone PID...: true once none of the processes exists (at most ~10 s).
gone() {
  for _ in $(seq 100); do
    local alive=0
    for p in "$@"; do kill -0 "$p" 2> /dev/null && alive=1; done
    [[ $alive -eq 0 ]] && return 0
    sleep 0.1
  done
  return 1
}

# connected PID PORT: until PID has a TCP connection to 127.0.0.1:PORT, i.e. it is waiting in the
# store (at most ~60 s).
connected() {
  for _ in $(seq 600); do
    ss -Htnp state established dst "127.0.0.1:$2" 2> /dev/null | grep -q "pid=$1," && return 0
    sleep 0.1
  done
  fail "process $1 never connected to port $2"
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- 3a. kill -9 of the launcher takes its ranks with it ---
"$XTRAP" train --nproc 2 --out "$WORK/orphans" "${LONG[@]}" > /dev/null 2>&1 &
launcher=$!
wait_for_lines "$WORK/orphans/train.jsonl" 2 1200
ranks=($(pgrep -P "$launcher"))
[[ ${#ranks[@]} -eq 2 ]] || fail "expected 2 ranks under the launcher, found: ${ranks[*]}"
kill -KILL "$launcher"
wait "$launcher" 2> /dev/null
gone "${ranks[@]}" || fail "ranks ${ranks[*]} outlived their launcher"
echo "kill -9 of the launcher: ranks ${ranks[*]} gone"

# --- 3b. SIGTERM to the launcher: the ranks checkpoint, exit 143, one line ---
"$XTRAP" train --nproc 2 --resume "$WORK/orphans" --no-progress > /dev/null 2> "$WORK/err" &
launcher=$!
lines=$(wc -l < "$WORK/orphans/train.jsonl")
wait_for_lines "$WORK/orphans/train.jsonl" $((lines + 2)) 1200
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[[ $rc -eq 143 ]] || fail "launcher after SIGTERM exited $rc: $(cat "$WORK/err")"
[[ $(wc -l < "$WORK/err") -eq 1 ]] || fail "launcher after SIGTERM: expected one line, got: $(cat "$WORK/err")"
grep -Eq "^xtrap: interrupted by SIGTERM at step [0-9]+: checkpoint saved; continue with xtrap train --resume $WORK/orphans$" \
  "$WORK/err" || fail "unexpected message: $(cat "$WORK/err")"
grep -q '"status": "interrupted"' "$WORK/orphans/run.json" || fail "run.json not marked interrupted"
echo "SIGTERM to the launcher: exit 143, $(cat "$WORK/err")"

# --- 3c. a second signal stops at once, and says so (the ranks go with the launcher) ---
"$XTRAP" train --nproc 2 --resume "$WORK/orphans" --no-progress > /dev/null 2> "$WORK/err" &
launcher=$!
lines=$(wc -l < "$WORK/orphans/train.jsonl")
wait_for_lines "$WORK/orphans/train.jsonl" $((lines + 2)) 1200
ranks=($(pgrep -P "$launcher"))
kill -TERM "$launcher"
sleep 0.05  # two separate deliveries (a signal sent while one is pending merges with it)
kill -TERM "$launcher"
wait "$launcher"
rc=$?
[[ $rc -eq 143 ]] || fail "launcher after two SIGTERMs exited $rc: $(cat "$WORK/err")"
grep -q "^xtrap: second SIGTERM: stopped at once, without cleanup$" "$WORK/err" ||
  fail "two SIGTERMs: $(cat "$WORK/err")"
gone "${ranks[@]}" || fail "ranks ${ranks[*]} outlived their launcher's second signal"
echo "two SIGTERMs to the launcher: exit 143, $(grep second "$WORK/err")"

# --- 4a. MASTER_PORT held by something that is no store ---
PORT=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); time.sleep(120)' "$PORT" &
listener=$!
sleep 0.5
JOB=(env WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT "$XTRAP" train --out "$WORK/taken" "${LONG[@]}")
RANK=0 timeout 60 "${JOB[@]}" > /dev/null 2> "$WORK/err0"
rc=$?
[[ $rc -eq 1 && $(wc -l < "$WORK/err0") -eq 1 ]] || fail "rank 0 on a taken port: exit $rc, stderr: $(cat "$WORK/err0")"
grep -q "^xtrap: error: rank 0: cannot join the job at 127.0.0.1:$PORT (MASTER_PORT): " "$WORK/err0" ||
  fail "rank 0 on a taken port: $(cat "$WORK/err0")"
echo "rank 0, port taken: $(cat "$WORK/err0")"
RANK=1 "${JOB[@]}" > /dev/null 2> "$WORK/err1" &
rank1=$!
connected "$rank1" "$PORT"
sleep 1
kill -TERM "$rank1"
gone "$rank1" || fail "rank 1 waiting on a taken port ignored SIGTERM"
wait "$rank1"
rc=$?
[[ $rc -eq 143 && $(wc -l < "$WORK/err1") -eq 1 ]] || fail "rank 1 on a taken port: exit $rc, stderr: $(cat "$WORK/err1")"
grep -q "^xtrap: interrupted by SIGTERM while rank 1 was joining the job at 127.0.0.1:$PORT (MASTER_PORT)$" "$WORK/err1" ||
  fail "rank 1 on a taken port: $(cat "$WORK/err1")"
echo "rank 1, port taken, SIGTERM: exit 143, $(cat "$WORK/err1")"
# The listener goes away while rank 1 waits: one line, not "terminate called ...", and one line
# whichever of rank 1's threads sees the connection close first (its join, or LibTorch's background
# client): both said theirs before.
RANK=1 "${JOB[@]}" > /dev/null 2> "$WORK/err1" &
rank1=$!
connected "$rank1" "$PORT"
kill "$listener"
wait "$listener" 2> /dev/null
gone "$rank1" || fail "rank 1 hung after the listener at its port closed"
wait "$rank1"
rc=$?
[[ $rc -eq 1 && $(wc -l < "$WORK/err1") -eq 1 ]] || fail "rank 1, listener closed: exit $rc, stderr: $(cat "$WORK/err1")"
grep -q "^xtrap: error: rank 1: cannot join the job at 127.0.0.1:$PORT (MASTER_PORT): " "$WORK/err1" ||
  fail "rank 1, listener closed: $(cat "$WORK/err1")"
echo "rank 1, port taken, listener closes: $(cat "$WORK/err1")"

# --- 4b. MASTER_PORT held by another xtrap job's store: never joined ---
"$XTRAP" train --nproc 2 --out "$WORK/other" "${LONG[@]}" > /dev/null 2> "$WORK/other_err" &
other=$!
wait_for_lines "$WORK/other/train.jsonl" 2 1200
other_rank=$(pgrep -P "$other" | head -n 1)
PORT=$(tr '\0' '\n' < "/proc/$other_rank/environ" | sed -n 's/^MASTER_PORT=//p')
[[ -n "$PORT" ]] || fail "no MASTER_PORT in the other job's environment"
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
  "$XTRAP" train --out "$WORK/intruder" "${LONG[@]}" > /dev/null 2> "$WORK/err1" &
intruder=$!
connected "$intruder" "$PORT"
lines=$(wc -l < "$WORK/other/train.jsonl")
sleep 2
wait_for_lines "$WORK/other/train.jsonl" $((lines + 3)) 1200  # the other job trains on, undisturbed
kill -TERM "$intruder"
gone "$intruder" || fail "the rank waiting on another job's store ignored SIGTERM"
wait "$intruder"
rc=$?
[[ $rc -eq 143 && $(wc -l < "$WORK/err1") -eq 1 ]] || fail "intruding rank: exit $rc, stderr: $(cat "$WORK/err1")"
grep -q "^xtrap: interrupted by SIGTERM while rank 1 was joining the job at 127.0.0.1:$PORT (MASTER_PORT)$" "$WORK/err1" ||
  fail "intruding rank: $(cat "$WORK/err1")"
kill -0 "$other" 2> /dev/null || fail "the other job died: $(cat "$WORK/other_err")"
kill -TERM "$other"
wait "$other"
rc=$?
[[ $rc -eq 143 ]] || fail "the other job, stopped by SIGTERM, exited $rc: $(cat "$WORK/other_err")"
echo "rank 1 on another job's store: not joined; SIGTERM: exit 143, $(cat "$WORK/err1")"
echo "PASS: ranks die and stop with their launcher; a taken MASTER_PORT fails with one line or obeys SIGTERM"
