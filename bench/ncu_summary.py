"""One table of the kernels that bench/gpu_check.sh's ncu stage profiled, side by side.

The stage keeps, per profile NAME (the fused kernel under each backward scheme, SDPA flash's and
FlexAttention's kernels at the same case), every metric of Nsight Compute's full set by name:
ncu-NAME-raw.csv (`ncu --import R --page raw --csv`: a header row, a row of units, a row per
kernel). Issue 23 asks for the cause of the fused kernel's gap to those anchors, shown by the
profile. This script reads the metrics that would show it into one Markdown table, a row per
kernel: its time, how busy the SM, the tensor pipe, the shared-memory pipe, L2 and DRAM were, the
achieved occupancy and registers, its busiest instruction pipes and its warps' top stall reasons
(cycles a warp waited per instruction issued, by reason). A metric this ncu does not report is
"-"; every other metric stays in the raw CSVs.

  python3 bench/ncu_summary.py --md OUT.md ncu-two-pass-raw.csv ncu-sdpa-flash-raw.csv ...

With --sass, the source pages too (ncu-NAME-sass.csv: `--page source --print-source sass --csv`):
a second table of each kernel's asynchronous copies from global to shared memory (LDGSTS), the
shared-memory wavefronts and L2 sectors they took against the ideal for their bytes, the counters
that show whether a tile layout makes its copies cost more than their data.
"""
import argparse
import csv
import os
import re
import sys

# column: the metrics that give it, the first one present wins (names differ across ncu versions)
COLUMNS = [
    ("SM busy %", ["sm__throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("issue slots busy %", ["sm__inst_issued.avg.pct_of_peak_sustained_active",
                            "smsp__issue_active.avg.pct_of_peak_sustained_active"]),
    ("tensor pipe %", ["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                       "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                       "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"]),
    ("shared-memory pipe %", ["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"]),
    ("L2 %", ["lts__throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("DRAM %", ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                "dram__throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("occupancy %", ["sm__warps_active.avg.pct_of_peak_sustained_active"]),
    ("registers", ["launch__registers_per_thread"]),
]
# The shared-memory wavefronts that were bank conflicts, of all: conflicts / wavefronts.
CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
DURATION = "gpu__time_duration.sum"
# ncu 2025 writes the short forms (us) where older versions wrote usecond.
TO_MICROSECONDS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
PIPE = re.compile(r"^sm__inst_executed_pipe_([a-z0-9_]+)\.avg\.pct_of_peak_sustained_active$")
STALL = re.compile(r"^smsp__average_warps_issue_stalled_([a-z0-9_]+)_per_issue_active\.ratio$")
TOP = 3


def number(text):
    """A metric's value as ncu prints it (thousands separated by commas), or None if not a number."""
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def read_raw(path):
    """(units by metric, a dict per kernel) from one `--page raw --csv` file; ncu's own lines before
    the header (==PROF==, ==WARNING==) are skipped."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    rows = list(csv.reader(lines))
    if len(rows) < 2 or rows[0][:1] != ["ID"]:
        raise ValueError(f"{path}: no ncu raw page (a header row starting with \"ID\")")
    header, units = rows[0], rows[1]
    return dict(zip(header, units)), [dict(zip(header, r)) for r in rows[2:] if len(r) == len(header)]


def kernel_name(full):
    """The kernel's name without its namespaces and parameters: `forwardKernel<64, 0, 0>`."""
    name = full.strip().removeprefix("void ").replace("(anonymous namespace)", "anonymous")
    name = re.sub(r"\((int|bool)\)", "", name)  # the source page writes template arguments as (int)64
    depth, cut, end = 0, 0, len(name)  # the parameters' "(" and the last "::", outside template brackets
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)  # ncu writes the anonymous namespace as "unnamed>"
        elif depth == 0 and ch == "(":
            end = i
            break
        elif depth == 0 and name.startswith("::", i):
            cut = i + 2
    name = name[cut:end].strip()
    return name if len(name) <= 60 else name[:57] + "..."


def top(kernel, pattern, digits):
    """The TOP largest metrics matching pattern, as `name value` (largest first)."""
    found = [(v, m.group(1)) for key, text in kernel.items() if (m := pattern.match(key))
             and (v := number(text)) is not None and v > 0]
    return ", ".join(f"{name} {v:.{digits}f}" for v, name in sorted(found, reverse=True)[:TOP]) or "-"


def summary_row(profile, units, kernel):
    def value(names, digits):
        for name in names:
            v = number(kernel.get(name))
            if v is not None:
                return f"{v:.{digits}f}"
        return "-"

    duration = number(kernel.get(DURATION))
    scale = TO_MICROSECONDS.get(units.get(DURATION, ""))
    conflicts, wavefronts = number(kernel.get(CONFLICTS)), number(kernel.get(WAVEFRONTS))
    return ([profile, kernel_name(kernel.get("Kernel Name", "?")),
             f"{duration * scale:.1f}" if duration is not None and scale else "-"] +
            [value(names, 0 if label == "registers" else 1) for label, names in COLUMNS] +
            [f"{100 * conflicts / wavefronts:.1f}" if conflicts is not None and wavefronts else "-",
             top(kernel, PIPE, 1), top(kernel, STALL, 2)])


def markdown(header, body):
    """A Markdown table of the header and the body's rows."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body]) + "\n"


def profile_name(path):
    """NAME of ncu-NAME-raw.csv (the file's name otherwise)."""
    base = os.path.basename(path)
    m = re.match(r"^ncu-(.+)-raw\.csv$", base)
    return m.group(1) if m else base


def summarize(paths):
    header = (["profile", "kernel", "µs"] + [label for label, _ in COLUMNS] +
              ["bank-conflict wavefronts %", f"busiest pipes (% of peak, top {TOP})",
               f"stall reasons (cycles per issued instruction, top {TOP})"])
    body, failed = [], []
    for path in paths:
        try:
            units, kernels = read_raw(path)
        except (OSError, ValueError) as e:
            failed.append(str(e))
            continue
        body += [summary_row(profile_name(path), units, k) for k in kernels]
    return markdown(header, body), failed


COPY_COUNTERS = ["Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal",
                 "L2 Theoretical Sectors Global", "L2 Theoretical Sectors Global Ideal"]


def read_sass(path):
    """{kernel: its SASS rows (dict by column)} from one source page; a kernel listed again (the page
    repeats a function per launch profiled) keeps its first listing."""
    kernels, rows, header = {}, None, None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if r[:1] == ["Kernel Name"]:
                name = kernel_name(r[1]) if len(r) > 1 else "?"
                rows = kernels.setdefault(name, []) if name not in kernels else None
                header = None
            elif r[:1] == ["Address"]:
                header = r
            elif header and rows is not None and len(r) == len(header):
                rows.append(dict(zip(header, r)))
    return kernels


def copies(paths):
    """The LDGSTS table: per profile and kernel, the copies' counters summed, and per copy instruction."""
    header = ["profile", "kernel", "copies (warp instructions)", "shared wavefronts a copy", "ideal",
              "L2 sectors a copy", "ideal"]
    body, failed = [], []
    for path in paths:
        try:
            kernels = read_sass(path)
        except (OSError, csv.Error) as e:
            failed.append(f"{path}: {e}")
            continue
        profile = re.sub(r"^ncu-(.+)-sass\.csv$", r"\1", os.path.basename(path))
        for name, rows in kernels.items():
            sums = [sum(number(r.get(c)) or 0 for r in rows if "LDGSTS" in r.get("Source", "")) for c in COPY_COUNTERS]
            if sums[0]:
                body.append([profile, name, f"{sums[0]:,.0f}"] + [f"{v / sums[0]:.1f}" for v in sums[1:]])
    return markdown(header, body), failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--md", required=True, help="the Markdown table to write")
    ap.add_argument("--sass", nargs="+", default=[], help="ncu-NAME-sass.csv files: the copies' table")
    ap.add_argument("raw", nargs="+", help="ncu-NAME-raw.csv files (ncu --import R --page raw --csv)")
    args = ap.parse_args(argv)
    table, failed = summarize(args.raw)
    if args.sass:
        copy_table, copy_failed = copies(args.sass)
        failed += copy_failed
    with open(args.md, "w") as f:
        f.write("# Nsight Compute, kernel by kernel (bench/ncu_summary.py)\n\n")
        f.write(f"Metrics: time `{DURATION}`; " +
                "; ".join(f"{label} `{names[0]}`" for label, names in COLUMNS) +
                f"; bank-conflict wavefronts `{CONFLICTS}` / `{WAVEFRONTS}`; pipes `sm__inst_executed_pipe_*"
                ".avg.pct_of_peak_sustained_active`; stalls `smsp__average_warps_issue_stalled_*_per_issue_active"
                ".ratio`. bench/gpu_check.sh profiles with `ncu --clock-control none`: the clocks as in a plain run.\n\n")
        f.write(table)
        if args.sass:
            f.write("\nAsynchronous copies global -> shared (LDGSTS), from the source pages: per warp instruction, "
                    "the shared-memory wavefronts and L2 sectors it took, and the fewest its bytes need.\n\n")
            f.write(copy_table)
        for e in failed:
            f.write(f"\nNot read: {e}\n")
    for e in failed:
        print(f"bench/ncu_summary.py: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
