#!/usr/bin/env bash
# Issue 23 item 5: the fused ALiBi-family CUDA kernel against its PyTorch anchors, in one command on
# the GPU machine (after .gpu-deps/gpu-build.sh built build-cuda/). Writes into OUTDIR:
#   fused.csv                  build-cuda/bench_attention --fused-csv (xtrap-fused-* rows), one
#                              process per configuration (fused-CONFIG.log), each cut off at
#                              FUSED_CONFIG_SECONDS (default 150)
#   anchors.csv, anchors.log   python3 bench/attention_anchors.py (SDPA flash / cuDNN / efficient, Flex)
#   fused_attention.md         both joined: per case ms, TFLOP/s, peak MiB, ratios, target checks
# Env: BENCH (default build-cuda/bench_attention), PYTHON (default python3), FUSED_REPS (20),
# ANCHOR_ARGS (more flags for attention_anchors.py, e.g. "--cases causal-B8-L2048"), FUSED_CONFIGS
# (default "two-pass atomic wgmma atomic-wgmma"), FUSED_CONFIG_SECONDS.
#   bash bench/fused_attention.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: bench/fused_attention.sh OUTDIR}
mkdir -p "$OUT"
BENCH=${BENCH:-build-cuda/bench_attention}
PYTHON=${PYTHON:-python3}
REPS=${FUSED_REPS:-20}
# The wheel's torch brings its own libraries: Python runs without the Debian ones that
# .gpu-deps/gpu-build.sh put first on LD_LIBRARY_PATH for xtrap (/tmp/deps), as in bench/compare.py.
PYTHON_LIBS=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -v '^/tmp/deps/' | paste -sd:)

# Each configuration (bench_attention's --fused-backward) in a process of its own, under a time
# limit: a kernel that hangs or faults (a CUDA error poisons every later call of its process) costs
# only its own rows, and the anchors still run. Its rows are written as they are timed, so a
# configuration cut off keeps the rows it finished.
fused_rc=0
: >"$OUT/fused.csv"
for config in ${FUSED_CONFIGS:-two-pass atomic wgmma atomic-wgmma}; do
  start=$SECONDS
  timeout "${FUSED_CONFIG_SECONDS:-150}" "$BENCH" --fused-csv "$OUT/fused-$config.csv" --fused-reps "$REPS" \
    --fused-backward "$config" >"$OUT/fused-$config.log" 2>&1
  rc=$?
  ((rc == 0)) || fused_rc=$rc
  [[ -s $OUT/fused.csv ]] || head -1 "$OUT/fused-$config.csv" >"$OUT/fused.csv" 2>/dev/null
  tail -n +2 "$OUT/fused-$config.csv" >>"$OUT/fused.csv" 2>/dev/null
  rm -f "$OUT/fused-$config.csv"
  echo "fused kernel, $config: rc=$rc$( ((rc != 124)) || echo " (cut off at ${FUSED_CONFIG_SECONDS:-150} s)") in $((SECONDS - start)) s (fused-$config.log)"
done
start=$SECONDS
# shellcheck disable=SC2086
LD_LIBRARY_PATH=$PYTHON_LIBS "$PYTHON" bench/attention_anchors.py --out "$OUT/anchors.csv" --reps "$REPS" ${ANCHOR_ARGS:-} >"$OUT/anchors.log" 2>&1
anchors_rc=$?
echo "anchors: rc=$anchors_rc in $((SECONDS - start)) s (anchors.csv, anchors.log)"
for f in fused anchors; do  # a crashed side still leaves a joinable (header-only) CSV
  [[ -s $OUT/$f.csv ]] || echo "case,B,H,L,D,causal,method,ms,tflops,peak_mib,status" >"$OUT/$f.csv"
done
LD_LIBRARY_PATH=$PYTHON_LIBS "$PYTHON" bench/attention_anchors.py --join "$OUT/fused.csv" "$OUT/anchors.csv" --md "$OUT/fused_attention.md"
join_rc=$?
((fused_rc == 0 && anchors_rc == 0 && join_rc == 0))
