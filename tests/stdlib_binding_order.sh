#!/usr/bin/env bash
# No call into the C++ standard library lands in a copy that a LibTorch build carries (the PyTorch
# wheel's libtorch exports some of libstdc++'s symbols; std::filesystem bound there crashed 4
# tests on the GPU machine). Checked on the dynamic loader's own record of every binding: each
# BINARY runs `--help` with every symbol bound at load (LD_BIND_NOW) and LD_DEBUG=bindings; no
# symbol that the loaded libstdc++ defines (nm -D), asked for by an object outside LibTorch
# (libtorch*, libc10*, ...), may be bound into LibTorch. Template instantiations libstdc++ does not
# export may bind to any identical copy, and do.
# libstdc++'s calls into itself are left out: on the GPU machine (Ubuntu 24.04's libstdc++, the
# wheel's libtorch) 22 of them, all to C++20 symbols (std::chrono's time-zone database and the
# rvalue basic_stringbuf::str()), bind to the copies LibTorch exports, which xtrap (C++17) never
# reaches; what matters is where xtrap's and the other libraries' own calls land.
# Independent of link order and toolchain (the check it replaces compared the load order, which
# CMake 4 / g++ 13 change without any symbol moving). Usage: stdlib_binding_order.sh BINARY...
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for binary in "$@"; do
  rm -f "$tmp"/bindings.*
  LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/bindings" "$binary" --help >/dev/null 2>&1 || true
  # Lines: "PID: binding file FROM [0] to TO [0]: normal symbol `NAME' [VERSION]".
  cat "$tmp"/bindings.* | awk '$2 == "binding" && $3 == "file" {
      name = $0; sub(/^.*symbol `/, "", name); sub(/'"'"'.*$/, "", name); print $4, $7, name }' >"$tmp/bound"
  stdcxx=$(awk '$2 ~ /\/libstdc\+\+\.so/ {print $2; exit}' "$tmp/bound")
  [ -n "$stdcxx" ] || { echo "$binary: no binding to libstdc++ recorded (LD_DEBUG unsupported?)"; exit 1; }
  # What the loaded libstdc++ itself defines; a template instantiation it does not export may be
  # bound to any object's identical copy.
  nm -D --defined-only "$stdcxx" | awk '{print $NF}' | sed 's/@.*//' | sort -u >"$tmp/defined"
  awk -v binary="$binary" '
    function torch(path) { return path ~ /(^|\/)lib(torch|c10|caffe2|shm)[^\/]*\.so[^\/]*$/ }
    FNR == NR { libstdcxx[$1] = 1; next }
    ($3 in libstdcxx) && !torch($1) && $1 !~ /\/libstdc\+\+\.so/ {
      if ($2 ~ /\/libstdc\+\+\.so/) good++
      if (!torch($2)) next
      if (!bad++) print binary ": standard library symbols bound into LibTorch:"
      if (bad <= 10) print "  " $3 " of " $1 " -> " $2
    }
    END {
      if (bad) { print "  (" bad " in all)"; exit 1 }
      print binary ": no symbol of libstdc++ bound into LibTorch (" good " bound to libstdc++)"
    }' "$tmp/defined" "$tmp/bound"
done
