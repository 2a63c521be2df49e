#!/usr/bin/env bash
# Installs xtrap's Debian packages and builds it. Usage: bash setup.sh [build-dir]
# Run as root on Debian 12 (uses apt-get); re-running is cheap.
set -euo pipefail
cd "$(dirname "$0")"
BUILD_DIR=${1:-build}

PACKAGES=(
  build-essential cmake git ca-certificates
  libtorch-dev            # LibTorch 1.13 (CPU)
  libgloo-dev             # headers ProcessGroupGloo.hpp includes (data-parallel training, src/dist)
  libopenblas0-openmp     # without it LibTorch falls back to a single-threaded reference BLAS (60x slower)
  libtcmalloc-minimal4    # xtrap's malloc: less of a training step's freed memory kept resident
  libcli11-dev libfmt-dev nlohmann-json3-dev libtomlplusplus-dev
  libhdf5-dev             # attention / bias dumps
  libpcre2-dev            # tokenizer.json regular expressions (Unicode, JIT)
  libicu-dev              # tokenizer.json NFC normalizer and regex property classes (Unicode 15)
  pkg-config              # finds the two above
  catch2 libbenchmark-dev # tests, micro-benchmarks
  gnuplot-nox             # plots
  python3-torch           # the PyTorch eager baseline in bench/
  python3-h5py            # tests/option_walk.py reads probe dumps; results/probes/compare_stats.py
  python3 util-linux      # test scripts (setpriv drops root for the read-only-directory cases)
  iproute2 procps         # test scripts: ss (a rank connected to the store), pgrep (a launcher's ranks)
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" ${XTRAP_TARGETS:+--target $XTRAP_TARGETS}

# `xtrap` on PATH for the README's commands (root only; otherwise use ./build/xtrap).
if [ -w /usr/local/bin ] && [ -x "$BUILD_DIR/xtrap" ]; then
  ln -sf "$(pwd)/$BUILD_DIR/xtrap" /usr/local/bin/xtrap
fi
