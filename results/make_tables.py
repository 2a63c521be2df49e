#!/usr/bin/python3
"""Regenerates the comparison tables in results/*.md, README.md and docs/*.md from the results CSVs.

A table lives between `<!-- table:ID -->` and `<!-- end -->` in a markdown file; everything in
between is rewritten from the CSVs, so the numbers (and every ratio and cost) cannot drift from
the data. Standard library only.

    /usr/bin/python3 results/make_tables.py           rewrite the tables in place
    /usr/bin/python3 results/make_tables.py --check   exit 1 if any committed table differs

Rows or cells missing from a CSV print as "-", so a re-run scenario with other lengths still
gives a table (the longest and shortest Lvalid are read from the CSV, not assumed).
"""
import csv
import json
import math
import os
import re
import sys
from statistics import mean, median, stdev

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from attention_anchors import SCHEMES, base_method  # noqa: E402  the fused rows' configuration suffixes

RESULTS = os.path.dirname(os.path.abspath(__file__))
MARKER = re.compile(r"(<!-- table:([\w./-]+) -->\n)(.*?)(<!-- end -->)", re.S)


def load(csv_path):
    with open(os.path.join(RESULTS, csv_path), newline="") as f:
        return list(csv.DictReader(f))


def select(rows, run, mode, interp="none", stride=None):
    out = [r for r in rows if r["run"] == run and r["mode"] == mode and r["interp"] == interp]
    if stride is not None:
        out = [r for r in out if int(r["stride"]) == stride]
    return {int(r["Lvalid"]): float(r["ppl"]) for r in out}


def lengths(rows, mode):
    return sorted({int(r["Lvalid"]) for r in rows if r["mode"] == mode})


def strides(rows, mode):
    return sorted({int(r["stride"]) for r in rows if r["mode"] == mode})


def l_train(rows):
    return int(rows[0]["L_train"])


def label(n, L):
    """Lvalid as a multiple of L_train when it is one (L, 2L, 16L), else the number."""
    if n % L:
        return str(n)
    return "L" if n == L else f"{n // L}L"


def ppl(cells, n):
    return f"{cells[n]:.2f}" if n in cells else "-"


def ratio(cells, long, short):
    return f"{cells[long] / cells[short]:.3f}" if long in cells and short in cells else "-"


def cost(cells, base, n):
    """Relative perplexity change against the baseline row at the same Lvalid, in percent."""
    if n not in cells or n not in base:
        return "-"
    return f"{100 * (cells[n] / base[n] - 1):+.1f}%"


def table(header, rows, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# Published numbers the tables set beside ours (from /work/shared/ANCHORS.md).
TABLE2_PAPER = {"sinusoidal": "18.6", "rotary": "3.5", "t5": "3.3", "alibi": "0.93", "none": "-"}
SLIDING_PAPER = {"sinusoidal": "19.6 (18.35 -> 360.12)", "t5": "1.72 (17.92 -> 30.77)",
                 "alibi": "1.02 (17.98 -> 18.3)"}
DECODER_METHODS = [("sinusoidal", "sinusoidal"), ("rotary", "rotary"), ("T5", "t5"), ("ALiBi", "alibi"),
                   ("none (NoPE)", "none")]


def paper_table2_nonoverlap(folder):
    rows = load(f"{folder}/results.csv")
    L, ns = l_train(rows), lengths(rows, "nonoverlap")
    header = ["method"] + [f"ppl({label(n, L)})" for n in ns]
    header += [f"{label(ns[-1], L)}/{label(ns[0], L)}", "paper ppl(12512)/ppl(512)"]
    body = []
    for name, run in DECODER_METHODS:
        c = select(rows, run, "nonoverlap")
        body.append([name] + [ppl(c, n) for n in ns] + [f"**{ratio(c, ns[-1], ns[0])}**", TABLE2_PAPER[run]])
    return table(header, body)


def paper_table2_sliding(folder):
    rows = load(f"{folder}/results.csv")
    L, ns = l_train(rows), lengths(rows, "sliding")
    out = ""
    for s in strides(rows, "sliding"):
        header = ["method"] + [f"ppl({label(n, L)})" for n in ns] + [f"{label(ns[-1], L)}/{label(ns[0], L)}"]
        body = []
        for name, run in DECODER_METHODS:
            c = select(rows, run, "sliding", stride=s)
            body.append([name] + [ppl(c, n) for n in ns] + [ratio(c, ns[-1], ns[0])])
        out += f"Sliding window, stride {s}:\n\n" + table(header, body)
    return out


def paper_table2_sinusoidal_steps():
    rows = load("paper-table2-mini/results.csv")
    with open(os.path.join(RESULTS, "paper-table2-mini/manifest.json")) as f:
        manifest = json.load(f)["variants"]
    L, ns, sl = l_train(rows), lengths(rows, "nonoverlap"), lengths(rows, "sliding")
    s = strides(rows, "sliding")
    header = ["run", "steps", f"ppl({label(ns[0], L)})", f"ppl({label(ns[-1], L)})",
              f"{label(ns[-1], L)}/{label(ns[0], L)} nonoverlap"]
    if sl and s:
        header.append(f"{label(sl[-1], L)}/{label(sl[0], L)} sliding s={s[0]}")
    body = []
    for run in ["sinusoidal-100", "sinusoidal-200", "sinusoidal"]:
        c = select(rows, run, "nonoverlap")
        steps = str(manifest.get(run, {}).get("steps", "-"))
        r = [run, steps, ppl(c, ns[0]), ppl(c, ns[-1]), ratio(c, ns[-1], ns[0])]
        if sl and s:
            cs = select(rows, run, "sliding", stride=s[0])
            r.append(ratio(cs, sl[-1], sl[0]))
        body.append(r)
    return table(header, body)


def paper_sliding():
    rows = load("paper-sliding-mini/results.csv")
    L, ns = l_train(rows), lengths(rows, "sliding")
    header = ["method", f"ppl({label(ns[0], L)})", f"ppl({label(ns[-1], L)})",
              f"ours {label(ns[-1], L)}/{label(ns[0], L)}", "paper 3072/512 (stride 1)"]
    body = []
    for name, run in DECODER_METHODS:
        c = select(rows, run, "sliding")
        body.append([name, ppl(c, ns[0]), ppl(c, ns[-1]), ratio(c, ns[-1], ns[0]), SLIDING_PAPER.get(run, "-")])
    return table(header, body)


ENCODER_ROWS = [("baseline (learned + RoBERTa head)", "baseline", "2.94"), ("learned-clap", "learned-clap", "2.86"),
                ("alibi-offset (the seed's `alibi`: offset ALiBi + RoBERTa head)", "alibi-offset", "2.93"),
                ("zero-clap (alibi-offset + CLAP)", "zero-clap", "2.83"),
                ("alibi-symmetric (RoBERTa head)", "alibi-symmetric", "-"),
                ("alibi-onesided", "alibi-onesided", "-"), ("alibi-learned", "alibi-learned", "-"),
                ("bialibi", "bialibi", "-")]


def with_blocks(rows):
    """Each row with r["block"]: which [[eval]] block of its scenario wrote it (0, 1, ...), i.e. how
    many earlier rows have the same variant, seed, Lvalid, mode, stride and interpolation."""
    seen = {}
    for r in rows:
        key = (r["run"], r.get("seed"), r["Lvalid"], r["mode"], r["stride"], r["interp"])
        r["block"] = seen.get(key, 0)
        seen[key] = r["block"] + 1
    return rows


def by_seed(rows, run, mode, block=0):
    """{Lvalid: {seed: ppl}} of one variant's rows of one eval block and mode (seed -1: not recorded)."""
    out = {}
    for r in rows:
        if r["run"] == run and r["mode"] == mode and r["interp"] == "none" and r["block"] == block:
            out.setdefault(int(r["Lvalid"]), {})[int(r.get("seed") or -1)] = float(r["ppl"])
    return out


def mean_sd(values, digits):
    """'mean' for one value, 'mean ± sample standard deviation' for several."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{mean(values):.{digits}f} ± {stdev(values):.{digits}f}"


def require_same_scored_tokens(rows, csv_path):
    """Every encoder row of a scenario scores the same masked tokens at the same Lvalid, mode and block."""
    counts = {}
    for r in rows:
        counts.setdefault((r["Lvalid"], r["mode"], r["stride"], r["block"]), set()).add(int(r["tokens_scored"]))
    for (lvalid, mode, _, block), seen in counts.items():
        if len(seen) > 1:
            sys.exit(f"{csv_path}: eval block {block + 1}, Lvalid {lvalid} {mode}: rows score different token "
                     f"counts {sorted(seen)}")


def encoder_rows(folder):
    rows = with_blocks(load(f"{folder}/results.csv"))
    require_same_scored_tokens(rows, f"{folder}/results.csv")
    return rows


def encoder_variants(folder):
    rows = encoder_rows(folder)
    L = l_train(rows)
    ns = sorted({int(r["Lvalid"]) for r in rows if r["mode"] == "nonoverlap" and r["block"] == 0})
    header = ["config", f"ppl({label(ns[0], L)})", f"{label(ns[-1], L)}/{label(ns[0], L)}", "seeds",
              "seed roberta.base ppl"]
    body = []
    for name, run, paper in ENCODER_ROWS:
        c = by_seed(rows, run, "nonoverlap")
        short, long = c.get(ns[0], {}), c.get(ns[-1], {})
        ratios = [long[s] / short[s] for s in short if s in long]
        body.append([name, mean_sd(list(short.values()), 2), mean_sd(ratios, 3), str(len(short)), paper])
    return table(header, body)


def encoder_sliding():
    """Non-overlapping vs sliding windows on the same tokens (the second eval block)."""
    rows = encoder_rows("encoder-variants-mini")
    L = l_train(rows)
    ns = sorted({int(r["Lvalid"]) for r in rows if r["mode"] == "sliding"})
    stride = strides(rows, "sliding")
    header = ["config"] + [f"{m} ppl({label(n, L)})" for n in ns for m in ("non-overlapping", f"sliding s={stride[0]}")]
    body = []
    for name, run, _ in ENCODER_ROWS:
        non, sliding = by_seed(rows, run, "nonoverlap", block=1), by_seed(rows, run, "sliding", block=0)
        cells = []
        for n in ns:
            cells += [mean_sd(list(non.get(n, {}).values()), 2), mean_sd(list(sliding.get(n, {}).values()), 2)]
        body.append([name] + cells)
    return table(header, body)


def interp_cost(folder):
    rows = load(f"{folder}/results.csv")
    L, ns = l_train(rows), lengths(rows, "nonoverlap")
    interps = []
    for r in rows:
        if r["interp"] not in interps:
            interps.append(r["interp"])
    models = []
    for r in rows:
        if r["run"] not in models:
            models.append(r["run"])
    lo, hi = label(ns[0], L), label(ns[-1], L)
    header = ["interpolation"]
    for m in models:
        header += [f"{m} {hi}/{lo}", f"{m} vs none at {lo}", f"{m} vs none at {hi}"]
    body = []
    for i in interps:
        r = [next(interp_name(row) for row in rows if row["interp"] == i)]
        for m in models:
            c, base = select(rows, m, "nonoverlap", i), select(rows, m, "nonoverlap")
            r += [ratio(c, ns[-1], ns[0]), cost(c, base, ns[0]), cost(c, base, ns[-1])]
        body.append(r)
    return table(header, body)


def quickstart_eval():
    rows = load("quickstart_eval.csv")
    ns = lengths(rows, "nonoverlap")
    c = select(rows, rows[0]["run"], "nonoverlap")
    scored = sorted({r["tokens_scored"] for r in rows})
    return (table(["Lvalid"] + [str(n) for n in ns], [["ppl"] + [ppl(c, n) for n in ns]],
                  ["---"] * (len(ns) + 1)) + f"\nTokens scored per row: {', '.join(scored)}; "
            f"ppl({ns[-1]})/ppl({ns[0]}) = {ratio(c, ns[-1], ns[0])}.\n")


def quickstart_interp():
    """interp_table.csv: perplexity of one quickstart decoder under each interpolation, non-overlapping."""
    rows = load("interp_table.csv")
    ns = lengths(rows, "nonoverlap")
    interps = list(dict.fromkeys(r["interp"] for r in rows))
    run = rows[0]["run"]
    body = []
    for i in interps:
        c = select(rows, run, "nonoverlap", i)
        scale = {int(r["Lvalid"]): r["scale"] for r in rows if r["interp"] == i and r["mode"] == "nonoverlap"}
        body.append([i] + [ppl(c, n) + (f" (a={scale[n]})" if i != "none" and n in scale else "") for n in ns])
    scored = sorted({r["tokens_scored"] for r in rows})
    return table(["interp"] + [f"Lvalid {n}" for n in ns], body) + f"\nTokens scored per row: {', '.join(scored)}.\n"


def protocols_ppl():
    """protocols.csv: one quickstart decoder scored under each window protocol (eval --protocol)."""
    rows = load("protocols.csv")
    ns = sorted({int(r["Lvalid"]) for r in rows})
    L = l_train(rows)
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    body = []
    for m in modes:
        by = {int(r["Lvalid"]): r for r in rows if r["mode"] == m}
        cells = [f"{float(by[n]['ppl']):.2f} ({int(by[n]['tokens_scored']):,})" if n in by else "-" for n in ns]
        words = [f"{float(by[n]['word_ppl']):.2f}" if n in by and by[n]["word_ppl"] else "-" for n in ns]
        body.append([f"`{m}`"] + cells + [" / ".join(words)])
    return table(["protocol"] + [f"{label(n, L)} ppl (tokens)" for n in ns] + ["word ppl " + " / ".join(label(n, L) for n in ns)],
                 body)


def protocols_kl():
    """protocols_kl.csv: each interpolation of the quickstart decoder against none (eval --kl-base none)."""
    rows = load("protocols_kl.csv")
    ns = sorted({int(r["Lvalid"]) for r in rows})
    L = l_train(rows)
    body = []
    for i in dict.fromkeys(r["interp"] for r in rows):
        by = {int(r["Lvalid"]): r for r in rows if r["interp"] == i}
        for what, key, fmt in (("KL mean", "kl_mean", "{:.4f}"), ("KL p99", "kl_p99", "{:.4f}"),
                               ("KL p99.9", "kl_p999", "{:.4f}"), ("KL max", "kl_max", "{:.3f}"),
                               ("same top", "same_top", "{:.2%}"), ("ppl / ppl(none)", "ppl_ratio", "{:.4f}")):
            body.append([i, what] + [fmt.format(float(by[n][key])) if n in by else "-" for n in ns])
    scored = sorted({r["tokens_scored"] for r in rows})
    return (table(["interp", ""] + [label(n, L) for n in ns], body, ["---", "---"] + ["---:"] * len(ns)) +
            f"\nTokens scored per row: {', '.join(scored)}.\n")


def protocols_kl_position():
    """protocols_kl_per_position.csv: mean KL against none by position in the window, at the longest Lvalid."""
    rows = load("protocols_kl_per_position.csv")
    n = max(int(r["Lvalid"]) for r in rows)
    at = [r for r in rows if int(r["Lvalid"]) == n]
    buckets = sorted({(int(r["position_begin"]), int(r["position_end"])) for r in at})
    body = []
    for i in dict.fromkeys(r["interp"] for r in at):
        by = {(int(r["position_begin"]), int(r["position_end"])): r for r in at if r["interp"] == i}
        body.append([i] + [f"{float(by[b]['mean_kl']):.4f} ({float(by[b]['same_top']):.1%})" if b in by else "-"
                           for b in buckets])
    return table(["interp"] + [f"{b}..{e - 1}" for b, e in buckets], body) + \
        f"\nLvalid {n}: mean KL(none || interp) (same top token) of the tokens at those window positions.\n"


def recipe_heads():
    """recipe-mini: perplexity at L of each output head (columns) in each training regime (rows)."""
    rows = load("recipe-mini/results.csv")
    L = l_train(rows)
    heads = [("adaptive-untied", "untied adaptive"), ("full-tied", "full tied"), ("adaptive-input-tied", "adaptive input tied")]
    regimes = [("", "d = 64, one pass over a third of WikiText-2, no dropout"),
               ("-6ep", "d = 64, 6 epochs of 200k words (`data/wikitext-2-head`), dropout 0.2"),
               ("-6ep-d128", "d = 128, the same 6 epochs")]
    body = [[text] + [ppl(select(rows, head + suffix, "nonoverlap"), L) for head, _ in heads] for suffix, text in regimes]
    return table(["regime"] + [name for _, name in heads], body, ["---", "---:", "---:", "---:"])


def study_index():
    """One row per results/<study>/ folder that `xtrap run` wrote: its command, when it finished and the
    code version (manifest.json, version.txt), and its figure."""
    body = []
    for name in sorted(os.listdir(RESULTS)):
        manifest = os.path.join(RESULTS, name, "manifest.json")
        if not os.path.isfile(manifest):
            continue
        with open(manifest) as f:
            m = json.load(f)
        version_txt = os.path.join(RESULTS, name, "version.txt")
        version = "-"  # a study still running has written its manifest but not yet its version
        if os.path.isfile(version_txt):
            with open(version_txt) as f:
                version = f.read().strip()
        machine = m.get("machine", {})
        devices = sorted({v.get("device", "cpu") for v in m.get("variants", {}).values()})
        body.append([f"[`{name}/`]({name}/table.md)", f"`xtrap run scenarios/{name}.toml`",
                     m.get("finished", "-")[:10], version, ", ".join(devices) + f" ({machine.get('cpu_threads', '-')} CPU threads)",
                     next((f"[plot]({name}/{png})" for png in ("ppl_vs_length.png", "retrieval_heatmap.png")
                           if os.path.isfile(os.path.join(RESULTS, name, png))), "-")])
    return table(["study", "command", "finished", "code version", "device", "figure"], body,
                 ["---", "---", "---", "---", "---", "---"])


def distributed_scaling(csv_path):
    """Median tok/s per rank count over the repeats of bench/distributed_scaling.sh, and the speed-up."""
    rows = load(csv_path)
    by_ranks = {}
    for r in rows:
        by_ranks.setdefault(int(r["ranks"]), []).append(float(r["tok_per_s"]))
    base = median(by_ranks[1])
    return table(["ranks", "runs", "tok/s each run", "median tok/s", "speed-up vs 1 rank"],
                 [[str(n), str(len(v)), " ".join(f"{x:.0f}" for x in v), f"{median(v):.0f}",
                   f"{median(v) / base:.2f}x"] for n, v in sorted(by_ranks.items())])


def gpu_long_eval():
    """xtrap eval of one L=512 model on CUDA at every Lvalid, bfloat16 (the fused kernel) beside float32."""
    runs = {d: {int(r["Lvalid"]): r for r in load(f"gpu/long_eval_{d}.csv")} for d in ("bfloat16", "float32")}
    ns = sorted(set(runs["bfloat16"]) | set(runs["float32"]))

    def cell(dtype, n, key, fmt):
        r = runs[dtype].get(n)
        return fmt.format(float(r[key])) if r else "-"

    return table(["Lvalid", "tokens scored", "ppl bf16", "ppl fp32", "seconds bf16", "seconds fp32",
                  "peak MiB bf16", "peak MiB fp32"],
                 [[str(n), (runs["bfloat16"].get(n) or runs["float32"][n])["tokens_scored"],
                   cell("bfloat16", n, "ppl", "{:.2f}"), cell("float32", n, "ppl", "{:.2f}"),
                   cell("bfloat16", n, "seconds", "{:.3f}"), cell("float32", n, "seconds", "{:.3f}"),
                   cell("bfloat16", n, "peak_mib", "{:.0f}"), cell("float32", n, "peak_mib", "{:.0f}")] for n in ns])


def gpu_throughput():
    """bench/compare.py --device cuda, the latest run on each card: xtrap and eager train tok/s per method."""
    sessions = [("H100, 88b767e", "gpu/h100-2026-11-26/gpu_throughput.csv"),
                ("H200, fe95352", "gpu/h200-2026-11-27/gpu_throughput.csv")]
    rows = {name: {r["method"]: r for r in load(path)} for name, path in sessions}
    methods = list(dict.fromkeys(m for name, _ in sessions for m in rows[name]))
    header = ["method"] + [f"{h} ({name})" for name, _ in sessions for h in ("xtrap tok/s", "eager tok/s", "xtrap / eager")]

    def cells(name, m):
        r = rows[name].get(m)
        if not r:
            return ["-", "-", "-"]
        return [f"{float(r['xtrap_tok_per_s']):,.0f}", f"{float(r['eager_tok_per_s']):,.0f}", f"{float(r['ratio']):.2f}"]

    return table(header, [[m] + [c for name, _ in sessions for c in cells(name, m)] for m in methods])


FUSED_SESSION = "gpu/h200-2026-11-27"  # one command of bench/fused_attention.sh: the kernel's four configurations and the anchors


def config_name(suffix):
    """bench_attention --fused-backward's name of the configuration whose rows end in suffix."""
    return suffix.removeprefix("-") or "two-pass"


def fused_rows(session=FUSED_SESSION):
    """The fused kernel's rows (bench_attention --fused-csv) and the anchors' (attention_anchors.py) of
    one session, by case then method."""
    by_case = {}
    for name in ("fused.csv", "anchors.csv"):
        for r in load(f"{session}/{name}"):
            by_case.setdefault(r["case"], {})[r["method"]] = r
    return by_case


def gpu_fused_anchors():
    """PyTorch's attention paths at each case (forward + backward ms) and the peak memory of the anchors
    that take a bias tensor against the fused kernel's, in the same command as gpu_fused_configs."""
    anchors = ["sdpa-flash", "flex-alibi", "sdpa-cudnn-bias", "sdpa-efficient-bias", "flex-learned"]
    body = []
    for case, rows in fused_rows().items():
        ok = lambda m: m in rows and rows[m]["status"] == "ok"
        ms = lambda m: f"{float(rows[m]['ms']):.3f}" if ok(m) else "-"
        peak = lambda m: f"{float(rows[m]['peak_mib']):.0f}" if ok(m) else "-"
        fused = sorted({round(float(r["peak_mib"])) for m, r in rows.items() if m.startswith("xtrap-fused-") and ok(m)})
        body.append([case] + [ms(a) for a in anchors] + [peak("sdpa-cudnn-bias"), peak("sdpa-efficient-bias"),
                                                         ", ".join(map(str, fused)) or "-"])
    return table(["case"] + [f"{a} ms" for a in anchors] +
                 ["cudnn-bias peak MiB", "efficient-bias peak MiB", "fused peak MiB"], body)


def gpu_fused_configs():
    """Forward + backward ms of every fused variant in each of the kernel's four configurations (backward
    scheme x tile products), the fastest, and the fastest against SDPA flash and FlexAttention's ALiBi."""
    body = []
    for case, rows in fused_rows().items():
        variants = {}
        for m, r in rows.items():
            if not m.startswith("xtrap-fused-"):
                continue
            base = base_method(m)
            if r["status"] == "ok":
                variants.setdefault(base.removeprefix("xtrap-fused-"), {})[config_name(m[len(base):])] = float(r["ms"])
        anchor = lambda a: float(rows[a]["ms"]) if a in rows and rows[a]["status"] == "ok" else None
        flash, flex = anchor("sdpa-flash"), anchor("flex-alibi")
        for variant, ms in variants.items():
            best = min(ms, key=ms.get)
            cells = [f"{ms[c]:.3f}" if c in ms else "-" for c in map(config_name, SCHEMES)]
            body.append([case, variant] + cells + [best, f"{ms[best] / flash:.2f}" if flash else "-",
                                                    f"{ms[best] / flex:.2f}" if flex else "-"])
    return table(["case", "fused variant"] + [f"{config_name(x)} ms" for x in SCHEMES] +
                 ["fastest", "fastest / flash", "fastest / flex-alibi"], body)


def encoder_positions(csv_name):
    """Validation perplexity at L during training of small encoders that differ only in position
    information: xtrap's (encoder_positions_cpu.csv, from their train.jsonl) or PyTorch eager's
    (encoder_positions_pytorch.csv, from bench/encoder_positions.py)."""
    rows = load(csv_name)
    steps = sorted({int(r["step"]) for r in rows})
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    ppl_at = {(r["variant"], int(r["step"])): math.exp(float(r["val_loss"])) for r in rows}
    flags = {r["variant"]: r["flags"] for r in rows}
    tokens = {int(r["step"]): int(r["train_tokens"]) for r in rows}
    return table(["variant", "flags"] + [f"val ppl, step {n} ({tokens[n] / 1e6:.2f}M tokens)" for n in steps],
                 [[v, f"`{flags[v]}`"] + [f"{ppl_at[(v, n)]:.1f}" for n in steps] for v in variants])


def interp_name(r):
    """A row's interpolation with its factor, as xtrap labels it: a fixed factor is named (`linear a=16`),
    a per-length one is a = Lvalid / L, a dynamic one comes from each window's length."""
    interp = r["interp"]
    if interp == "none" or interp.startswith("dynamic"):
        return interp
    if interp.endswith("/per-length"):
        return interp.replace("/per-length", " a=Lvalid/L")
    return f"{interp} a={float(r['scale']):g}"


# methods-mini: every method, and rotary under each inference-time stretch (label, run, interp).
METHODS_ROWS = [("none (NoPE)", "none", "none"), ("sinusoidal", "sinusoidal", "none"), ("rotary", "rotary", "none"),
                ("rotary + {} (PI)", "rotary", "linear"), ("rotary + {}", "rotary", "ntk"),
                ("rotary + {}", "rotary", "yarn"), ("T5", "t5", "none"), ("ALiBi", "alibi", "none"),
                ("KERPLE-log", "kerple-log", "none"), ("FIRE", "fire", "none")]


def methods(mode):
    """Perplexity at every Lvalid and ppl(16L)/ppl(L) per method of methods-mini, one mode (and stride)."""
    rows = load("methods-mini/results.csv")
    L, ns = l_train(rows), lengths(rows, mode)
    header = ["method"] + [f"ppl({label(n, L)})" for n in ns] + [f"{label(ns[-1], L)}/{label(ns[0], L)}"]
    out = ""
    for s in strides(rows, mode) if mode == "sliding" else [None]:
        body = []
        for name, run, interp in METHODS_ROWS:
            c = select(rows, run, mode, interp, stride=s)
            named = next((interp_name(r) for r in rows if r["run"] == run and r["interp"] == interp), interp)
            body.append([name.format(named)] + [ppl(c, n) for n in ns] + [f"**{ratio(c, ns[-1], ns[0])}**"])
        out += (f"Sliding window, stride {s}:\n\n" if s else "") + table(header, body)
    return out


def retrieval(folder, task, filler=""):
    """Retrieval accuracy per variant and interpolation at every Lvalid: every depth's trials pooled,
    and the worst depth's accuracy, in %; the rows' 95% Wilson intervals are in the CSV."""
    rows = [r for r in load(f"{folder}/results.csv") if r.get("task") == task and r.get("filler", "") == filler]
    L, ns = l_train(rows), sorted({int(r["Lvalid"]) for r in rows})
    labels, cells = [], {}
    for r in rows:
        name = r["run"] + ("" if r["interp"] == "none" else f" + {interp_name(r)}")
        name += "" if r.get("extend", "none") in ("", "none") else f" + {r['extend']}"
        if name not in cells:
            labels.append(name)
            cells[name] = {}
        c = cells[name].setdefault(int(r["Lvalid"]), [0, 0, 1.0])
        c[0] += int(r["correct"])
        c[1] += int(r["trials"])
        c[2] = min(c[2], float(r["accuracy"]))
    body = []
    for name in labels:
        line = [name]
        for n in ns:
            c = cells[name].get(n)
            line.append(f"{100 * c[0] / c[1]:.0f} / {100 * c[2]:.0f}" if c else "-")
        body.append(line)
    return table(["variant"] + [f"{label(n, L)} ({n})" for n in ns], body)


def retrieval_at_l(folder):
    """Each variant (no interpolation, repeated filler) at its training length, task by task: every
    depth's trials pooled / the worst depth, in %, and whether every depth reached 90%."""
    rows = [r for r in load(f"{folder}/results.csv")
            if r.get("task") not in ("", "perplexity") and r["interp"] == "none" and r.get("filler") != "natural"
            and r.get("extend", "none") == "none" and r["Lvalid"] == r["L_train"]]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    cells = {}
    for r in rows:
        c = cells.setdefault((r["run"], r["task"]), [0, 0, 1.0])
        c[0] += int(r["correct"])
        c[1] += int(r["trials"])
        c[2] = min(c[2], float(r["accuracy"]))
    body = []
    for run in dict.fromkeys(r["run"] for r in rows):
        line = [run]
        for t in tasks:
            c = cells.get((run, t))
            line.append(f"{100 * c[0] / c[1]:.0f} / {100 * c[2]:.0f}" + (" (yes)" if c[2] >= 0.9 else "") if c else "-")
        body.append(line)
    return table(["variant"] + tasks, body)


def extend_perplexity(folder):
    """Non-overlapping perplexity at every Lvalid and ppl(longest)/ppl(L) per run and method: no change,
    each interpolation (with its factor) and each context extension (with its settings)."""
    rows = [r for r in load(f"{folder}/results.csv") if r["mode"] == "nonoverlap"]
    L, ns = l_train(rows), lengths(rows, "nonoverlap")
    header = ["run", "method"] + [f"ppl({label(n, L)})" for n in ns] + [f"{label(ns[-1], L)}/{label(ns[0], L)}"]
    cells = {}
    for r in rows:
        method = r["extend"] if r.get("extend", "none") not in ("", "none") else interp_name(r)
        cells.setdefault((r["run"], method), {})[int(r["Lvalid"])] = float(r["ppl"])
    body = [[run, method] + [ppl(c, n) for n in ns] + [f"**{ratio(c, ns[-1], ns[0])}**"]
            for (run, method), c in cells.items()]
    return table(header, body, ["---", "---"] + ["---:"] * (len(header) - 2))


def adapt_plan(folder):
    """Each run of an extend-then-adapt scenario (its scenario.toml): the source it was adapted from (itself
    for a source), its interpolation, fine-tuning steps and tokens."""
    import tomllib
    with open(os.path.join(RESULTS, folder, "scenario.toml"), "rb") as f:
        scenario = tomllib.load(f)
    train = scenario["train"]
    plan = {}
    for v in scenario["variant"]:
        if "init" in v:
            steps, batch = v.get("steps", train["steps"]), v.get("batch", train["batch"])
            plan[v["name"]] = {"source": v["init"], "interp": v.get("interp", "none"), "steps": steps,
                               "tokens": steps * batch * v["L"]}
        else:
            plan[v["name"]] = {"source": v["name"], "interp": None, "steps": 0, "tokens": 0}
    return plan


ADAPT_METHOD = {"none": "none", "linear": "linear (PI; ALiBi: slopes / a)", "ntk": "ntk", "yarn": "yarn"}


def adapt_perplexity(folder, mode):
    """YaRN Table 1's shape: one row per source, interpolation and fine-tuning steps (0 = the source with the
    interpolation at inference), perplexity at every Lvalid, and the change at the source's L against the source
    as trained."""
    plan = adapt_plan(folder)
    rows = [r for r in load(f"{folder}/results.csv") if r["mode"] == mode and r.get("task", "") in ("", "perplexity")]
    ns = lengths(rows, mode)
    cells = {}
    for r in rows:
        p = plan[r["run"]]
        interp = p["interp"] if p["interp"] is not None else r["interp"]
        key = (p["source"], interp, p["steps"], p["tokens"], int(r["L_train"]))
        cells.setdefault(key, {})[int(r["Lvalid"])] = float(r["ppl"])
    L = min(k[4] for k in cells)
    header = ["source", "interpolation (a = 4)", "fine-tuning steps", "tokens", "L_train"] + \
        [f"ppl({label(n, L)})" for n in ns] + [f"at L vs source"]
    order = sorted(cells, key=lambda k: (k[0], list(ADAPT_METHOD).index(k[1]), k[2]))
    body = []
    for key in order:
        source, interp, steps, tokens, trained = key
        c, base = cells[key], cells.get((source, "none", 0, 0, L), {})
        body.append([source, ADAPT_METHOD[interp], str(steps), f"{tokens:,}", str(trained)] +
                    [ppl(c, n) for n in ns] + [cost(c, base, L)])
    return table(header, body, ["---"] * 2 + ["---:"] * (len(header) - 2))


def adapt_passkey(folder):
    """Passkey accuracy (every depth's trials pooled / the worst depth, %) per source, interpolation and
    fine-tuning steps."""
    plan = adapt_plan(folder)
    rows = [r for r in load(f"{folder}/results.csv") if r.get("task") == "passkey"]
    ns = sorted({int(r["Lvalid"]) for r in rows})
    cells = {}
    for r in rows:
        p = plan[r["run"]]
        interp = p["interp"] if p["interp"] is not None else r["interp"]
        c = cells.setdefault((p["source"], interp, p["steps"], p["tokens"]), {}).setdefault(int(r["Lvalid"]),
                                                                                           [0, 0, 1.0])
        c[0] += int(r["correct"])
        c[1] += int(r["trials"])
        c[2] = min(c[2], float(r["accuracy"]))
    L = min(int(r["L_train"]) for r in rows)
    body = []
    for key in sorted(cells, key=lambda k: (k[0], list(ADAPT_METHOD).index(k[1]), k[2])):
        c = cells[key]
        body.append([key[0], ADAPT_METHOD[key[1]], str(key[2]), f"{key[3]:,}"] +
                    [f"{100 * c[n][0] / c[n][1]:.0f} / {100 * c[n][2]:.0f}" if n in c else "-" for n in ns])
    header = ["source", "interpolation (a = 4)", "fine-tuning steps", "tokens"] + [f"{label(n, L)} ({n})" for n in ns]
    return table(header, body, ["---"] * 2 + ["---:"] * (len(header) - 2))


def extend_cost():
    """bench/extend_cost.py: microseconds per scored token of each context extension at every Lvalid."""
    rows = load("extend_cost.csv")
    L = int(rows[0]["L_train"])
    ns = sorted({int(r["Lvalid"]) for r in rows})
    cells = {(r["extend"], int(r["Lvalid"])): r["us_per_token"] for r in rows}
    names = list(dict.fromkeys(r["extend"] for r in rows))
    return table(["extend"] + [f"{label(n, L)} ({n})" for n in ns],
                 [[e] + [cells.get((e, n), "-") for n in ns] for e in names])


def corpus_scale():
    """bench/corpus_scale.py: load time and peak memory per corpus and phase."""
    rows = load("corpus_scale.csv")
    return table(["corpus", "train tokens", "phase", "processes", "seconds", "peak RSS, largest process (MiB)",
                  "peak PSS, all processes (MiB)", "peak anonymous, all processes (MiB)"],
                 [[r["corpus"], f"{int(r['train_tokens']):,}", r["phase"], r["ranks"], r["seconds"],
                   r["peak_rss_mib"], r["peak_pss_mib"], r["peak_anon_mib"]] for r in rows],
                 ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:"])


def train_memory():
    """bench/train_memory.sh: peak RSS of `xtrap train --steps 1 --batch 1` at L, 4L and 16L, one
    column per code measured (in the CSV's order), beside the size of one (H, T, T) float32 tensor."""
    rows = load("train_memory.csv")
    codes = list(dict.fromkeys(r["code"] for r in rows))
    cells = {(r["code"], r["pos"], int(r["length"])): r for r in rows}
    keys = {(r["pos"], int(r["length"])): r for r in rows}  # (position, length) in the CSV's order
    body = [[pos, f"{label(n, int(r['L']))} = {n}"] +
            [cells[(c, pos, n)]["peak_rss_mib"] if (c, pos, n) in cells else "-" for c in codes] +
            [r["htt_float32_mib"]] for (pos, n), r in keys.items()]
    return table(["position", "length"] + [f"peak RSS, {c} (MiB)" for c in codes] +
                 ["one (H, T, T) float32 tensor (MiB)"], body, ["---", "---"] + ["---:"] * (len(codes) + 1))


def recipe_csv_rows(suffix):
    """The rows of every bench/retrieval_recipes.py CSV (retrieval_recipes*{suffix}), as written."""
    return [r for name in sorted(os.listdir(RESULTS))
            if name.startswith("retrieval_recipes") and name.endswith(suffix)
            and (suffix != ".csv" or not name.endswith("_at_L.csv")) for r in load(name)]


def retrieves_at_every_depth(accuracies, depth_count):
    """The retrieval recipes' criterion: a cell at every depth, each at least 90%."""
    return len(accuracies) == depth_count and min(accuracies) >= 0.9


def recipe_rows(suffix):
    """recipe_csv_rows(suffix), each row's method labelled with its steps, and its seed,
    initialisation seed and task loss where they are not the defaults."""
    rows = recipe_csv_rows(suffix)
    for r in rows:
        r["method"] += (f", {r['steps']} steps" + ("" if r["seed"] == "1" else f", seed {r['seed']}") +
                        (f", init seed {r['init_seed']}" if r.get("init_seed") else "") +
                        ("" if r["task_loss"] == "all" else f", {r['task_loss']} loss"))
    return rows


def recipe_grid(suffix, column, kind):
    """recipe_rows(suffix) as a grid: the sorted values of `column` (read by `kind`), and for each
    method, task mix and task trained, in the CSVs' order, its row at each of them (None where absent)."""
    rows = recipe_rows(suffix)
    columns = sorted({kind(r[column]) for r in rows})
    cell = {(r["method"], r["mix"], r["task"], kind(r[column])): r for r in rows}
    recipes = dict.fromkeys((r["method"], r["mix"]) for r in rows)
    tasks = dict.fromkeys(r["task"] for r in rows)
    return columns, [(m, mix, t, [cell.get((m, mix, t, c)) for c in columns]) for m, mix in recipes for t in tasks
                     if any((m, mix, t, c) in cell for c in columns)]


def retrieval_recipes_curves():
    """bench/retrieval_recipes.py: each method's task probe (32 prompts at L) over training."""
    steps, grid = recipe_grid(".csv", "step", int)
    # Every validation to step 3,000, then every 1,500 (the 12,000-step runs would need 24 columns).
    keep = [i for i, s in enumerate(steps) if s <= 3000 or s % 1500 == 0]
    steps = [steps[i] for i in keep]
    grid = [(m, mix, t, [cells[i] for i in keep]) for m, mix, t, cells in grid]
    out = ["| method | task mix | task | " + " | ".join(f"step {s}" for s in steps) + " |",
           "|---|---|---|" + "---:|" * len(steps)]
    for m, mix, t, cells in grid:
        vals = [f"{100 * float(r['accuracy']):.0f}% ({float(r['answer_logprob']):.2f})" if r else "-" for r in cells]
        out.append(f"| {m} | {mix} | {t} | " + " | ".join(vals) + " |")
    return "\n".join(out) + "\n"


def retrieval_recipes_at_l():
    """bench/retrieval_recipes.py: accuracy at L by depth (40 trials a cell) of each finished run."""
    depths, grid = recipe_grid("_at_L.csv", "depth", float)
    out = ["| method | task mix | task | " + " | ".join(f"depth {d:g}%" for d in depths) +
           " | lowest | 90% at every depth |", "|---|---|---|" + "---:|" * len(depths) + "---:|---|"]
    for m, mix, t, cells in grid:
        accs = [float(c["accuracy"]) for c in cells if c]
        if not accs:
            continue
        vals = [f"{100 * float(c['accuracy']):.0f}%" if c else "-" for c in cells]
        low = min(accs)
        out.append(f"| {m} | {mix} | {t} | " + " | ".join(vals) +
                   f" | {100 * low:.0f}% | {'yes' if retrieves_at_every_depth(accs, len(depths)) else 'no'} |")
    return "\n".join(out) + "\n"


def retrieval_recipes_seeds():
    """bench/retrieval_recipes.py at L: for each method, task and recipe (task mix, steps, task loss),
    how many of the seeds tried reach 90% at every depth, and each seed's lowest cell."""
    rows = recipe_csv_rows("_at_L.csv")
    depths = {r["depth"] for r in rows}
    lowest = {}  # (method, task, mix, steps, task loss) -> {seed label: [accuracy at each depth]}
    for r in rows:
        recipe = (r["method"], r["task"], r["mix"], int(r["steps"]), r["task_loss"])
        seed = r["seed"] + (f" (init {r['init_seed']})" if r.get("init_seed") else "")
        lowest.setdefault(recipe, {}).setdefault(seed, []).append(float(r["accuracy"]))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))  # passkey first, as the CSVs write them
    out = ["| method | task | task mix | steps | task loss | seeds | 90% at every depth | lowest cell by seed |",
           "|---|---|---|---:|---|---:|---:|---|"]
    for recipe in sorted(lowest, key=lambda k: (methods.index(k[0]), tasks.index(k[1]), k[3], k[2], k[4])):
        seeds = lowest[recipe]
        reached = sum(retrieves_at_every_depth(a, len(depths)) for a in seeds.values())
        by_seed = ", ".join(f"seed {s}: {100 * min(a):.0f}%" for s, a in sorted(seeds.items()))
        m, t, mix, steps, loss = recipe
        out.append(f"| {m} | {t} | {mix} | {steps} | {loss} | {len(seeds)} | {reached} | {by_seed} |")
    return "\n".join(out) + "\n"


def encoder_reference():
    """xtrap's masked-token NLL against the float64 references of tests/encoder_check.py."""
    rows = load("encoder_reference.csv")
    out = ["| checkpoint | family | heads | length | stored as | masked tokens | max abs dNLL | max abs dlogit |",
           "|---|---|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['checkpoint']} | {r['family']} | {r['heads']} | {r['length']} | {r['stored_as']} | "
                   f"{r['masked_tokens']} | {float(r['max_abs_dnll']):.2e} | {float(r['max_abs_dlogit']):.2e} |")
    worst = max(float(r["max_abs_dnll"]) for r in rows)
    out.append("")
    out.append(f"Largest difference: {worst:.2e} (bound 1e-5).")
    return "\n".join(out) + "\n"


def rotary_reference():
    """xtrap's per-token NLL against the float64 references of tests/rotary_check.py."""
    rows = load("rotary_reference.csv")
    out = ["| family | checkpoint | length | computed in | max abs dNLL |", "|---|---|---:|---|---:|"]
    for r in rows:
        out.append(f"| {r['family']} | {r['scaling']} | {r['length']} | {r['dtype']} | {float(r['max_abs_dnll']):.2e} |")
    worst32 = max(float(r["max_abs_dnll"]) for r in rows if r["dtype"] == "float32")
    out.append("")
    out.append(f"Largest float32 difference: {worst32:.2e} (bound 1e-5).")
    return "\n".join(out) + "\n"


def rotary_cpu():
    """bench/rotary_cpu.py's medians from every rotary_cpu*.csv: tokens/s of each tool by model and
    length, xtrap over llama.cpp, xtrap's share of the machine's matmul rate, its peak RSS against
    the formula."""
    rows = [r for name in sorted(os.listdir(RESULTS)) if name.startswith("rotary_cpu") and name.endswith(".csv")
            and not name.endswith("_runs.csv") and "ubatch" not in name for r in load(name)]
    cells = {}
    for r in rows:
        cells.setdefault((r["model"], r["dtype"], int(r["length"])), {})[r["tool"]] = r
    out = ["| model | dtype | L | xtrap tok/s | eager tok/s | llama.cpp tok/s | xtrap / llama.cpp | xtrap of matmul "
           "| xtrap RSS MB | formula MB | reps |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = {"smollm2-135m": 0, "qwen2.5-0.5b": 1, "tinyllama-1.1b": 2}
    for (model, dtype, L), tools in sorted(cells.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1], kv[0][2])):
        x, e, c = tools.get("xtrap"), tools.get("eager"), tools.get("llama.cpp")
        rate = lambda t: f"{float(t['tokens_per_s']):.1f}" if t and t["tokens_per_s"] else "-"
        ratio = f"{float(x['tokens_per_s']) / float(c['tokens_per_s']):.2f}" if x and c else "-"
        share = f"{100 * float(x['of_matmul']):.0f}%" if x and x["of_matmul"] else "-"
        rss = f"{float(x['peak_rss_mb']):.0f}" if x else "-"
        formula = f"{float(x['rss_formula_mb']):.0f}" if x and x["rss_formula_mb"] else "-"
        reps = x["reps"] if x else "-"
        out.append(f"| {model} | {dtype} | {L} | {rate(x)} | {rate(e)} | {rate(c)} | {ratio} | {share} | {rss} | "
                   f"{formula} | {reps} |")
    return "\n".join(out) + "\n"


def rotary_cpu_ubatch():
    """llama.cpp's prompt processing with one ubatch of the whole prompt (the summary's) and with
    512-token ubatches (its default), SmolLM2-135M's shape."""
    one = {int(r["length"]): r for r in load("rotary_cpu.csv") if r["tool"] == "llama.cpp"}
    small = {int(r["length"]): r for r in load("rotary_cpu_llama_ubatch512.csv") if r["tool"] == "llama.cpp"}
    xtrap = {int(r["length"]): r for r in load("rotary_cpu.csv") if r["tool"] == "xtrap"}
    out = ["| L | llama.cpp, ubatch = L | llama.cpp, ubatch 512 | xtrap |", "|---:|---:|---:|---:|"]
    for L in sorted(set(one) & set(small)):
        out.append(f"| {L} | {float(one[L]['tokens_per_s']):.1f} | {float(small[L]['tokens_per_s']):.1f} | "
                   f"{float(xtrap[L]['tokens_per_s']):.1f} |")
    return "\n".join(out) + "\n"


TABLES = {
    "rotary-cpu/summary": rotary_cpu,
    "rotary-cpu/ubatch": rotary_cpu_ubatch,
    "rotary-reference/nll": rotary_reference,
    "encoder-reference/nll": encoder_reference,
    "retrieval-recipes/curves": retrieval_recipes_curves,
    "retrieval-recipes/at-L": retrieval_recipes_at_l,
    "retrieval-recipes/seeds": retrieval_recipes_seeds,
    "corpus_scale/memory": corpus_scale,
    "train-memory/peak": train_memory,
    "extend/cost": extend_cost,
    "extend-mini/perplexity": lambda: extend_perplexity("extend-mini"),
    "extend-mini/passkey": lambda: retrieval("extend-mini", "passkey", "repeat"),
    "adapt-mini/sliding": lambda: adapt_perplexity("adapt-mini", "sliding"),
    "adapt-mini/nonoverlap": lambda: adapt_perplexity("adapt-mini", "nonoverlap"),
    "adapt-mini/passkey": lambda: adapt_passkey("adapt-mini"),
    "methods-mini/nonoverlap": lambda: methods("nonoverlap"),
    "methods-mini/sliding": lambda: methods("sliding"),
    "distributed/scaling": lambda: distributed_scaling("distributed_scaling_h100_host.csv"),
    "distributed/scaling-dev": lambda: distributed_scaling("distributed_scaling_dev_quiet.csv"),
    "paper-table2-mini/nonoverlap": lambda: paper_table2_nonoverlap("paper-table2-mini"),
    "paper-table2-mini/sliding": lambda: paper_table2_sliding("paper-table2-mini"),
    "paper-table2-gpu/nonoverlap": lambda: paper_table2_nonoverlap("paper-table2-gpu"),
    "paper-table2-gpu/sliding": lambda: paper_table2_sliding("paper-table2-gpu"),
    "paper-table2-mini/sinusoidal-steps": paper_table2_sinusoidal_steps,
    "paper-sliding-mini/ratio": paper_sliding,
    "encoder-variants-mini/ratio": lambda: encoder_variants("encoder-variants-mini"),
    "encoder-variants-gpu/ratio": lambda: encoder_variants("encoder-variants-gpu"),
    "encoder-variants-mini/sliding": encoder_sliding,
    "interp-mini/cost": lambda: interp_cost("interp-mini"),
    "interp-gpu/cost": lambda: interp_cost("interp-gpu"),
    "quickstart/eval": quickstart_eval,
    "recipe-mini/heads": recipe_heads,
    "retrieval-mini/at-L": lambda: retrieval_at_l("retrieval-mini"),
    "retrieval-mini/passkey": lambda: retrieval("retrieval-mini", "passkey", "repeat"),
    "retrieval-mini/passkey-natural": lambda: retrieval("retrieval-mini", "passkey", "natural"),
    "retrieval-mini/niah-multikey": lambda: retrieval("retrieval-mini", "niah-multikey", "repeat"),
    "retrieval-mini/variable-tracking": lambda: retrieval("retrieval-mini", "variable-tracking", "repeat"),
    "quickstart/interp": quickstart_interp,
    "protocols/ppl": protocols_ppl,
    "protocols/kl": protocols_kl,
    "protocols/kl-position": protocols_kl_position,
    "index/studies": study_index,
    "gpu/long-eval": gpu_long_eval,
    "gpu/throughput": gpu_throughput,
    "gpu/fused-anchors": gpu_fused_anchors,
    "gpu/fused-configs": gpu_fused_configs,
    "encoder-positions/cpu": lambda: encoder_positions("encoder_positions_cpu.csv"),
    "encoder-positions/pytorch": lambda: encoder_positions("encoder_positions_pytorch.csv"),
}


def regenerate(text, path):
    def fill(m):
        if m.group(2) not in TABLES:
            sys.exit(f"{path}: unknown table '{m.group(2)}' (known: {', '.join(TABLES)})")
        return m.group(1) + TABLES[m.group(2)]() + m.group(4)

    return MARKER.sub(fill, text)


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit("usage: make_tables.py [--check]")
    stale = []
    root = os.path.dirname(RESULTS)
    pages = [os.path.join(RESULTS, n) for n in sorted(os.listdir(RESULTS)) if n.endswith(".md")]
    pages += [os.path.join(root, "README.md")]
    pages += [os.path.join(root, "docs", n) for n in sorted(os.listdir(os.path.join(root, "docs"))) if n.endswith(".md")]
    for path in pages:
        name = os.path.relpath(path, root)
        with open(path) as f:
            text = f.read()
        new = regenerate(text, path)
        if new == text:
            continue
        stale.append(name)
        if not check:
            with open(path, "w") as f:
                f.write(new)
    if check and stale:
        sys.exit(f"tables out of date with the CSVs in: {', '.join(stale)}; run /usr/bin/python3 results/make_tables.py")
    print(("stale: " if check and stale else "rewrote: " if stale else "up to date: ") + (", ".join(stale) or "all tables"))


if __name__ == "__main__":
    main()
