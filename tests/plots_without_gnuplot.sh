#!/usr/bin/env bash
# A missing plotter never costs computed numbers. With XTRAP_GNUPLOT naming a program that does
# not exist: `xtrap run` warns in one line and still writes every CSV, table and probe (exit 0);
# `eval --plot` and `probe --plot` refuse in one line before any work. With gnuplot installed:
# `xtrap plot` redraws from the results CSV and `probe --plot` draws two runs side by side.
set -euo pipefail
xtrap=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/*.log; do echo "== $f" >&2; cat "$f" >&2; done; exit 1; }
missing=$tmp/no-such-gnuplot

XTRAP_GNUPLOT=$missing "$xtrap" run scenarios/smoke.toml --runs "$tmp/runs" --results "$tmp/results" --no-progress \
  > "$tmp/run.log" 2> "$tmp/run-stderr.log" || fail "xtrap run exited non-zero without gnuplot"
out=$tmp/results/smoke
for f in results.csv table.md scenario.toml version.txt manifest.json probe/alibi-bias.h5; do
  [ -s "$out/$f" ] || fail "missing $out/$f"
done
[ ! -e "$out/ppl_vs_length.png" ] || fail "a PNG appeared without a plotter"
[ "$(grep -c '^warning: ' "$tmp/run-stderr.log")" = 1 ] || fail "expected exactly one warning line"
grep -q "^warning: $missing not found: .*ppl_vs_length.png not drawn" "$tmp/run-stderr.log" ||
  fail "the warning does not name the plotter and the picture"

runs=("$tmp"/runs/*/)
[ "${#runs[@]}" = 2 ] || fail "expected two trained runs"
if XTRAP_GNUPLOT=$missing "$xtrap" eval "${runs[0]}" --Lvalid 32 --max-tokens 256 --out "$tmp/e.csv" \
  --plot "$tmp/e.png" --no-progress > "$tmp/eval.log" 2>&1; then
  fail "eval --plot without gnuplot succeeded"
fi
[ "$(wc -l < "$tmp/eval.log")" = 1 ] && grep -q "not found" "$tmp/eval.log" || fail "eval: not a one-line error"
[ ! -e "$tmp/e.csv" ] || fail "eval worked before refusing"
if XTRAP_GNUPLOT=$missing "$xtrap" probe "${runs[@]}" --plot "$tmp/a.png" --Lvalid 64 > "$tmp/probe.log" 2>&1; then
  fail "probe --plot without gnuplot succeeded"
fi
[ "$(wc -l < "$tmp/probe.log")" = 1 ] && grep -q "not found" "$tmp/probe.log" || fail "probe: not a one-line error"

if ! command -v gnuplot > /dev/null; then
  echo "plots without gnuplot: ok (gnuplot not installed: drawing not checked)"
  exit 0
fi
"$xtrap" plot "$out/results.csv" --out "$tmp/p.png" > "$tmp/plot.log" 2>&1 || fail "xtrap plot failed"
[ -s "$tmp/p.png" ] && [ -s "$tmp/p-ratio.png" ] || fail "xtrap plot drew no PNGs"
"$xtrap" probe "${runs[@]}" --plot "$tmp/a.png" --Lvalid 64 --layers 0 --threads 1 > "$tmp/probe2.log" 2>&1 ||
  fail "probe --plot failed"
[ -s "$tmp/a.png" ] && [ -s "$tmp/a-distance.png" ] || fail "probe --plot drew no PNGs"
echo "plots without gnuplot: ok"
