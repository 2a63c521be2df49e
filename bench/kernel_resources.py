#!/usr/bin/env python3
"""What ptxas gives each CUDA kernel of the project, without a GPU: registers, spill bytes, and the
warpgroup-MMA pipeline notes that cost speed silently (C7513, C7515...: "Potential Performance
Loss: wgmma.mma_async instructions are serialized"; C7517: a wait injected by the compiler).
nvcc's -Xptxas -v prints these as "info" lines among hundreds; this keeps one line per kernel
instance, its template arguments as the mangled name gives them.

    python3 bench/kernel_resources.py [--nvcc PATH] [--arch sm_90a] [--filter keyGrad] [FILE.cu ...]

Exits 1 when a kernel has serialized products or injected waits (the kernels are written so that
none has), 0 otherwise; spills are reported, not judged (some instances are allowed them).
"""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_FILES = ["src/model/position/linear_bias_attention_forward.cu",
                 "src/model/position/linear_bias_attention_backward.cu",
                 "src/model/position/linear_bias_attention_backward_two_pass.cu",
                 "src/model/position/linear_bias_attention_backward_atomic_dq.cu",
                 "src/model/position/linear_bias_attention_warpgroup_probe.cu", "src/model/position/rotary.cu",
                 "src/model/linear_nll.cu"]


def kernel_name(mangled):
    """fooKernel<64, false, true> from _ZN...fooKernelILi64ELb0ELb1EEEv..."""
    # The Itanium ABI writes a nested name (_ZN) as its parts in order, each its length, then the
    # part: the kernel's is the one that ends in "Kernel", maybe followed by its template arguments
    # I...E. Read in order, as an unnamed namespace's part (_GLOBAL__N_ with its file's name and a
    # hash, digits among them) may not be searched for lengths.
    pos = 3 if mangled.startswith("_ZN") else None
    while pos is not None:
        m = re.match(r"\d+", mangled[pos:])
        if not m:
            break
        length, start = int(m.group()), pos + m.end()
        name, pos = mangled[start:start + length], start + length
        if len(name) == length and name.endswith("Kernel"):
            arguments = re.match(r"I((?:L[ib]\d+E)+)E", mangled[pos:])
            if arguments:
                values = [("true" if v == "1" else "false") if t == "b" else v
                          for t, v in re.findall(r"L([ib])(\d+)E", arguments.group(1))]
                name += "<" + ", ".join(values) + ">"
            return name
    return mangled


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--nvcc", default="nvcc", help="the CUDA compiler (default: nvcc on PATH)")
    parser.add_argument("--arch", default="sm_90a", help="the GPU architecture ptxas compiles for")
    parser.add_argument("--filter", default="", help="only kernels whose name holds this")
    args = parser.parse_args()
    compute = args.arch.replace("sm_", "compute_")
    troubles = 0
    for file in args.files:
        command = [args.nvcc, "-std=c++17", "-O3", "-ftz=true", f"-gencode=arch={compute},code={args.arch}",
                   f"-I{ROOT / 'src'}", "-c", str(ROOT / file), "-o", "/dev/null", "-Xptxas", "-v"]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as e:
            sys.exit(f"kernel_resources: cannot run {args.nvcc}: {e.strerror}")
        if result.returncode != 0:
            errors = [line for line in result.stderr.splitlines() if "error" in line] or result.stderr.splitlines()
            sys.exit(f"kernel_resources: nvcc failed on {file} (exit {result.returncode}): "
                     f"{errors[0] if errors else 'no message'}")
        kernels = {}  # mangled -> facts
        current = None
        for line in result.stderr.splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            if m:
                current = kernels.setdefault(m.group(1), {"notes": set()})
                continue
            m = re.search(r"\((C75\d\d)\).*function '(\w+)'", line)
            if m and ("serialized" in line or "injected" in line):
                what = "serialized" if "serialized" in line else "wait injected"
                kernels.setdefault(m.group(2), {"notes": set()})["notes"].add(f"{m.group(1)} {what}")
                continue
            if current is None:
                continue
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m:
                current["spill"] = f"{m.group(1)}/{m.group(2)}"
            m = re.search(r"Used (\d+) registers", line)
            if m:
                current["registers"] = int(m.group(1))
        print(f"# {file} ({args.arch})")
        print(f"{'kernel':60s} {'regs':>5s} {'spill st/ld':>12s}  notes")
        for mangled, facts in sorted(kernels.items(), key=lambda kv: kernel_name(kv[0])):
            name = kernel_name(mangled)
            if args.filter not in name:
                continue
            notes = ", ".join(sorted(facts["notes"]))
            troubles += bool(facts["notes"])
            print(f"{name:60s} {facts.get('registers', '?'):>5} {facts.get('spill', '?'):>12s}  {notes}")
    sys.exit(1 if troubles else 0)


if __name__ == "__main__":
    main()
