#!/usr/bin/env python3
"""Syntax-check every LibTorch translation unit of xtrap against another LibTorch's headers, with
the defines of a CUDA build, on a machine that has neither that LibTorch's libraries nor a GPU.

The CPU machines build against Debian's LibTorch 1.13; the GPU machine builds against its PyTorch
wheel's LibTorch 2.x with CUDA, and a GPU session is too rare to spend on compile errors. Any 2.x
include tree serves (a pip wheel's torch/include, or one copied from elsewhere); the CUDA toolkit's
headers stand in for the wheel's CUDA (nccl.h included). Nothing is linked or run.

  cmake -S . -B build -DCMAKE_EXPORT_COMPILE_COMMANDS=ON   # once: the translation units' flags
  tests/libtorch2_syntax.py --torch-include /path/to/torch/include [FILE_SUBSTRING ...]

The CUDA kernels' glue (src/model/position/linear_bias_attention_cuda.cpp, src/model/linear_nll_cuda.cpp,
src/model/position/rotary_cuda.cpp, src/model/add_norm_cuda.cpp, src/model/activation_dropout_cuda.cpp,
src/model/embedding_dropout_cuda.cpp), which the CPU build leaves out, is checked too. Exit status 1 when a file does not compile; its errors are printed.
Warnings at xtrap's own lines (deprecations first of all: what 2.x deprecates a later 2.x removes)
are printed with --warnings.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GLUE = [os.path.join(ROOT, f) for f in ("src/model/position/linear_bias_attention_cuda.cpp",
                                        "src/model/linear_nll_cuda.cpp", "src/model/position/rotary_cuda.cpp",
                                        "src/model/add_norm_cuda.cpp", "src/model/activation_dropout_cuda.cpp",
                                        "src/model/embedding_dropout_cuda.cpp")]
CUDA_DEFINES = ["-DXTRAP_WITH_CUDA", "-DXTRAP_WITH_CUDA_KERNELS", "-DXTRAP_WITH_NCCL", "-DUSE_C10D_NCCL"]


def torch_units(build):
    """(file, argv) of every translation unit compiled against LibTorch, from compile_commands.json."""
    path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: configure with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    units = []
    for entry in json.load(open(path)):
        argv = shlex.split(entry["command"])
        if entry["file"].endswith(".cpp") and any("torch" in a for a in argv):
            units.append((entry["file"], argv))
    # The glue's flags are those of the library it belongs to (xtrap_torch): borrow a sibling's.
    sibling = next(argv for f, argv in units if f.endswith("src/model/transformer.cpp"))
    for glue in GLUE:
        units.append((glue, [glue if a.endswith("src/model/transformer.cpp") else a for a in sibling]))
    return units


def retarget(argv, source, torch_include, cuda_include, stub, warnings):
    """The unit's own flags (defines, xtrap's include folders) with the other LibTorch's headers in
    place of the build's, <torch/torch.h> included first as the build's precompiled header does."""
    keep, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-include", "-isystem"):  # object, precompiled header, the build's LibTorch
            skip = True
        elif a not in ("-c", "-Winvalid-pch", source):
            keep.append(a)
    return ([argv[0]] + keep + CUDA_DEFINES + ["-fsyntax-only"] + ([] if warnings else ["-w"]) +
            ["-isystem", torch_include, "-isystem", os.path.join(torch_include, "torch/csrc/api/include"),
             "-isystem", stub, "-isystem", cuda_include, "-include", "torch/torch.h", source])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch-include", required=True, help="a LibTorch 2.x include folder (torch/include of a wheel)")
    p.add_argument("--cuda-include", default="/usr/local/cuda/include", help="the CUDA toolkit's headers")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="a build folder with compile_commands.json")
    p.add_argument("--warnings", action="store_true", help="print warnings at xtrap's own lines")
    p.add_argument("only", nargs="*", help="check only the files whose path contains one of these")
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.torch_include, "torch/csrc/api/include/torch/torch.h")):
        sys.exit(f"--torch-include {a.torch_include}: no torch/csrc/api/include/torch/torch.h there")
    failed = []
    with tempfile.TemporaryDirectory() as stub:
        # Generated where LibTorch is built with CUDA; a wheel without CUDA headers lacks it.
        os.makedirs(os.path.join(stub, "c10/cuda/impl"))
        with open(os.path.join(stub, "c10/cuda/impl/cuda_cmake_macros.h"), "w") as f:
            f.write("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
        for source, argv in torch_units(a.build):
            name = os.path.relpath(source, ROOT)
            if a.only and not any(o in name for o in a.only):
                continue
            r = subprocess.run(retarget(argv, source, a.torch_include, a.cuda_include, stub, a.warnings),
                               capture_output=True, text=True)
            print(("ok    " if r.returncode == 0 else "FAILED") + " " + name, flush=True)
            if r.returncode != 0:
                failed.append(name)
                print(r.stderr, flush=True)
            elif a.warnings:
                for line in r.stderr.splitlines():
                    if line.startswith(ROOT) and "warning" in line:
                        print("  " + line, flush=True)
    print(f"{len(failed)} file(s) failed" + (": " + ", ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
