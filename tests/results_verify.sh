#!/usr/bin/env bash
# Run by hand until the stale studies are re-run (then registered in ctest): every committed CPU study still follows from its scenario file and this code: `xtrap run FILE
# --verify` (src/scenario/verify_results.h) over each scenarios/*.toml with a results/ directory.
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
