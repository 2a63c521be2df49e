#!/usr/bin/env bash
# Every executable loads libstdc++ before LibTorch, so calls into the C++ standard library bind to
# libstdc++ and never to copies a LibTorch build exports (see the comment at target_link_options
# in CMakeLists.txt). The order is the dynamic loader's own (LD_TRACE_LOADED_OBJECTS, what ldd
# prints), which is also the symbol lookup order; no binutils needed. Usage: stdlib_binding_order.sh BINARY...
set -euo pipefail
for binary in "$@"; do
  loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$binary" | awk '{print $1}')
  stdcxx=$(grep -n '^libstdc++' <<<"$loaded" | head -1 | cut -d: -f1)
  torch=$(grep -nE '^lib(torch|c10)' <<<"$loaded" | head -1 | cut -d: -f1)
  if [ -z "$stdcxx" ] || { [ -n "$torch" ] && [ "$stdcxx" -gt "$torch" ]; }; then
    echo "$binary: libstdc++ is not loaded before LibTorch; load order:" $loaded
    exit 1
  fi
  echo "$binary: libstdc++ is loaded object $stdcxx, LibTorch's first is ${torch:-absent}"
done
