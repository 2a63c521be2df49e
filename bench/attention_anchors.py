"""PyTorch anchors for the fused ALiBi-family CUDA kernel, and the joined table.

Mode 1 (the GPU machine's python3, PyTorch 2.x with CUDA): time forward + backward, bf16, H=16,
D=64, q/k/v requiring grad and a random upstream gradient (torch.autograd.grad, so nothing
accumulates), CUDA events around every rep, the median of --reps after --warmup (fewer where a
method's reps take longer than --method-seconds: Flex's learned slopes), at the cases
  causal-B8-L2048, causal-B2-L8192, causal-B1-L16384           causal ALiBi (decoders): the targets
  causal-B32-L512                                              the training length, for information
  encoder-{symmetric,offset,onesided,bialibi}-B8-L2048         bidirectional encoder variants
of these methods:
  sdpa-flash           SDPA flash attention without any bias (is_causal for causal cases): the ceiling
  sdpa-cudnn-bias      SDPA cuDNN with a (1, H, L, L) bf16 bias tensor holding the variant's bias
  sdpa-efficient-bias  SDPA memory-efficient with the same bias tensor
  flex-alibi           FlexAttention (torch.compile'd) with the variant's score_mod; blocked pairs
                       (causal, one-sided heads) through a block mask, so Flex skips their tiles
  flex-learned         the same with learned slopes: a requires_grad (H) tensor captured in the
                       score_mod whose gradient is asked for too (causal, encoder-symmetric, and
                       bialibi, whose first-token bias is learned too)
Variants (as src/model/linear_bias_spec.h; d = j - i, m the paper's slopes, geometric with start
and ratio 2^(-8/H)): causal -m(i-j), future blocked; symmetric -m|i-j|; offset past -m(i-j),
future -m(j-i-0.5); one-sided: heads [0, H/2) see only the past (-m'(i-j), m' the slopes of H/2
heads), heads [H/2, H) only the future (-m'(j-i)), -inf on the other side; bialibi: symmetric, except that
every pair touching position 0 gets a per-head bias instead (here linspace(-1, 1, H)).
--cases and --methods choose some of them (bench/gpu_check.sh's ncu stage profiles one case's
sdpa-flash and flex-alibi). Every method is in try/except: an out-of-memory or an unsupported
backend becomes a row with its status and the run goes on. Peak memory is
torch.cuda.max_memory_allocated over the timed reps, counted from the inputs (q, k, v, upstream
gradient and any bias tensor) already allocated.

FLOP convention (TFLOP/s column): the forward is 4 B H L^2 D (two matmuls), the backward 2.5x the
forward, so forward + backward = 3.5 x 4 B H L^2 D; halved for causal cases and in the one-sided
encoder case (every head sees one triangle) except for its sdpa-flash row, which runs unmasked.
The same convention in bench_attention --fused-csv.

CSV columns (--out): case, B, H, L, D, causal, method, ms, tflops, peak_mib, status, fwd_ms (the
forward alone, no graph kept, timed the same way after the forward + backward: with ms, the
backward's share, as bench_attention's fused rows give it).

Mode 2 (any python3, no torch needed): --join FUSED.csv ANCHORS.csv --md OUT.md joins
build-cuda/bench_attention --fused-csv's rows (xtrap-fused-*) with these into one Markdown table
per case: ms, the forward alone (fwd_ms), TFLOP/s, peak MiB, status, and the ratio of
the fused kernel's time to each row's (the case's fixed-slope fused row, and the learned one where
measured), then the targets:
fixed causal ALiBi <= flex-alibi, >= 0.9x sdpa-flash (fixed <= flash / 0.9), learned <= 1.15x
fixed, one-sided encoder <= causal fixed at the same B, L, and memory (16k: fused runs; its
peak below the bias-tensor paths' or they fail). bench/fused_attention.sh runs everything.
"""
import argparse
import csv
import math
import statistics
import sys
import time

COLUMNS = ["case", "B", "H", "L", "D", "causal", "method", "ms", "tflops", "peak_mib", "status", "fwd_ms"]
HEADS, HEAD_DIM = 16, 64
# (B, L, causal, variant); the names match bench_attention.cpp's fusedCases().
# The target cases first, the training length last: a run cut off at its time limit loses that one.
SHAPES = [(8, 2048, True, "alibi"), (2, 8192, True, "alibi"), (1, 16384, True, "alibi"),
          (8, 2048, False, "symmetric"), (8, 2048, False, "offset"), (8, 2048, False, "onesided"),
          (8, 2048, False, "bialibi"), (32, 512, True, "alibi")]
ANCHORS = ["sdpa-flash", "sdpa-cudnn-bias", "sdpa-efficient-bias", "flex-alibi", "flex-learned"]


# The causal shapes the kernel is tuned for; the others are measured for information.
ISSUE_CAUSAL_CASES = {"causal-B8-L2048", "causal-B2-L8192", "causal-B1-L16384"}


def case_name(B, L, causal, variant):
    return f"causal-B{B}-L{L}" if causal else f"encoder-{variant}-B{B}-L{L}"


def fwd_bwd_flops(B, H, L, D, half):
    return 3.5 * 4.0 * B * H * L * L * D * (0.5 if half else 1.0)


def alibi_slopes(n):
    """Press et al.: geometric, start = ratio = 2^(-8/n); for n not a power of 2 the 2^floor(log2 n)
    slopes, then every other slope of the 2 * 2^floor(log2 n) set."""
    def pow2(k):
        start = 2.0 ** (-8.0 / k)
        return [start ** (i + 1) for i in range(k)]
    p = 2 ** int(math.floor(math.log2(n)))
    return pow2(p) if p == n else pow2(p) + pow2(2 * p)[0::2][: n - p]


def first_token_bias(variant, H):
    """bialibi's per-head bias on pairs touching position 0, or None."""
    return [-1.0 + 2.0 * h / (H - 1) for h in range(H)] if variant == "bialibi" else None


def variant_spec(variant, H):
    """(slope_past, slope_future, block_past, block_future, future_shift) per head, as makeLinearBiasSpec."""
    m = alibi_slopes(H)
    if variant == "alibi":  # causal
        return m, [0.0] * H, [False] * H, [True] * H, 0.0
    if variant in ("symmetric", "offset", "bialibi"):
        return m, m, [False] * H, [False] * H, 0.5 if variant == "offset" else 0.0
    assert variant == "onesided" and H % 2 == 0
    half, h2 = alibi_slopes(H // 2), H // 2
    past = [half[h] if h < h2 else 0.0 for h in range(H)]
    future = [0.0 if h < h2 else half[h - h2] for h in range(H)]
    return past, future, [h >= h2 for h in range(H)], [h < h2 for h in range(H)], 0.0


# ---------------------------------------------------------------------------------------------
# Mode 1: the anchors (torch imported only here, so --help and --join run without it)


def run_anchors(args):
    import torch
    import torch.nn.functional as F
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        sys.exit(f"attention_anchors.py: torch {torch.__version__} has no torch.nn.attention.sdpa_kernel "
                 "(needs PyTorch >= 2.3 with CUDA: the GPU machine's python3)")
    if not torch.cuda.is_available():
        sys.exit("attention_anchors.py: no CUDA device")
    flex_error = ""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        import torch._dynamo
        for limit in ("cache_size_limit", "recompile_limit"):  # one compile per score_mod and shape
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, 256)
        flex = torch.compile(flex_attention, dynamic=False)
    except Exception as e:  # noqa: BLE001 (recorded per row below)
        flex, flex_error = None, f"unsupported: {type(e).__name__}: {e}"
    dev = torch.device("cuda")
    torch.manual_seed(0)
    wanted = set(args.cases.split(",")) if args.cases else None
    methods = set(args.methods.split(",")) if args.methods else set(ANCHORS)
    rows = []
    # Each row is written as soon as it is measured: a command cut off at its time limit, or a
    # fault that ends the process, still leaves every finished row in the CSV.
    out = open(args.out, "w", newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    writer.writeheader()
    out.flush()

    def status_of(e):
        text = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        return "oom" if "out of memory" in text.lower() else "error: " + text

    def bias_tensor(L, spec, first):
        """(1, H, L, L) bf16, -inf where blocked, first[h] on row and column 0 when given; built one
        head at a time (no H x L^2 float32)."""
        past, future, bpast, bfuture, shift = spec
        H = len(past)
        idx = torch.arange(L, device=dev, dtype=torch.float32)
        d = idx[None, :] - idx[:, None]  # j - i
        pd, fd = (-d).clamp_min(0.0), (d - shift).clamp_min(0.0)
        out = torch.empty(1, H, L, L, device=dev, dtype=torch.bfloat16)
        for h in range(H):
            b = -(past[h] * pd + future[h] * fd)
            if bpast[h]:
                b.masked_fill_(d < 0, float("-inf"))
            if bfuture[h]:
                b.masked_fill_(d > 0, float("-inf"))
            if first is not None:
                b[0, :] = first[h]
                b[:, 0] = first[h]
            out[0, h].copy_(b)
            del b
        del d, pd, fd, idx
        return out

    def score_mod_for(variant, past, future, shift, first):
        if variant == "alibi":
            def mod(score, b, h, q_idx, kv_idx):
                return score - past[h] * (q_idx - kv_idx)
        elif variant == "bialibi":
            def mod(score, b, h, q_idx, kv_idx):
                d = kv_idx - q_idx
                distance = torch.where(d > 0, score - future[h] * d, score + past[h] * d)
                return torch.where((q_idx == 0) | (kv_idx == 0), score + first[h], distance)
        else:
            def mod(score, b, h, q_idx, kv_idx):
                d = kv_idx - q_idx
                return torch.where(d > 0, score - future[h] * (d - shift), score + past[h] * d)
        return mod

    def block_mask_for(variant, H, L):
        if variant == "alibi":
            return create_block_mask(lambda b, h, q, kv: q >= kv, None, None, L, L, device=dev)
        if variant == "onesided":
            h2 = H // 2
            return create_block_mask(lambda b, h, q, kv: torch.where(h < h2, q >= kv, kv >= q), None, H, L, L,
                                     device=dev)
        return None

    for B, L, causal, variant in SHAPES:
        name = case_name(B, L, causal, variant)
        if wanted and name not in wanted:
            continue
        H, D = HEADS, HEAD_DIM
        spec = variant_spec(variant, H)
        first = first_token_bias(variant, H)

        def median_ms(work, what):
            """Median ms of work() over --reps after --warmup, CUDA events around each rep. A slow
            method (Flex's learned slopes: seconds a rep at 8k) gets fewer reps: warmup and timed
            reps each stop once they have taken --method-seconds, after 1 and 3 reps."""
            begun = time.monotonic()
            for _ in range(args.warmup):
                work()
                torch.cuda.synchronize()
                if time.monotonic() - begun > args.method_seconds:
                    break
            events = []
            begun = time.monotonic()
            for i in range(args.reps):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                work()
                stop.record()
                events.append((start, stop))
                if i >= 2 and time.monotonic() - begun > args.method_seconds:
                    break
            torch.cuda.synchronize()
            if len(events) < args.reps:
                print(f"# {name} {what}: {len(events)} reps (--method-seconds {args.method_seconds})", flush=True)
            return statistics.median(s.elapsed_time(e) for s, e in events)

        def measure(method, make_step):
            """make_step() -> (step, forward, extra inputs kept alive): step is forward + backward,
            forward the attention alone; one CSV row, never raises. Nothing for a method that
            --methods leaves out."""
            if method not in methods:
                return
            # Work done: a triangle for causal cases and for the masked one-sided methods.
            flops = fwd_bwd_flops(B, H, L, D, causal or (variant == "onesided" and method != "sdpa-flash"))
            row = dict(case=name, B=B, H=H, L=L, D=D, causal=int(causal), method=method,
                       ms="", tflops="", peak_mib="", status="ok", fwd_ms="")
            state = None
            try:
                state = make_step()
                step, forward = state[0], state[1]
                torch.cuda.reset_peak_memory_stats()
                ms = median_ms(step, method)
                row.update(ms=f"{ms:.4f}", tflops=f"{flops / (ms * 1e-3) / 1e12:.2f}",
                           peak_mib=f"{torch.cuda.max_memory_allocated() / 2**20:.1f}")
                with torch.no_grad():
                    row["fwd_ms"] = f"{median_ms(forward, method + ' forward'):.4f}"
            except Exception as e:  # noqa: BLE001 (an anchor's failure is a result)
                row["status"] = status_of(e)
            del state
            try:  # an asynchronous fault of the step surfaces here: it is this row's result
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001
                row.update(ms="", tflops="", peak_mib="", fwd_ms="", status=status_of(e))
            print(",".join(str(row[c]) for c in COLUMNS), flush=True)
            writer.writerow(row)
            out.flush()
            rows.append(row)

        q, k, v = (torch.randn(B, H, L, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        dout = torch.randn(B, H, L, D, device=dev, dtype=torch.bfloat16)

        def sdpa_step(backend, with_bias):
            def make():
                bias = bias_tensor(L, spec, first) if with_bias else None

                def forward():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                                              is_causal=causal and bias is None)

                def step():
                    torch.autograd.grad(forward(), (q, k, v), dout)
                return step, forward, bias
            return make

        measure("sdpa-flash", sdpa_step(SDPBackend.FLASH_ATTENTION, False))
        measure("sdpa-cudnn-bias", sdpa_step(SDPBackend.CUDNN_ATTENTION, True))
        measure("sdpa-efficient-bias", sdpa_step(SDPBackend.EFFICIENT_ATTENTION, True))

        def flex_step(learned):
            def make():
                if flex is None:
                    raise RuntimeError(flex_error)
                past, future, _, _, shift = spec
                p = torch.tensor(past, device=dev, dtype=torch.float32, requires_grad=learned)
                f = torch.tensor(future, device=dev, dtype=torch.float32, requires_grad=learned)
                t = torch.tensor(first, device=dev, dtype=torch.float32, requires_grad=learned) if first else None
                mod = score_mod_for(variant, p, f, shift, t)
                mask = block_mask_for(variant, H, L)
                params = (p,) if variant == "alibi" else (p, f) if t is None else (p, f, t)
                inputs = (q, k, v) + (params if learned else ())

                def forward():
                    return flex(q, k, v, score_mod=mod, block_mask=mask)

                def step():
                    torch.autograd.grad(forward(), inputs, dout)
                return step, forward, p, f, t, mask
            return make

        measure("flex-alibi", flex_step(False))
        if variant in ("alibi", "symmetric", "bialibi"):
            measure("flex-learned", flex_step(True))
        del q, k, v, dout
        torch.cuda.empty_cache()

    out.close()
    print(f"wrote {len(rows)} rows to {args.out} (torch {torch.__version__}, {torch.cuda.get_device_name()})")


# ---------------------------------------------------------------------------------------------
# Mode 2: the join


def read_rows(path):
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh)]


def ms_of(row):
    """The row's time, or None when it did not run."""
    if row is None or row.get("status", "ok") != "ok" or not row.get("ms"):
        return None
    return float(row["ms"])


def primary_method(case):
    """The fused row that the case's targets are about: fixed slopes, or the encoder's variant."""
    return "xtrap-fused-fixed" if case.startswith("causal-") else "xtrap-fused-" + case.split("-")[1]


def check(ok, text):
    return ("n.a." if ok is None else "PASS" if ok else "FAIL") + " " + text


# The fused rows of the AtomicDq backward end in ATOMIC, those with the warpgroup MMA's tile products
# in WGMMA, both in both (bench_attention --fused-backward); the two-pass rows with mma.sync in none.
ATOMIC, WGMMA = "-atomic", "-wgmma"
SCHEMES = ("", ATOMIC, WGMMA, ATOMIC + WGMMA)


def base_method(m):
    """The method without its configuration's suffixes."""
    return m.removesuffix(WGMMA).removesuffix(ATOMIC)


def case_targets(c, methods, by_case, scheme):
    """The kernel's targets for case c, as table rows, with the fused rows of one backward scheme
    (one of SCHEMES)."""
    prim = primary_method(c) + scheme
    learned = "xtrap-fused-learned" + scheme
    prim_ms, learned_ms = ms_of(methods.get(prim)), ms_of(methods.get(learned))
    first = next(iter(methods.values()))
    targets = []

    def vs(anchor, factor=1.0):
        a = ms_of(methods.get(anchor))
        return None if prim_ms is None or a is None else prim_ms <= a / factor

    info = ("" if c in ISSUE_CAUSAL_CASES else
            " (encoder: for information, the kernel's target is causal)" if not c.startswith("causal-") else
            " (training length: for information, the kernel's targets are at L 2048 to 16384)")
    targets.append(f"| {c} | {check(vs('flex-alibi'), f'{prim} <= flex-alibi{info}')} |")
    targets.append(f"| {c} | {check(vs('sdpa-flash', 0.9), f'{prim} >= 0.9x sdpa-flash (time <= flash / 0.9){info}')} |")
    if learned in methods or c.startswith("causal-") or "-symmetric-" in c:
        ok = None if prim_ms is None or learned_ms is None else learned_ms <= 1.15 * prim_ms
        targets.append(f"| {c} | {check(ok, f'{learned} <= 1.15x {prim}')} |")
    if "-onesided-" in c:
        causal_case = "causal-" + c.split("-", 2)[2]  # same B and L
        causal_fixed = "xtrap-fused-fixed" + scheme
        causal_ms = ms_of(by_case.get(causal_case, {}).get(causal_fixed))
        ok = None if prim_ms is None or causal_ms is None else prim_ms <= causal_ms
        targets.append(f"| {c} | {check(ok, f'{prim} <= {causal_case} {causal_fixed}')} |")
        # The same on every open pair (the dense rows): the heads' cost apart from how many pairs
        # their slopes let the kernel skip.
        dense, causal_dense = "xtrap-fused-onesided-dense" + scheme, "xtrap-fused-fixed-dense" + scheme
        dense_ms = ms_of(methods.get(dense))
        causal_dense_ms = ms_of(by_case.get(causal_case, {}).get(causal_dense))
        if dense in methods:
            ok = None if dense_ms is None or causal_dense_ms is None else dense_ms <= causal_dense_ms
            targets.append(f"| {c} | {check(ok, f'{dense} <= {causal_case} {causal_dense} (every open pair)')} |")
    if first["L"] == "16384":
        fused = methods.get(prim)
        ok = None
        if fused is not None:
            ok = fused.get("status") == "ok"
            for anchor in ("sdpa-cudnn-bias", "sdpa-efficient-bias"):
                a = methods.get(anchor)
                if ok and a is not None and a.get("status") == "ok" and a.get("peak_mib"):
                    ok = float(fused["peak_mib"]) < float(a["peak_mib"])
        targets.append(f"| {c} | {check(ok, f'{prim} runs at 16k, peak below the bias-tensor paths (or they fail)')} |")
    return targets


def join(fused_csv, anchors_csv, md_path):
    # CSVs from before the one-pass backward was removed (results/gpu/) also hold its rows, methods
    # ending in -onepass, and a fwd16_ms column: both are left out.
    fused_rows = [r for r in read_rows(fused_csv) if not r["method"].endswith("-onepass")]
    rows = fused_rows + read_rows(anchors_csv)
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
    by_case = {c: {r["method"]: r for r in rows if r["case"] == c} for c in cases}
    # Fused rows first, then the anchors in their usual order, then anything else.
    order = ["xtrap-fused-fixed", "xtrap-fused-fixed-dense", "xtrap-fused-symmetric", "xtrap-fused-offset",
             "xtrap-fused-onesided", "xtrap-fused-onesided-dense", "xtrap-fused-bialibi", "xtrap-fused-learned"] + ANCHORS
    rank = {m: i for i, m in enumerate(order)}
    out = ["# Fused ALiBi-family attention vs PyTorch anchors", "",
           "bf16 forward + backward, H=16, D=64; median ms over the reps (CUDA events). TFLOP/s: "
           "forward 4BHL^2D, backward 2.5x, halved for causal and one-sided (not the one-sided case's "
           "unmasked sdpa-flash). Forward ms: the forward alone (no graph kept). Ratios: the fused "
           "kernel's time / this row's time (< 1: the fused kernel is faster). Methods ending in `-atomic`: the "
           "same kernel with its AtomicDq backward (the others: two-pass); in `-wgmma`: with every tile product "
           "(forward and backward) by Hopper's warpgroup MMA (the others: mma.sync). The fused kernel skips the tile pairs "
           "whose every probability is below 2^-136 (far from the diagonal, ALiBi's bias makes them underflow); "
           "`xtrap-fused-fixed-dense` is the same kernel computing every open pair. TFLOP/s count the same work "
           "for every row of a case, skipped pairs included.", ""]
    targets = []

    def fmt(x, spec):
        return "" if x is None else format(x, spec)

    for c in cases:
        methods = by_case[c]
        prim = primary_method(c)
        prim_ms, learned_ms = ms_of(methods.get(prim)), ms_of(methods.get("xtrap-fused-learned"))
        first = next(iter(methods.values()))
        out += [f"## {c} (B={first['B']}, H={first['H']}, L={first['L']}, D={first['D']}, "
                f"{'causal' if first['causal'] == '1' else 'bidirectional'})", "",
                f"| method | ms | forward ms | TFLOP/s | peak MiB | status | {prim} / this | xtrap-fused-learned / this |",
                "|---|---:|---:|---:|---:|---|---:|---:|"]
        for m in sorted(methods, key=lambda m: (rank.get(base_method(m), len(order)), m)):
            r, t = methods[m], ms_of(methods[m])
            ratio = fmt(prim_ms / t, ".3f") if prim_ms and t else ""
            lratio = fmt(learned_ms / t, ".3f") if learned_ms and t else ""
            out.append(f"| {m} | {r['ms']} | {r.get('fwd_ms') or ''} | {r['tflops']} | {r['peak_mib']} | {r['status']} "
                       f"| {ratio} | {lratio} |")
        out.append("")
        # The targets, for each backward scheme that was measured (bench_attention --fused-backward).
        for scheme in SCHEMES:
            if prim + scheme in methods:
                targets += case_targets(c, methods, by_case, scheme)
    out += ["## Targets", "", "| case | check |", "|---|---|"] + targets + [""]
    with open(md_path, "w") as fh:
        fh.write("\n".join(out))
    fails = sum("| FAIL" in t for t in targets)
    print(f"wrote {md_path}: {len(cases)} cases, {sum('| PASS' in t for t in targets)} PASS, {fails} FAIL, "
          f"{sum('| n.a.' in t for t in targets)} n.a.")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="CSV of the anchors' rows (mode 1)")
    ap.add_argument("--reps", type=int, default=20, help="timed reps per method (median)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed reps first (compiles Flex)")
    ap.add_argument("--method-seconds", type=float, default=8.0,
                    help="a method's warmup, and its timed reps, stop after this long (at least 1 and 3 reps)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--methods", default="", help="comma-separated anchors (default: all): " + ", ".join(ANCHORS))
    ap.add_argument("--join", nargs=2, metavar=("FUSED_CSV", "ANCHORS_CSV"), help="mode 2: join two CSVs")
    ap.add_argument("--md", help="Markdown output of --join")
    args = ap.parse_args(argv)
    if args.join:
        if not args.md:
            ap.error("--join needs --md")
        return join(args.join[0], args.join[1], args.md)
    if not args.out:
        ap.error("--out (or --join) is required")
    known_cases = [case_name(*shape) for shape in SHAPES]
    for given, known, what in ((args.cases, known_cases, "case"), (args.methods, ANCHORS, "method")):
        unknown = [x for x in given.split(",") if given and x not in known]
        if unknown:
            ap.error(f"no {what} {unknown[0]!r} (known: {', '.join(known)})")
    run_anchors(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
