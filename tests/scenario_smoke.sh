#!/usr/bin/env bash
# `xtrap run scenarios/smoke.toml` end to end: the dry run, a run killed (SIGKILL) as soon as its
# first variant has finished, the re-run that completes it without retraining that variant, and
# a third run that neither trains nor evaluates anything.
set -euo pipefail
xtrap=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(scenarios/smoke.toml --runs "$tmp/runs" --results "$tmp/results" --no-progress)
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/log*; do echo "== $f" >&2; cat "$f" >&2; done; exit 1; }

"$xtrap" run "${args[@]}" --dry-run > "$tmp/log0"
grep -q 'alibi .* train 40 steps' "$tmp/log0" || fail "dry run does not plan to train alibi"
grep -q 'total ~' "$tmp/log0" || fail "dry run prints no time estimate"
[ ! -e "$tmp/runs" ] || fail "dry run created run directories"
! grep -q 'CPU estimate' "$tmp/log0" || fail "a CPU scenario's estimate is qualified"
# A GPU scenario's estimate says it is the CPU's.
"$xtrap" run scenarios/paper-table2-gpu.toml --runs "$tmp/runs" --dry-run > "$tmp/log_gpu"
grep -q '^total ~.* (CPU estimate: 5 of 5 variant(s) train on cuda, whose time it does not model)$' "$tmp/log_gpu" ||
  fail "a GPU scenario's dry run does not say its estimate is the CPU's"

"$xtrap" run "${args[@]}" > "$tmp/log1" 2>&1 &
pid=$!
finished=""
for _ in $(seq 1200); do
  finished=$(grep -l '"status": "finished"' "$tmp"/runs/*/run.json 2>/dev/null | head -1 || true)
  [ -n "$finished" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
[ -n "$finished" ] || fail "no variant finished training"
dir=$(dirname "$finished")
before=$(stat -c %Y.%y "$dir/checkpoint.pt")

"$xtrap" run "${args[@]}" > "$tmp/log2" 2>&1 || fail "re-run after kill failed"
grep -q "reusing finished run $dir" "$tmp/log2" || fail "re-run did not reuse $dir"
[ "$(stat -c %Y.%y "$dir/checkpoint.pt")" = "$before" ] || fail "re-run rewrote the finished checkpoint"
out=$tmp/results/smoke
# The plot needs gnuplot (xtrap run only warns without it; tests/plots_without_gnuplot.sh checks that).
expected=(results.csv table.md scenario.toml version.txt manifest.json probe/alibi-bias.h5)
command -v "${XTRAP_GNUPLOT:-gnuplot}" > /dev/null && expected+=(ppl_vs_length.png)
for f in "${expected[@]}"; do
  [ -s "$out/$f" ] || fail "missing $out/$f"
done
cmp -s scenarios/smoke.toml "$out/scenario.toml" || fail "scenario.toml is not the scenario text"
grep -q '^| alibi |' "$out/table.md" || fail "table.md has no alibi row"
[ "$(grep -c ',alibi,' "$out/results.csv")" = 6 ] || fail "results.csv should hold 3 lengths x 2 modes for alibi"
# The committed results/smoke are what this code computes: every row's perplexity again, to 0.1%
# (the last digits move with the CPU's BLAS kernels; a change to training or scoring moves more).
python3 - "$out/results.csv" results/smoke/results.csv > "$tmp/log_cmp" 2>&1 <<'PY' || fail "results/smoke/results.csv is not what this code computes (re-run xtrap run scenarios/smoke.toml): $(cat "$tmp/log_cmp")"
import csv, sys
def rows(path):
    return {(r["run"], r["Lvalid"], r["mode"], r["stride"], r["interp"]): float(r["ppl"]) for r in csv.DictReader(open(path))}
fresh, committed = rows(sys.argv[1]), rows(sys.argv[2])
if fresh.keys() != committed.keys():
    sys.exit(f"rows differ: {sorted(fresh.keys() ^ committed.keys())}")
bad = [f"{k}: {committed[k]} committed, {fresh[k]} now" for k in fresh if abs(fresh[k] / committed[k] - 1) > 1e-3]
if bad:
    sys.exit("; ".join(bad))
PY

"$xtrap" run "${args[@]}" > "$tmp/log3" 2>&1 || fail "third run failed"
[ "$(grep -c 'reusing finished run' "$tmp/log3")" = 2 ] || fail "third run did not reuse both variants"
! grep -q 'evaluating' "$tmp/log3" || fail "third run evaluated again instead of using the cache"
echo "scenario smoke: ok"
