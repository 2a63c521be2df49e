#!/usr/bin/env bash
# Every committed CPU study still follows from its scenario file and this code: `xtrap run FILE
# --verify` (src/scenario/verify_results.h) over each scenarios/*.toml with a results/ directory
# (ctest `results_verify`). A change that moves a run identity fails it until the study is re-run.
# Studies whose variants train on cuda are verified where they are re-run, on a GPU machine (their
# run identity names the device, which a CPU checkout cannot resolve).
set -euo pipefail
XTRAP=$1
cd "$(dirname "$0")/.."
status=0
for file in scenarios/*.toml; do
  name=$(basename "$file" .toml)
  [ -d "results/$name" ] || continue
  if grep -q '^device = "cuda"' "$file"; then
    echo "skip $name (trains on cuda)"
    continue
  fi
  "$XTRAP" run "$file" --verify || status=1
done
exit $status
