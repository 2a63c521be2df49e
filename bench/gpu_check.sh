#!/usr/bin/env bash
# Validates xtrap on a machine with a GPU: builds it into build-cuda/ against the CUDA LibTorch of
# the PyTorch in python3 (with nvcc on the PATH, the CUDA kernels too), then runs the stages asked
# for and prints a summary. Every log goes into OUTDIR. The build needs xtrap's other dependencies
# (setup.sh's packages; CMAKE_PREFIX_PATH may name where they are); a prepared
# .gpu-deps/gpu-build.sh, when present, is used instead of the plain cmake build.
# Stages (tests, compare, eval and fused when none is named; in this order):
#   tests    the `gpu`-labelled tests (gpu_checks, fused_attention_checks and its _warpgroup twin,
#            nccl_world_one), then
#            the rest of the suite
#   gputests the `gpu`-labelled tests alone (a call that keeps its minutes for other stages)
#   compare  training throughput of xtrap against PyTorch eager side by side (bench/compare.py
#            --device cuda: alibi, none, rotary and the alibi-offset + CLAP encoder, bf16, MFU
#            against a bf16 matmul of the same command; COMPARE_ARGS adds flags to it, e.g.
#            "--methods alibi,alibi-encoder,alibi-learned,bialibi" or
#            "--xtrap-variants off,unfused,dp-outside,dp-inside")
#   eval     a short L=512 training run of the 6 x 512 model on CUDA, then Lvalid 512..16384 in
#            bfloat16 (the fused kernel) and float32, each row's time and peak GPU memory
#   fused    the fused ALiBi-family kernel against SDPA / FlexAttention anchors
#            (bench/fused_attention.sh: OUTDIR/fused_attention.md; each configuration in its own
#            process, cut off at FUSED_CONFIG_SECONDS, default 150). XTRAP_TARGETS=bench_attention
#            builds only what it needs.
#   ncu      Nsight Compute's full set of sections on the fused kernels at NCU_CASE (default
#            causal-B8-L2048), one forward and backward with each of bench_attention's
#            --fused-backward configurations in NCU_BACKWARD (default "two-pass atomic wgmma
#            atomic-wgmma": the two backward schemes, with mma.sync's tile products and with the
#            warpgroup MMA's): the profile asked for when the kernel misses a target.
#            Per scheme NCU_REPORTS/ncu-SCHEME.ncu-rep (the report, default /tmp/ncu-reports:
#            only ncu reads it, so it stays on the machine) and in OUTDIR ncu-SCHEME.txt (its details page: speed of light, pipes, shared memory and L2 tables,
#            the L2's atomic and reduction requests where AtomicDq's dQ adds go, occupancy, warp
#            state), ncu-SCHEME-raw.csv (every metric collected, by name: the warp-stall reasons
#            and pipe utilisations that the details page draws as charts), ncu-SCHEME-sass.csv and
#            -lines.csv (the source page: stall samples and instructions executed per SASS
#            instruction, and per line of the .cu). Then the same for the anchors in NCU_ANCHORS
#            (default "sdpa-flash flex-alibi") at that case, their first forward + backward
#            (bench/attention_anchors.py --methods): ncu-ANCHOR.*, the kernels the fused one is
#            measured against, profiled alike. Each profile is cut off at NCU_SECONDS (default
#            300). ncu_summary.md: every profiled kernel in one table, and its copies' shared
#            wavefronts and L2 sectors against the ideal (bench/ncu_summary.py); kernels.sass:
#            the fused kernels' machine code (cuobjdump).
#   sanitize compute-sanitizer's tools (SANITIZE_TOOLS, default "memcheck racecheck synccheck
#            initcheck") on the fused kernels as fused_attention_checks --sanitize --products all
#            runs them (every variant at T 130, D 64 and 128, both backward schemes and the
#            warpgroup MMA's tile products, dropout, negligible pairs skipped at T 600), each tool
#            limited to SANITIZE_SECONDS (default 150): what the CPU emulation
#            cannot show, the GPU's own ordering of shared-memory accesses within and across warps,
#            its barriers, and reads of global memory never written. sanitize-TOOL.log each.
#            Where the sandbox hides the device from the tool (some gVisor machines), it refuses it.
#   scenarios the GPU studies, in order: SCENARIOS (default "paper-table2-gpu
#            interp-gpu encoder-variants-gpu"; interp-gpu reuses paper-table2-gpu's runs when both
#            run in one call), results in OUTDIR/results/<scenario>/ (table, CSV, plot; copy them
#            into results/), runs in /tmp/xtrap-runs. Not in the default set: one scenario is most
#            of a call. XTRAP_TARGETS=xtrap builds only what it needs.
#            A study longer than one GPU job is run over several: OUTDIR/runs/
#            keeps, every 30 s and at the end, the small files (run.json, train.jsonl,
#            scenario-evals/) of each finished and evaluated run, without its checkpoint;
#            RUNS_FROM=DIR (such a runs/ folder, kept from an earlier job) puts them back into
#            /tmp/xtrap-runs first, so `xtrap run` reuses those runs and their cached rows instead
#            of training them again. A run listed there whose evaluation settings changed since
#            cannot be evaluated without its checkpoint: delete it from DIR to train it again.
# If the build fails, every error goes to build_errors.log; where the fused kernels or their glue
# fail, the build is made again without them (-DXTRAP_CUDA_KERNELS=OFF) for the other stages; the
# stages run with what was built (one whose program is missing fails alone); exit status 1.
# ARCHIVE=FILE.tar.gz (outside OUTDIR) packs OUTDIR into FILE (replaced whole, never half-written)
# every 30 s and when the script ends, so a job that is killed still leaves what its stages wrote.
#   bash bench/gpu_check.sh /tmp/gpu-check [tests] [gputests] [compare] [eval] [fused] [ncu] [sanitize] [scenarios]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: bench/gpu_check.sh OUTDIR [tests] [gputests] [compare] [eval] [fused] [ncu] [sanitize] [scenarios]}
shift
STAGES=("$@")
((${#STAGES[@]})) || STAGES=(tests compare eval fused)
for stage in "${STAGES[@]}"; do
  [[ $stage =~ ^(tests|gputests|compare|eval|fused|ncu|sanitize|scenarios)$ ]] || { echo "bench/gpu_check.sh: unknown stage '$stage'" >&2; exit 2; }
done
wants() { [[ " ${STAGES[*]} " == *" $1 "* ]]; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
kernels_failed=0
: >"$OUT/summary.txt"
if [[ -n ${ARCHIVE:-} ]]; then
  mkdir -p "$(dirname "$ARCHIVE")"
  ARCHIVE=$(cd "$(dirname "$ARCHIVE")" && pwd)/$(basename "$ARCHIVE")
  [[ $ARCHIVE != "$OUT"/* ]] || { echo "bench/gpu_check.sh: ARCHIVE must lie outside OUTDIR" >&2; exit 2; }
  pack() { tar -czf "$ARCHIVE.part" -C "$(dirname "$OUT")" "$(basename "$OUT")" 2>/dev/null && mv -f "$ARCHIVE.part" "$ARCHIVE"; }
else
  pack() { :; }
fi
# The scenarios' finished and evaluated runs without their checkpoints (see the scenarios stage).
keep_runs() {
  local run
  for run in /tmp/xtrap-runs/*/; do
    [[ -d $run/scenario-evals ]] && grep -q '"status": *"finished"' "$run/run.json" 2>/dev/null || continue
    mkdir -p "$OUT/runs/$(basename "$run")"
    cp -r "$run/run.json" "$run/train.jsonl" "$run/scenario-evals" "$OUT/runs/$(basename "$run")/" 2>/dev/null
  done
}
if [[ -n ${ARCHIVE:-} ]] || wants scenarios; then
  (while sleep 30; do
    wants scenarios && keep_runs
    pack
  done) &
  packer=$!
  trap 'kill "$packer" 2>/dev/null; wants scenarios && keep_runs; pack' EXIT
fi

start=$SECONDS
# With the kernels unless XTRAP_CMAKE_ARGS says otherwise (a fallback build below caches them off).
# The Python-driven tests run in the wheel's Python, which has torch and h5py.
XTRAP_CMAKE_ARGS="-DXTRAP_CUDA_KERNELS=ON -DXTRAP_TEST_PYTHON=$(command -v python3) ${XTRAP_CMAKE_ARGS:-}"
if [[ -f .gpu-deps/gpu-build.sh ]]; then
  # The tokenizer's PCRE2 and ICU come from the prepared packages too: gpu-build.sh unpacks them
  # into /tmp/deps, and their pkg-config files, which name /usr, are read with paths rebased there.
  unicode_pkgs=(libpcre2-dev libpcre2-8-0 libicu-dev libicu72)
  for pkg in "${unicode_pkgs[@]}"; do
    compgen -G ".gpu-deps/debs/${pkg}_*.deb" >/dev/null || {
      echo "bench/gpu_check.sh: .gpu-deps/debs has no $pkg; where it was prepared: (cd .gpu-deps/debs && apt-get download ${unicode_pkgs[*]})" >&2
      exit 2
    }
  done
  export PKG_CONFIG_LIBDIR=/tmp/deps/usr/lib/x86_64-linux-gnu/pkgconfig:/tmp/deps/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=/tmp/deps
  # shellcheck disable=SC1091
  source .gpu-deps/gpu-build.sh build-cuda >"$OUT/build.log" 2>&1
  build_rc=$?
else
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>>"$OUT/build.log")
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # shellcheck disable=SC2086  # XTRAP_CMAKE_ARGS is a list of arguments
  { cmake -S . -B build-cuda "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$torch_prefix${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}" $XTRAP_CMAKE_ARGS &&
      cmake --build build-cuda -j"$(nproc)" ${XTRAP_TARGETS:+--target $XTRAP_TARGETS}; } >>"$OUT/build.log" 2>&1
  build_rc=$?
fi
summary "build: rc=$build_rc in $((SECONDS - start)) s (build.log)"
# gpu-build.sh shows only the build's last lines. When the build fails and the configure step did
# not, everything is built that can be (ninja -k 0; every error in build_errors.log). If the fused
# kernels or their glue are among the failures, the build is made again without them, so the stages
# that do not need them still run this call. Stages then run with what was built: one whose program
# is missing reports its own failure (a test file that does not compile fails its tests only).
partial_build=0
if ((build_rc != 0)) && [[ -f build-cuda/build.ninja ]]; then
  cmake --build build-cuda -j"$(nproc)" ${XTRAP_TARGETS:+--target $XTRAP_TARGETS} -- -k 0 >"$OUT/build_errors.log" 2>&1
  summary "build errors (first of them; all in build_errors.log):"
  grep -m 8 -E 'error' "$OUT/build_errors.log" | tee -a "$OUT/summary.txt"
  if grep -qE '^FAILED: .*(xtrap_cuda_kernels|linear_bias_attention|linear_nll)' "$OUT/build_errors.log"; then
    start=$SECONDS
    { cmake -S . -B build-cuda -DXTRAP_CUDA_KERNELS=OFF &&
      cmake --build build-cuda -j"$(nproc)" ${XTRAP_TARGETS:+--target $XTRAP_TARGETS} -- -k 0; } >"$OUT/build_without_kernels.log" 2>&1
    build_rc=$?
    summary "build WITHOUT the fused kernels (-DXTRAP_CUDA_KERNELS=OFF): rc=$build_rc in $((SECONDS - start)) s (build_without_kernels.log); the kernels' tests report skipped, the fused stage is left out"
    STAGES=("${STAGES[@]/fused/}")
    kernels_failed=1
  fi
  ((build_rc == 0)) || partial_build=1
fi
[[ -x build-cuda/xtrap ]] || { summary "build-cuda/xtrap did not build: no stage can run"; exit 1; }
((partial_build == 0)) || summary "the build is partial: stages run with what was built"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$OUT/device.txt" 2>&1
summary "device: $(cat "$OUT/device.txt")"

if wants tests || wants gputests; then
  start=$SECONDS
  ctest --test-dir build-cuda -L gpu --output-on-failure >"$OUT/ctest_gpu.log" 2>&1
  summary "gpu tests: rc=$? in $((SECONDS - start)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_gpu.log" | tail -1) (ctest_gpu.log)"
fi
if wants tests; then
  start=$SECONDS
  ctest --test-dir build-cuda -j"$(nproc)" -LE gpu --output-on-failure >"$OUT/ctest_all.log" 2>&1
  summary "rest of the suite (-LE gpu): rc=$? in $((SECONDS - start)) s: $(grep -E 'tests passed|tests failed' "$OUT/ctest_all.log" | tail -1) (ctest_all.log)"
fi

# Throughput, side by side: xtrap --device cuda --dtype bfloat16 against the eager
# baseline (SDPA, autocast bf16, fused AdamW) in the machine's python3, alternating; tables in
# OUTDIR/gpu_throughput.{md,csv}, torch.profiler (and nsys, if on PATH) tables where xtrap is slower.
if wants compare; then
  start=$SECONDS
  # shellcheck disable=SC2086
  python3 bench/compare.py --device cuda --xtrap build-cuda/xtrap --python python3 --out-dir "$OUT" \
    --profile short ${COMPARE_ARGS:-} >"$OUT/compare.log" 2>&1
  summary "compare (train tok/s, xtrap vs eager): rc=$? in $((SECONDS - start)) s: $(cat "$OUT/gpu_throughput_summary.txt" 2>/dev/null || echo 'no summary') (gpu_throughput.md, compare.log)"
fi

# Long evaluation on CUDA: a short L=512 training run of the 6 x 512 model, then Lvalid 512..16384.
if wants eval; then
  RUN=$(mktemp -d)/alibi-512
  start=$SECONDS
  build-cuda/xtrap train --data data/wikitext-2 --pos alibi --L 512 --layers 6 --d-model 512 --heads 8 --ffn 2048 \
    --batch 32 --steps 200 --warmup 20 --device cuda --dtype bfloat16 --no-progress --out "$RUN" >"$OUT/train_long_eval.log" 2>&1
  summary "train (alibi, 6x512, L=512, 200 steps of 32, cuda bf16): rc=$? in $((SECONDS - start)) s: $(tail -1 "$OUT/train_long_eval.log")"
  # bfloat16: the fused kernel (alibi); float32: xtrap's block path. Per row: seconds, peak_mib.
  for dtype in bfloat16 float32; do
    start=$SECONDS
    build-cuda/xtrap eval "$RUN" --Lvalid 512..16384 --device cuda --dtype "$dtype" --no-progress \
      --out "$OUT/long_eval_$dtype.csv" >"$OUT/long_eval_$dtype.log" 2>&1
    summary "eval Lvalid 512..16384 on cuda in $dtype: rc=$? in $((SECONDS - start)) s (long_eval_$dtype.log, long_eval_$dtype.csv)"
  done
fi
# The fused ALiBi-family kernel side by side with its PyTorch anchors.
if wants fused; then
  start=$SECONDS
  bash bench/fused_attention.sh "$OUT" >"$OUT/fused_attention.log" 2>&1
  summary "fused attention vs anchors: rc=$? in $((SECONDS - start)) s: $(tail -1 "$OUT/fused_attention.log") (fused_attention.md)"
fi
# Nsight Compute on the second forward + backward of one case (the first is a warm-up): one launch
# each of the tile bounds and walks kernels, the forward and the two backward tile kernels
# (two-pass: keyGrad, queryGrad; atomic: keyGrad with its dQ adds, roundQueryGrad). The full set
# rather than named sections: one name this version lacks would stop the profile, and the set has
# the source counters' stall sampling, which the source pages put on each SASS instruction
# (-sass.csv) and on each line of the .cu (-lines.csv; the kernels carry -lineinfo). The clocks are
# left as a plain run has them (--clock-control none), so that the times compare with the benchmark's.
# Each anchor's kernels of its first forward + backward: SDPA flash's forward and its backward's
# three (dO.O, the tile loop, dQ's conversion), FlexAttention's two Triton templates (its other
# Triton kernels, such as the block mask's, left out).
if wants ncu; then
  if command -v ncu >/dev/null; then
    # The reports themselves stay on the machine (NCU_REPORTS): only ncu opens them, the CPU
    # machines have none, and with the sources imported they could take the archive past the
    # 16 MiB that a device command returns per file. Their pages, printed here, come back.
    reports=${NCU_REPORTS:-/tmp/ncu-reports}
    mkdir -p "$reports"
    # profile NAME KERNEL_REGEX SKIP COUNT COMMAND...: NCU_REPORTS/ncu-NAME.ncu-rep, and in OUTDIR
    # ncu-NAME.{txt,log}, -raw.csv, -sass.csv, -lines.csv
    # Each profile is cut off at NCU_SECONDS: a kernel that hangs costs only its own profile.
    # Once ncu has said it cannot profile on this machine (on gVisor: "Failed to initialize the
    # profiler: LibraryNotLoaded"; without the counters' permission: ERR_NVGPUCTRPERM), the later
    # profiles are not tried: each would only spend its program's run (FlexAttention's compilation).
    profiler_unusable=""
    profile() {
      local name=$1 kernels=$2 skip=$3 count=$4 page=$OUT/ncu-$1 report=$reports/ncu-$1 rc
      shift 4
      if [[ -n $profiler_unusable ]]; then
        summary "ncu ($name): not tried, ncu cannot profile here: $profiler_unusable"
        return
      fi
      start=$SECONDS
      timeout "${NCU_SECONDS:-300}" ncu -f -o "$report" --set full --import-source yes --clock-control none -k "regex:$kernels" --launch-skip "$skip" --launch-count "$count" "$@" \
        >"$page.log" 2>&1
      rc=$?
      profiler_unusable=$(grep -m 1 -E 'Failed to initialize the profiler|ERR_NVGPUCTRPERM' "$page.log")
      ncu --import "$report.ncu-rep" >"$page.txt" 2>&1
      ncu --import "$report.ncu-rep" --page raw --csv >"$page-raw.csv" 2>&1
      ncu --import "$report.ncu-rep" --page source --print-source sass --csv >"$page-sass.csv" 2>&1
      ncu --import "$report.ncu-rep" --page source --print-source cuda --csv >"$page-lines.csv" 2>&1
      summary "ncu (${NCU_CASE:-causal-B8-L2048}, $name): rc=$rc$( ((rc != 124)) || echo " (cut off at ${NCU_SECONDS:-300} s)") in $((SECONDS - start)) s (ncu-$name.txt, -raw.csv, -sass.csv, -lines.csv, .log)"
    }
    for scheme in ${NCU_BACKWARD:-two-pass atomic wgmma atomic-wgmma}; do
      profile "$scheme" 'tileBoundsKernel|tileWalksKernel|forwardKernel|keyGradKernel|queryGradKernel|roundQueryGradKernel' 5 5 \
        build-cuda/bench_attention --fused-csv "$OUT/ncu_case.csv" --fused-reps 1 \
        --fused-cases "${NCU_CASE:-causal-B8-L2048}" --fused-backward "$scheme"
    done
    # The wheel's Python without the Debian libraries put first for xtrap (bench/fused_attention.sh).
    python_libs=$(tr ':' '\n' <<<"${LD_LIBRARY_PATH:-}" | grep -v '^/tmp/deps/' | paste -sd:)
    for anchor in ${NCU_ANCHORS:-sdpa-flash flex-alibi}; do
      case $anchor in
        sdpa-flash) kernels='flash_fwd|flash_bwd' count=4 ;;
        flex-*) kernels='triton_tem' count=2 ;;
        *) kernels='.' count=8 ;;
      esac
      LD_LIBRARY_PATH=$python_libs profile "$anchor" "$kernels" 0 "$count" \
        python3 bench/attention_anchors.py --out "$OUT/ncu_anchor_$anchor.csv" --reps 1 --warmup 1 \
        --cases "${NCU_CASE:-causal-B8-L2048}" --methods "$anchor"
    done
    LD_LIBRARY_PATH=$python_libs python3 bench/ncu_summary.py --md "$OUT/ncu_summary.md" --sass "$OUT"/ncu-*-sass.csv -- "$OUT"/ncu-*-raw.csv >"$OUT/ncu_summary.log" 2>&1
    summary "ncu summary: rc=$? (ncu_summary.md: every profiled kernel's time, pipes, occupancy, stall reasons)"
    # The fused kernels' machine code, every instantiation, to read beside the -sass.csv pages.
    kernels_lib=$(find build-cuda -name 'libxtrap_cuda_kernels.a' | head -1)
    if command -v cuobjdump >/dev/null && [[ -n $kernels_lib ]]; then
      cuobjdump --dump-sass "$kernels_lib" >"$OUT/kernels.sass" 2>&1
      summary "cuobjdump --dump-sass $kernels_lib: rc=$? (kernels.sass)"
    fi
  else
    summary "ncu: not on PATH (nothing profiled)"
  fi
fi
# compute-sanitizer on the fused kernels alone: LibTorch's and cuBLAS's kernels around them are not
# instrumented (not this project's to check, and slow under the tools; initcheck also reports
# cuBLAS's reads of its own workspace). The filter's option is --kernel-regex in older versions and
# --kernel-name in newer ones; kns= matches a substring of the mangled name (xtrap::cuda's kernels).
# Every tensor its own allocation (PYTORCH_NO_CUDA_MEMORY_CACHING=1): with LibTorch's caching
# allocator, memcheck would not see a read past a tensor into its neighbour in the same block, nor
# initcheck a read of memory another tensor had written before.
if wants sanitize; then
  if command -v compute-sanitizer >/dev/null; then
    sanitizer_help=$(compute-sanitizer --help 2>&1)
    filter=()
    if grep -q -- '--kernel-name ' <<<"$sanitizer_help"; then
      filter=(--kernel-name kns=xtrap)
    elif grep -q -- '--kernel-regex ' <<<"$sanitizer_help"; then
      filter=(--kernel-regex kns=xtrap)
    fi
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
      start=$SECONDS
      PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${SANITIZE_SECONDS:-150}" compute-sanitizer --tool "$tool" "${filter[@]}" \
        --error-exitcode 1 --print-limit 50 build-cuda/fused_attention_checks --sanitize --products all >"$OUT/sanitize-$tool.log" 2>&1
      rc=$?
      found=$(grep -E '(ERROR|RACECHECK) SUMMARY|fused_attention_checks --sanitize --products all:' "$OUT/sanitize-$tool.log" | paste -sd';')
      ((rc != 124)) || found="cut off at ${SANITIZE_SECONDS:-150} s; ${found:-no summary line}"
      summary "compute-sanitizer $tool${filter:+ (${filter[*]})}: rc=$rc in $((SECONDS - start)) s: ${found:-no summary line} (sanitize-$tool.log)"
    done
  else
    summary "compute-sanitizer: not on PATH (nothing checked)"
  fi
fi
# The GPU scenarios, one after another; a finished variant is not retrained.
if wants scenarios; then
  if [[ -n ${RUNS_FROM:-} ]]; then
    mkdir -p /tmp/xtrap-runs && cp -r "$RUNS_FROM"/. /tmp/xtrap-runs/
    summary "scenarios: $(find "$RUNS_FROM" -mindepth 1 -maxdepth 1 -type d | wc -l) finished run(s) from $RUNS_FROM"
  fi
  for name in ${SCENARIOS:-paper-table2-gpu interp-gpu encoder-variants-gpu}; do
    start=$SECONDS
    build-cuda/xtrap run "scenarios/$name.toml" --runs /tmp/xtrap-runs --results "$OUT/results" --no-progress \
      >"$OUT/scenario_$name.log" 2>&1
    summary "scenario $name: rc=$? in $((SECONDS - start)) s (results/$name/, scenario_$name.log)"
  done
fi
summary "logs in $OUT${ARCHIVE:+, packed into $ARCHIVE}"
((kernels_failed == 0)) || { summary "the fused kernels did not build (build_errors.log)"; exit 1; }
((partial_build == 0)) || { summary "the build failed in part (build_errors.log)"; exit 1; }
