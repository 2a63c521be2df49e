#!/usr/bin/env bash
# Peak RSS of `xtrap eval` on one window of Lvalid tokens, for growing Lvalid: the block attention
# path should make memory grow linearly (goal: RSS(12000) / RSS(3000) <= 2). Also checks that
# the block path and the full-matrix path give the same perplexity where both fit.
# Usage: bench/eval_memory.sh RUN [XTRAP] > results/eval_memory.md
set -euo pipefail
RUN=$1
XTRAP=${2:-build/xtrap}
echo "# eval peak RSS vs Lvalid"
echo
echo "run: \`$RUN\`; machine: $(nproc) cores, $(grep MemTotal /proc/meminfo | awk '{print int($2/1048576)}') GiB; $(date -u +%F)"
echo
echo "| Lvalid | path | peak RSS (MB) | ppl | seconds |"
echo "|---|---|---|---|---|"
measure() {  # Lvalid query-block
  local n=$1 block=$2 out rss ppl secs
  out=$( { /usr/bin/time -f "RSS %M" "$XTRAP" eval "$RUN" --Lvalid "$n" --max-tokens $((n + 1)) --batch 1 \
             --query-block "$block" --threads 1 --no-progress --out /tmp/xtrap-mem.csv; } 2>&1 )
  rss=$(echo "$out" | awk '/^RSS/ {print int($2/1024)}')
  ppl=$(awk -F, 'NR==2 {print $14}' /tmp/xtrap-mem.csv)
  secs=$(awk -F, 'NR==2 {print $15}' /tmp/xtrap-mem.csv)
  echo "| $n | $([ "$block" = 0 ] && echo full || echo "block $block") | $rss | $ppl | $secs |"
}
measure 3000 0
for n in 3000 6000 12000 16000; do measure "$n" 256; done
echo
echo "Command: \`bench/eval_memory.sh $RUN\`"
