# The H100 call of 2026-11-27 (run as `bash profile_command.sh` from the project root, carry .gpu-deps): five ncu profiles at causal-B8-L2048 and encoder-onesided-B8-L2048
set -u
O=/tmp/n; mkdir -p $O
pack() { tar -czf "$OUT/n.tar.gz.part" -C /tmp n && mv -f "$OUT/n.tar.gz.part" "$OUT/n.tar.gz"; }
s=$SECONDS
XTRAP_TARGETS=bench_attention XTRAP_CMAKE_ARGS="-DXTRAP_CUDA_KERNELS=ON" source .gpu-deps/gpu-build.sh build-cuda >$O/build.log 2>&1
echo "build rc=$? $((SECONDS-s)) s" | tee -a $O/summary.txt
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a $O/summary.txt
K='tileBoundsKernel|tileWalksKernel|forwardKernel|keyGradKernel|queryGradKernel|roundQueryGradKernel'
prof() {
  local name=$1 skip=$2 count=$3 case=$4 scheme=$5; s=$SECONDS
  timeout 75 ncu -f -o /tmp/ncu-$name --set full --import-source yes --clock-control none -k "regex:$K" --launch-skip $skip --launch-count $count \
    build-cuda/bench_attention --fused-csv $O/$name.csv --fused-reps 1 --fused-cases $case --fused-backward $scheme >$O/ncu-$name.log 2>&1
  echo "$name rc=$? $((SECONDS-s)) s" | tee -a $O/summary.txt
  ncu --import /tmp/ncu-$name.ncu-rep >$O/ncu-$name.txt 2>&1
  ncu --import /tmp/ncu-$name.ncu-rep --page raw --csv >$O/ncu-$name-raw.csv 2>&1
  ncu --import /tmp/ncu-$name.ncu-rep --page source --print-source sass --csv >$O/ncu-$name-sass.csv 2>&1
  pack
}
prof atomic 5 5 causal-B8-L2048 atomic
prof two-pass 5 5 causal-B8-L2048 two-pass
prof learned-two-pass 53 5 causal-B8-L2048 two-pass
prof onesided-atomic 5 5 encoder-onesided-B8-L2048 atomic
prof wgmma 5 5 causal-B8-L2048 wgmma
L=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -v '^/tmp/deps/' | paste -sd:)
LD_LIBRARY_PATH=$L python3 bench/ncu_summary.py --md $O/ncu_summary.md $O/ncu-*-raw.csv >$O/ncu_summary.log 2>&1
pack; cat $O/summary.txt
