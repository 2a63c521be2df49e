#!/usr/bin/env bash
# Peak RSS of `xtrap train` for one optimizer step (forward, backward, AdamW step) on the CPU at
# L, 4L and 16L of the quickstart model (decoder, 4 layers, d=128, 8 heads, L = 512): training at
# 4L..16L (`xtrap train --init RUN --L 4L`) must not hold an (H, T, T) tensor per head beyond the
# recompute attention path's query block (issue 81). One sequence a step (--batch 1), so a row's
# tokens are its length; the process also loads WikiText-2, builds the model and optimizer,
# scores one validation window of the length (block attention path, no gradient) and writes a
# checkpoint, all of which a row's peak includes. Rows are appended to OUT.csv (header first when
# it is new); LABEL names the code measured (e.g. a commit). MULTIPLES (default "1 4 16"): the
# lengths as multiples of L.
# Usage: [MULTIPLES="1 4"] bench/train_memory.sh XTRAP LABEL OUT.csv [POS ...]   (POS default: alibi t5)
set -euo pipefail
XTRAP=$1
LABEL=$2
OUT=$3
shift 3
POSITIONS=("$@")
[ ${#POSITIONS[@]} -eq 0 ] && POSITIONS=(alibi t5)
[ -s "$OUT" ] || echo "code,pos,L,length,batch,peak_rss_mib,seconds,htt_float32_mib,command" > "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
L=512
HEADS=8
for pos in "${POSITIONS[@]}"; do
  for m in ${MULTIPLES:-1 4 16}; do
    n=$((m * L))
    cmd="xtrap train --pos $pos --L $n --steps 1 --batch 1 --eval-tokens $((n + 1)) --threads 1 --no-progress"
    rm -rf "$WORK/run"
    # GNU time: maximum resident set (KiB) and wall seconds of the whole command.
    /usr/bin/time -o "$WORK/time" -f "%M %e" "$XTRAP" train --pos "$pos" --L "$n" --steps 1 --batch 1 \
      --eval-tokens $((n + 1)) --threads 1 --no-progress --out "$WORK/run" > "$WORK/log" 2>&1 ||
      { cat "$WORK/log" >&2; exit 1; }
    read -r kib secs < <(tail -1 "$WORK/time")
    # The size of one (H, T, T) float32 tensor at this length, for comparison.
    htt=$(( HEADS * n * n * 4 / 1048576 ))
    echo "$LABEL,$pos,$L,$n,1,$(( kib / 1024 )),$secs,$htt,$cmd" >> "$OUT"
    tail -1 "$OUT" >&2
  done
done
