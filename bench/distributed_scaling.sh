#!/usr/bin/env bash
# CPU scaling of data-parallel training: the same model and global batch with 1 rank and with
# 2 ranks (--nproc 2), one intra-op thread per rank, alternated REPEATS times. Appends
# "ranks,repeat,tok_per_s,load1" rows to OUT (tok/s of the whole job, from run.json).
# usage: bench/distributed_scaling.sh XTRAP OUT.csv [REPEATS]
set -euo pipefail
XTRAP=$1
OUT=$2
REPEATS=${3:-5}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ARGS=(--layers 2 --d-model 128 --heads 4 --ffn 512 --L 128 --batch 16 --steps 40 --eval-every 0
      --eval-tokens 2048 --threads 1 --no-progress --adaptive-softmax none)
[[ -f $OUT ]] || echo "ranks,repeat,tok_per_s,load1" > "$OUT"
for repeat in $(seq "$REPEATS"); do
  for ranks in 1 2; do
    rm -rf "$WORK/run"
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$XTRAP" train --nproc "$ranks" --out "$WORK/run" "${ARGS[@]}" > /dev/null
    tps=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["extra"]["tok_per_s"]))' "$WORK/run/run.json")
    echo "$ranks,$repeat,$tps,$load" | tee -a "$OUT"
  done
done
