#!/usr/bin/env bash
# Scenarios fail early or leave what worked (issue 27, item 8): a variant that cannot be evaluated
# as asked is an error before any training; a variant whose training fails, and a probe that
# fails, leave results/NAME/ with the other variants' rows and a manifest that lists what is
# missing, and the run exits 1 with one line. Two runs of one scenario at once: the second is
# refused with one line.
set -euo pipefail
xtrap=$1
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$tmp"/log*; do echo "== $f" >&2; cat "$f" >&2; done; exit 1; }
# refused LOG WHAT COMMAND...: the command exits 1 with one line, written to LOG.
refused() {
  local log=$1 what=$2 rc=0
  shift 2
  "$@" > "$log" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || fail "$what: exit $rc, expected 1"
  [ "$(wc -l < "$log")" -eq 1 ] || fail "$what: not one line"
}
train='[train]
data = "'"$root"'/data/wikitext-2"
L = 16
layers = 1
d_model = 16
heads = 2
ffn = 32
steps = 2
batch = 2
eval_every = 0
eval_tokens = 64
threads = 1
adaptive_softmax_cutoffs = []
'

# 1. learned positions scored past their table: fails while parsing, nothing trained.
printf '%s[[variant]]\nname = "learned"\npos = "learned"\n[eval]\nlvalid = [16, 64]\n' "$train" > "$tmp/late.toml"
refused "$tmp/log1" "an unevaluable variant" \
  "$xtrap" run "$tmp/late.toml" --runs "$tmp/runs1" --results "$tmp/results1" --no-progress
grep -q "late.toml:.*variant 'learned': lvalid 64 exceeds its learned position table of 16 rows" "$tmp/log1" ||
  fail "the error does not name the variant, the length and the table"
[ ! -e "$tmp/runs1" ] || fail "training started although the scenario cannot be evaluated"

# 2. one variant cannot train (its data directory is gone), the probe of another fails (offset
#    beyond the split): the rest is written, the manifest lists the missing stages.
printf '%s[[variant]]\nname = "alibi"\n[[variant]]\nname = "broken"\ndata = "%s/no-such-data"\n' "$train" "$tmp" \
  > "$tmp/partial.toml"
printf '[[variant]]\nname = "rotary"\npos = "rotary"\n[eval]\nlvalid = [16, 32]\nmax_tokens = 200\n' >> "$tmp/partial.toml"
printf '[probe]\nattn_lvalid = 16\nattn_offset = 100000000\nvariants = ["rotary"]\n' >> "$tmp/partial.toml"
rc=0
"$xtrap" run "$tmp/partial.toml" --runs "$tmp/runs2" --results "$tmp/results2" --no-progress > "$tmp/log2" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "failed stages: exit $rc, expected 1"
tail -n 1 "$tmp/log2" | grep -q "^xtrap: error: scenario partial: 3 stage(s) failed (first: broken train)" ||
  fail "the last line does not say how many stages failed"
out="$tmp/results2/partial"
[ "$(grep -c '^alibi,' "$out/results.csv")" -eq 2 ] || fail "results.csv lacks alibi's rows"
[ "$(grep -c '^rotary,' "$out/results.csv")" -eq 2 ] || fail "results.csv lacks rotary's rows"
! grep -q '^broken,' "$out/results.csv" || fail "results.csv has rows of a variant that never trained"
/usr/bin/python3 - "$out/manifest.json" <<'PY' || fail "manifest.json does not list what is missing"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["complete"] is False, m
stages = sorted((x["variant"], x["stage"].split()[0]) for x in m["missing"])
assert stages == [("broken", "eval"), ("broken", "train"), ("rotary", "probe")], stages
assert "alibi" in m["variants"] and "broken" not in m["variants"]
PY
# 3. two `xtrap run` of one scenario at once: the second stops with one line naming the first,
#    before training anything; the first finishes and writes its results.
printf '%s[[variant]]\nname = "alibi"\nsteps = 400\n[eval]\nlvalid = [16]\n' "$train" > "$tmp/busy.toml"
"$xtrap" run "$tmp/busy.toml" --runs "$tmp/runs3" --results "$tmp/results3" --no-progress > "$tmp/log3a" 2>&1 &
first=$!
for _ in $(seq 300); do [ -e "$tmp/results3/busy/.xtrap-lock" ] && break; sleep 0.1; done
refused "$tmp/log3b" "a second run of a running scenario" \
  "$xtrap" run "$tmp/busy.toml" --runs "$tmp/runs3b" --results "$tmp/results3" --no-progress
grep -Eq "^xtrap: error: results directory $tmp/results3/busy is in use by process $first " "$tmp/log3b" ||
  fail "the error does not name the results directory and the first run's pid"
[ ! -e "$tmp/runs3b" ] || fail "the second run trained"
wait "$first" || fail "the first run failed beside the refused second"
[ -s "$tmp/results3/busy/results.csv" ] || fail "the first run wrote no results"

echo "scenario_partial: ok"
