# Shared by the reliability shell tests: synthetic corpora, tiny-model flags, assertions.
# A test called as `TEST.sh XTRAP [COMPARE_CHECKPOINTS]` sources it with its arguments
# (`source reliability_lib.sh "$@"`): XTRAP and COMPARE name the binaries, and WORK is a scratch
# directory removed on exit (made writable first: some tests take permissions away inside it).
set -u
XTRAP=$1
COMPARE=${2:-}
WORK=$(mktemp -d)
trap 'chmod -R u+rwX "$WORK"; rm -rf "$WORK"' EXIT

# make_corpus DIR LINES VOCAB SEED: a WikiText-format directory of LINES lines per split.
make_corpus() {
  mkdir -p "$1"
  for split in train valid test; do
    awk -v lines="$2" -v vocab="$3" -v seed="$4" 'BEGIN {
      srand(seed); for (l = 0; l < lines; l++) { n = 4 + int(rand() * 12); s = "";
        for (i = 0; i < n; i++) s = s " w" int(rand() * rand() * vocab); print s } }' > "$1/wiki.$split.tokens"
  done
}

TINY=(--layers 1 --d-model 32 --heads 2 --ffn 64 --L 32 --batch 4 --threads 1 --no-progress)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# expect_error NAME REGEX -- COMMAND...: exit status 1, exactly one stderr line matching REGEX
# (the caller counts its cases in `cases`).
expect_error() {
  local name=$1 regex=$2
  shift 3
  "$@" > "$WORK/out" 2> "$WORK/err"
  local rc=$?
  [[ $rc -eq 1 ]] || fail "$name: exit status $rc (stderr: $(cat "$WORK/err"))"
  [[ $(wc -l < "$WORK/err") -eq 1 ]] || fail "$name: expected one stderr line, got: $(cat "$WORK/err")"
  grep -Eq "^xtrap: error: $regex" "$WORK/err" || fail "$name: unexpected message: $(cat "$WORK/err")"
  printf '%-40s %s\n' "$name" "$(cat "$WORK/err")"
  cases=$((cases + 1))
}

# wait_for_lines FILE N [TENTHS]: until FILE has N lines (at most TENTHS / 10 s, default 60 s).
wait_for_lines() {
  for _ in $(seq "${3:-600}"); do
    [[ -f "$1" && $(wc -l < "$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  fail "$1 never reached $2 lines"
}

# no_temporaries DIR: xtrap's temporaries are named FILE.tmp.PID.
no_temporaries() {
  local left
  left=$(find "$1" -name '*.tmp.*' 2>/dev/null)
  [[ -z "$left" ]] || fail "temporary files left: $left"
}

# jsonl_core FILE: the log without wall-clock fields, for exact comparison between runs.
jsonl_core() {
  python3 -c 'import json,sys
for line in open(sys.argv[1]):
    j = json.loads(line); j.pop("tok_per_s", None); j.pop("elapsed_s", None); j.pop("flop_per_s", None); print(json.dumps(j, sort_keys=True))' "$1"
}
