#!/usr/bin/env bash
# Opt-in fuzz run (not part of ctest): builds the libFuzzer targets with clang into build-fuzz/
# and runs each for SECONDS (default 30) from its seed corpus in tests/fuzz/<target>/
# (FUZZ_TARGETS="scenario" picks some).
# New inputs go to build-fuzz/corpus/<target>; a crash leaves crash-* in build-fuzz/ and
# fails the script. usage: tests/fuzz/run_fuzzers.sh [SECONDS]
set -eu
seconds=${1:-30}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build-fuzz
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXTRAP_FUZZ=ON > /dev/null
targets=(${FUZZ_TARGETS:-lvalid_range wikitext token_cache checkpoint_file scenario tokenizer_json safetensors pretrained_config})
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}"
cd "$build"
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  echo "== fuzz_$t for ${seconds}s"
  "./fuzz_$t" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
    "corpus/$t" "$root/tests/fuzz/$t" 2>&1 | grep -E '^(stat::number_of_executed_units|Done|==|SUMMARY)' || true
  if compgen -G "crash-*" > /dev/null || compgen -G "timeout-*" > /dev/null || compgen -G "oom-*" > /dev/null; then
    echo "fuzz_$t found a problem: $(ls crash-* timeout-* oom-* 2> /dev/null)" >&2
    exit 1
  fi
done
