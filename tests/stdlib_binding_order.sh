#!/usr/bin/env bash
# Every executable lists libstdc++ before LibTorch among its shared libraries, so calls into the
# C++ standard library bind to libstdc++ and never to copies a LibTorch build exports (see the
# comment at target_link_options in CMakeLists.txt). Usage: stdlib_binding_order.sh BINARY...
set -euo pipefail
for binary in "$@"; do
  needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  stdcxx=$(grep -n '^libstdc++' <<<"$needed" | head -1 | cut -d: -f1)
  torch=$(grep -nE '^lib(torch|c10)' <<<"$needed" | head -1 | cut -d: -f1)
  if [ -z "$stdcxx" ] || { [ -n "$torch" ] && [ "$stdcxx" -gt "$torch" ]; }; then
    echo "$binary: libstdc++ is not loaded before LibTorch; NEEDED order:" $needed
    exit 1
  fi
  echo "$binary: libstdc++ is shared library $stdcxx, LibTorch's first is ${torch:-absent}"
done
