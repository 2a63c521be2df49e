"""Throughput of xtrap against the PyTorch eager baseline (bench/baseline.py), in one invocation.

For each model size: xtrap training, baseline training, xtrap eval forward and baseline eval
forward, alternating, --reps times; then median tokens/s and the xtrap / baseline ratio. Also a
square matmul (LibTorch's sgemm through torch.mm, the same OpenBLAS kernels xtrap uses) as the
peak that model FLOPs utilisation (MFU) is quoted against, and with --positions the training
throughput of every position method relative to `none`.

Training tok/s counts only steps after --warmup (from train.jsonl's elapsed_s, logged every
step); eval tok/s is what `xtrap eval` reports per row. Run from the repository root:
  /usr/bin/python3 bench/compare.py --xtrap build/xtrap --reps 3

--suite methods (the default with --device cuda): training only, one model
(--models, default large: 6 layers, d=512, 8 heads, FFN 2048), L=512, 32 sequences a step, the
tied full softmax, for the decoders alibi, none and rotary and the encoder alibi-offset with the
CLAP head (--methods; also alibi-encoder, alibi-learned and bialibi: encoders with the fused
kernel, eager building their learned bias every forward). xtrap (`--device D --dtype T`) and the
eager baseline (bench/baseline.py with the same --device and --dtype: SDPA, autocast, fused AdamW on CUDA) alternate, the first of
the pair swapping every rep, --reps times; before each rep a square matmul in --dtype on --device
(baseline.py --mode matmul: 8192^3 bf16 torch.mm timed with CUDA events) is the peak for MFU.
Model FLOPs are xtrap's count (src/model/flops.cpp; train.jsonl's flop_per_s / tok_per_s), the
same for both. Writes OUT/<gpu|cpu>_throughput.{md,csv,json} and _runs.csv (one row per run);
--profile short|all then profiles the methods where xtrap is below eager (or all): torch.profiler
over a few eager steps, and nsys over xtrap where nsys is on PATH, else Nsight Compute's per-kernel
times of --profile-steps xtrap steps (ncu_xtrap). On the GPU machine:
  python3 bench/compare.py --device cuda --out-dir OUTDIR --profile short
(--python: the interpreter with CUDA torch, default python3 for cuda, /usr/bin/python3 for cpu.)

torch.compile: every training row also measures the eager model under
torch.compile (baseline.py --compile MODE) in each of --compile-modes (default on cuda: default,
max-autotune-no-cudagraphs and reduce-overhead; on cpu: default), in the same alternation as xtrap
and eager (the order rotates every rep). The "compiled" columns are the fastest mode's median, its
name and its compile time (the first step's wall time, compilation included; never in tok/s).
Where the interpreter's torch has no torch.compile (Debian's 1.13), the columns say unavailable
and why, and the rest of the table is measured as before.

xtrap trains with its default --cuda-graph auto (on a GPU the step is captured as one CUDA graph
where the model allows it: src/train/device_step.h; the "xtrap step" column says captured or
host) and logs only at step --warmup and at the end, so the timed steps add no host reads.
--xtrap-variants adds variants of xtrap to the rotation (XTRAP_VARIANTS): off (--cuda-graph off,
the host-read step), unfused (--unfused-elementwise: LibTorch's operators for the residual adds
with their LayerNorms, the activation and the embedding's dropout, the fused kernels' "before"),
before (both: the step as it was before the captured step and the fused elementwise kernels),
dp-outside and dp-inside (a data-parallel job of one rank, the torchrun environment with rank 0
hosting the store, its all-reduce outside or inside the step's CUDA graphs: --graph-allreduce).
--profile-variants NAMES profiles those variants of xtrap too, beside plain xtrap, wherever
--profile profiles a method: "--profile all --profile-variants before" gives the profiles of one
step before and after.
"""
import argparse
import csv
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CPU_PY = "/usr/bin/python3"  # Debian's interpreter: python3-torch, the same LibTorch 1.13 kernels
GPU_PY = "python3"  # the GPU machine's: its PyTorch wheel holds the LibTorch build-cuda/xtrap links
MODELS = {
    "tiny": dict(layers=2, d_model=64, heads=4, ffn=128),  # smoke tests of this script
    "small": dict(layers=4, d_model=128, heads=8, ffn=512),  # the quickstart model
    "large": dict(layers=6, d_model=512, heads=8, ffn=2048),
}
# --suite methods: label -> (arch, pos, head)
METHODS = {
    "alibi": ("decoder", "alibi", "lm"),
    "none": ("decoder", "none", "lm"),
    "rotary": ("decoder", "rotary", "lm"),
    "alibi-offset+clap": ("encoder", "alibi-offset", "clap"),
    "alibi-encoder": ("encoder", "alibi", "lm"),
    "alibi-learned": ("encoder", "alibi-learned", "lm"),
    "bialibi": ("encoder", "bialibi", "lm"),
}
DEFAULT_METHODS = ["alibi", "none", "rotary", "alibi-offset+clap"]
DECODER_POSITIONS = ["none", "sinusoidal", "learned", "rotary", "t5", "alibi"]
ENCODER_POSITIONS = ["none", "alibi", "alibi-offset", "alibi-onesided", "alibi-learned", "bialibi"]


def sh(cmd, env=None, timeout=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=timeout)
    return out.stdout


def baseline_env(a):
    """xtrap re-executes itself with OMP_WAIT_POLICY=passive (src/util/omp_wait_policy.h); the
    baseline gets the same setting unless --baseline-default-omp. On CUDA the Debian libraries that
    .gpu-deps/gpu-build.sh puts on LD_LIBRARY_PATH for xtrap (/tmp/deps) are left out: the wheel's
    torch brings its own."""
    env = dict(os.environ)
    if not a.baseline_default_omp:
        env.setdefault("OMP_WAIT_POLICY", "passive")
    if a.device == "cuda" and env.get("LD_LIBRARY_PATH"):
        kept = [d for d in env["LD_LIBRARY_PATH"].split(":") if d and not d.startswith("/tmp/deps/")]
        env["LD_LIBRARY_PATH"] = ":".join(kept)
    return env


def model_flags(m):
    return ["--layers", str(m["layers"]), "--d-model", str(m["d_model"]), "--heads", str(m["heads"]),
            "--ffn", str(m["ffn"])]


def xtrap_train_cmd(a, m, pos, arch, run, steps, extra=(), log_every=1):
    """The `xtrap train` command of the comparison: `steps` steps into the run directory `run`."""
    return [a.xtrap, "train", "--out", run, "--arch", arch, "--pos", pos, *model_flags(m), "--L", str(a.L),
            "--batch", str(a.batch), "--adaptive-softmax", a.adaptive, "--threads", str(a.threads),
            "--steps", str(steps), "--warmup", "1", "--log-every", str(log_every), "--eval-every", "0",
            "--eval-tokens", "1024", "--checkpoint-every", "1000000", "--data", a.data, "--no-progress", *extra]


def xtrap_train(a, m, pos, arch, workdir, steps, warmup, extra=(), prefix=(), env=None):
    """Tokens/s and model FLOP/s over the timed steps of an `xtrap train` run. extra: more flags
    (--head, --device, --dtype, ...); prefix: a command to run it under (nsys). Logged at step
    `warmup` and at the end only (--log-every warmup): a step captured as a CUDA graph (--cuda-graph
    auto) reads the loss on the host at log lines alone, and the timed steps should not add reads."""
    run = os.path.join(workdir, f"run-{time.monotonic_ns()}")
    sh([*prefix, *xtrap_train_cmd(a, m, pos, arch, run, warmup + steps, extra, log_every=warmup)], env=env,
       timeout=a.timeout)
    lines = [json.loads(l) for l in open(os.path.join(run, "train.jsonl")) if '"elapsed_s"' in l]
    first, last = next(l for l in lines if l["step"] == warmup), lines[-1]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    tokens = last["tokens"] - first["tokens"]
    flop_per_token = last["flop_per_s"] / last["tok_per_s"]
    return tokens / seconds, flop_per_token * tokens / seconds, run


# The xtrap variants --xtrap-variants adds to the rotation (as systems "xtrap:NAME"): their flags,
# and whether they run as a data-parallel job of one rank.
XTRAP_VARIANTS = {
    "off": (["--cuda-graph", "off"], False),
    "unfused": (["--unfused-elementwise"], False),
    "before": (["--cuda-graph", "off", "--unfused-elementwise"], False),
    "dp-outside": (["--graph-allreduce", "outside"], True),
    "dp-inside": (["--graph-allreduce", "inside"], True),
}


def one_rank_job_env():
    """The torchrun environment of a job of one rank; the rank hosts the store on a free port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return dict(os.environ, WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


def xtrap_variant(variant):
    """xtrap's extra flags for `variant` (an XTRAP_VARIANTS name; "" or None: plain xtrap) and its
    environment: a one-rank job's where the variant is data parallel, else None (this process's)."""
    flags, data_parallel = XTRAP_VARIANTS[variant] if variant else ([], False)
    return flags, one_rank_job_env() if data_parallel else None


def xtrap_eval(a, run):
    out = os.path.join(run, "bench-eval.json")
    sh([a.xtrap, "eval", run, "--Lvalid", str(a.L), "--max-tokens", str(a.eval_tokens), "--batch", str(a.batch),
        "--threads", str(a.threads), "--out", out, "--no-progress"])
    row = json.load(open(out))[0]
    return row["tokens_per_s"], row["flop_per_s"]


def baseline(a, m, pos, arch, mode, steps=0, warmup=1, extra=()):
    """The JSON line of one baseline.py run (extra: more flags, e.g. --compile MODE)."""
    out = sh([a.python, os.path.join(os.path.dirname(__file__), "baseline.py"), "--mode", mode, "--arch", arch, "--pos", pos,
              *model_flags(m), "--L", str(a.L), "--batch", str(a.batch), "--adaptive-softmax", a.adaptive,
              "--threads", str(a.threads), "--steps", str(steps), "--warmup", str(warmup),
              "--eval-tokens", str(a.eval_tokens), "--data", a.data, *extra], baseline_env(a))
    return json.loads(out.strip().splitlines()[-1])


def train_steps(rows):
    """The steps xtrap's runs `rows` trained with (run.json's train_step: captured, host...), joined
    by "/"; "" for no rows."""
    return "/".join(sorted({r.get("train_step") or "?" for r in rows}))


def compile_modes(a):
    """The --compile-modes to measure, and why none is (None where they are measured)."""
    if a.compile_modes == "none":
        return [], "not measured (--compile-modes none)"
    code = "import torch; print(torch.__version__, hasattr(torch, 'compile'))"
    try:
        version, has = sh([a.python, "-c", code], baseline_env(a)).split()
    except Exception as e:  # noqa: BLE001 - an interpreter that cannot import torch fails the eager runs too
        return [], "unavailable: " + failure(e)
    if has != "True":
        return [], f"unavailable: torch {version} ({a.python}) has no torch.compile (2.0+)"
    return a.compile_modes.split(","), None


def fastest_compiled(rows):
    """From one method's compiled runs (system compiled:MODE): (median tok/s, mode, median compile s)
    of the fastest mode, or (None, None, None)."""
    by_mode = {}
    for r in rows:
        if r["system"].startswith("compiled:") and r["tok_per_s"]:
            by_mode.setdefault(r["system"].split(":", 1)[1], []).append(r)
    if not by_mode:
        return None, None, None
    mode = max(by_mode, key=lambda k: med([r["tok_per_s"] for r in by_mode[k]]))
    compile_s = [r["compile_s"] for r in by_mode[mode] if r.get("compile_s") is not None]
    return med([r["tok_per_s"] for r in by_mode[mode]]), mode, med(compile_s) if compile_s else None


def matmul_peak(a):
    code = ("import torch,time\n"
            f"torch.set_num_threads({a.threads}); torch.set_flush_denormal(True)\n"
            "n=2048; x=torch.randn(n,n); y=torch.randn(n,n); o=torch.empty(n,n); torch.mm(x,y,out=o)\n"
            "t=time.perf_counter(); [torch.mm(x,y,out=o) for _ in range(5)]\n"
            "print(5*2*n**3/(time.perf_counter()-t))\n")
    return float(sh([a.python, "-c", code], baseline_env(a)))


def med(xs):
    return statistics.median(xs)


# ---- --suite methods: xtrap and eager side by side per position method ----

def slug(label):
    """A label as a file name with only [A-Za-z0-9_.-] (alibi-offset+clap -> alibi-offset_clap)."""
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in label)


def tail(text, n=1500):
    text = (text or "").strip()
    return text[-n:]


def failure(e):
    """One short record of a failed or timed-out subprocess."""
    if isinstance(e, subprocess.TimeoutExpired):
        return f"timed out after {e.timeout} s: {tail(e.stderr if isinstance(e.stderr, str) else '')}"
    if isinstance(e, subprocess.CalledProcessError):
        return f"rc={e.returncode}: {tail(e.stderr)}"
    return f"{type(e).__name__}: {e}"


def baseline_cmd(a, m, arch, pos, head, steps, warmup, extra=()):
    cmd = [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.py"), "--mode", "train",
           "--arch", arch, "--pos", pos, "--head", head, *model_flags(m), "--L", str(a.L), "--batch", str(a.batch),
           "--threads", str(a.threads), "--steps", str(steps), "--warmup", str(warmup), "--device", a.device,
           "--dtype", a.dtype, "--lr", str(a.lr), "--dropout", str(a.dropout), "--data", a.data]
    if a.adaptive != "none":
        cmd += ["--adaptive-softmax", a.adaptive]
    return cmd + list(extra)


def baseline_json(a, cmd, timeout=None):
    """timeout: seconds (default --timeout; a compiled run gets 4 times that: compilation)."""
    out = sh(cmd, baseline_env(a), timeout=timeout or a.timeout)
    return json.loads(out.strip().splitlines()[-1])


def device_matmul(a):
    """FLOP/s of the square matmul in --dtype on --device, and the JSON line (GPU name, torch)."""
    r = baseline_json(a, [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.py"),
                          "--mode", "matmul", "--device", a.device, "--dtype", a.dtype, "--threads", str(a.threads),
                          "--matmul-n", str(a.matmul_n), "--matmul-iters", str(a.matmul_iters)])
    return r["flop_per_s"], r


def xtrap_method_flags(a, head):
    return ["--head", head, "--device", a.device, "--dtype", a.dtype, "--lr", str(a.lr), "--dropout", str(a.dropout)]


def profiled_xtrap(a, label, head, variant):
    """What the profilers run for `variant` (an XTRAP_VARIANTS name or None, plain xtrap): the
    profile's name, xtrap's flags, and its environment, with OMP_WAIT_POLICY set so that xtrap does
    not re-execute itself to set it (util/omp_wait_policy.h)."""
    flags, env = xtrap_variant(variant)
    env = dict(env or os.environ)
    env["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "passive")
    return label + (f"-{variant}" if variant else ""), xtrap_method_flags(a, head) + flags, env


def nsys_xtrap(a, m, label, arch, pos, head, work, warmup, variant=None):
    """xtrap (or its `variant`) under nsys for warmup + --profile-steps steps: kernel and CUDA API
    summaries (text)."""
    nsys = shutil.which("nsys")
    if not nsys:
        return None, "nsys not on PATH: no xtrap profile"
    label, flags, env = profiled_xtrap(a, label, head, variant)
    rep = os.path.join(work, f"nsys_xtrap_{slug(label)}")
    try:
        _, _, run = xtrap_train(a, m, pos, arch, work, a.profile_steps, warmup, flags,
                                prefix=[nsys, "profile", "--trace", "cuda,nvtx", "--sample", "none", "--cpuctxsw",
                                        "none", "--force-overwrite", "true", "--output", rep],
                                env=env)
        shutil.rmtree(run, ignore_errors=True)
        text = None
        for reports in (["cuda_gpu_kern_sum", "cuda_api_sum", "cuda_gpu_mem_time_sum"], ["gpukernsum", "cudaapisum"]):
            try:
                args = [x for r in reports for x in ("--report", r)]
                text = sh([nsys, "stats", *args, rep + ".nsys-rep"], timeout=a.timeout)
                break
            except subprocess.CalledProcessError:
                continue
        path = os.path.join(a.out_dir, f"profile_xtrap_{slug(label)}.txt")
        with open(path, "w") as f:
            f.write(f"# nsys over xtrap train ({label}): {warmup} warmup + {a.profile_steps} steps (the whole process, "
                    f"startup, end-of-run validation and checkpoint included)\n")
            f.write(text or "nsys stats gave no report\n")
        if a.keep_nsys:
            shutil.copy(rep + ".nsys-rep", a.out_dir)
        return path, None
    except Exception as e:  # noqa: BLE001 - a profile must not lose the measurements
        return None, "nsys: " + failure(e)


def kernel_name(name):
    """A kernel's name without its arguments, namespaces that say nothing, and long template tails."""
    return re.sub(r"\(.*|void |at::native::|at::|<unnamed>::|xtrap::", "", name)[:90]


def ncu_kernel_times(path):
    """{kernel: [launches, ns]} from an ncu --csv log of gpu__time_duration.sum, one row per launch."""
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's CSV, without its own messages
    times = {}
    for r in csv.DictReader(io.StringIO("".join(lines))):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        t = times.setdefault(kernel_name(r["Kernel Name"]), [0, 0.0])
        t[0] += 1
        t[1] += float(r["Metric Value"].replace(",", ""))
    return times


def ncu_xtrap(a, m, label, arch, pos, head, work, warmup, step_ms=None, variant=None):
    """Where nsys is missing (the GPU machine): Nsight Compute times every kernel launch of two xtrap
    train runs, warmup + --profile-steps steps and warmup steps (gpu__time_duration.sum; the GPU at its
    usual clocks, --clock-control none). Their difference is exactly the kernels of --profile-steps
    training steps, whatever start-up, the end-of-run validation and the checkpoint launch. Writes
    each kernel's launches and GPU time per step, largest first, and against step_ms (a plain run's
    wall time per step) the fraction of a step the GPU spends in kernels: well below 1, xtrap's host
    side (launches, synchronisations) is what holds the GPU back. `variant`: as nsys_xtrap's."""
    ncu = shutil.which("ncu")
    if not ncu:
        return None, "neither nsys nor ncu on PATH: no xtrap profile"
    label, flags, env = profiled_xtrap(a, label, head, variant)
    k = a.profile_steps
    try:
        runs = []
        for steps in (warmup + k, warmup):
            log = os.path.join(work, f"ncu_{slug(label)}_{steps}.csv")
            run = os.path.join(work, f"run-{time.monotonic_ns()}")
            sh([ncu, "--csv", "--log-file", log, "--metrics", "gpu__time_duration.sum", "--clock-control", "none",
                *xtrap_train_cmd(a, m, pos, arch, run, steps, flags)], env=env, timeout=a.timeout)
            shutil.rmtree(run, ignore_errors=True)
            runs.append(ncu_kernel_times(log))
        longer, shorter = runs
        per_step = {}
        for name, (launches, ns) in longer.items():
            less = shorter.get(name, [0, 0.0])
            if launches > less[0]:
                per_step[name] = ((launches - less[0]) / k, max(ns - less[1], 0.0) / k / 1e6)
        total = sum(ms for _, ms in per_step.values())
        path = os.path.join(a.out_dir, f"profile_xtrap_{slug(label)}.txt")
        with open(path, "w") as f:
            f.write(f"# Nsight Compute over xtrap train ({label}): the kernels of {k} training steps (a "
                    f"{warmup + k}-step run minus a {warmup}-step run), each launch timed alone at the GPU's usual "
                    f"clocks\n# {total:.2f} ms of kernel time a step, "
                    f"{sum(n for n, _ in per_step.values()):.0f} launches a step\n")
            if step_ms:
                f.write(f"# a plain run's step: {step_ms:.2f} ms of wall time; kernels {100 * total / step_ms:.0f}% "
                        f"of it\n")
            f.write(f"{'ms/step':>9} {'share':>6} {'launches/step':>13}  kernel\n")
            for name, (n, ms) in sorted(per_step.items(), key=lambda kv: -kv[1][1]):
                f.write(f"{ms:9.3f} {100 * ms / total if total else 0:5.1f}% {n:13.1f}  {name}\n")
        return path, None
    except Exception as e:  # noqa: BLE001 - a profile must not lose the measurements
        return None, "ncu: " + failure(e)


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def methods_suite(a):
    os.makedirs(a.out_dir, exist_ok=True)
    steps, warmups = a.steps, a.warmup
    labels = a.methods.split(",")
    for label in labels:
        if label not in METHODS:
            raise SystemExit(f"unknown method {label!r} (valid: {', '.join(METHODS)})")
    work = tempfile.mkdtemp(prefix="xtrap-bench-")
    runs, peaks, device_info, summaries, notes = [], [], {}, [], []
    started = time.time()
    modes, compile_note = compile_modes(a)
    if compile_note:
        notes.append(f"torch.compile: {compile_note}")
    systems = ["xtrap", *(f"xtrap:{v}" for v in a.xtrap_variants), "eager",
               *(f"compiled:{mode}" for mode in modes)]
    try:
        for name in a.models.split(","):
            m, n, w = MODELS[name], steps[name], warmups[name]
            for rep in range(a.reps):
                try:
                    peak, info = device_matmul(a)
                    peaks.append(peak)
                    device_info = info
                    print(f"rep {rep}: matmul {a.matmul_n}^3 {a.dtype} on {a.device}: {peak / 1e12:.1f} TFLOP/s",
                          file=sys.stderr, flush=True)
                except Exception as e:  # noqa: BLE001
                    notes.append(f"matmul peak, rep {rep}: {failure(e)}")
                for label in labels:
                    arch, pos, head = METHODS[label]
                    order = systems[rep % len(systems):] + systems[:rep % len(systems)]
                    for system in order:
                        row = {"model": name, "method": label, "arch": arch, "pos": pos, "head": head, "rep": rep,
                               "system": system, "tok_per_s": None, "flop_per_token": None, "error": ""}
                        compiled = system.split(":", 1)[1] if system.startswith("compiled:") else None
                        try:
                            if system.startswith("xtrap"):  # xtrap, or one of XTRAP_VARIANTS
                                variant_flags, env = xtrap_variant(system.partition(":")[2])
                                tps, fps, run = xtrap_train(a, m, pos, arch, work, n, w,
                                                            xtrap_method_flags(a, head) + variant_flags, env=env)
                                extra_info = json.load(open(os.path.join(run, "run.json")))["extra"]
                                shutil.rmtree(run, ignore_errors=True)
                                row.update(tok_per_s=tps, flop_per_token=fps / tps,
                                           train_step=extra_info.get("train_step"))
                            else:
                                extra = ["--compile", compiled] if compiled else []
                                r = baseline_json(a, baseline_cmd(a, m, arch, pos, head, n, w, extra),
                                                  timeout=a.timeout and (4 * a.timeout if compiled else a.timeout))
                                row.update(tok_per_s=r["tok_per_s"], flop_per_token=r.get("flop_per_token"),
                                           compile_s=r.get("compile_s"),
                                           attention=r.get("attention"), adamw=r.get("adamw"),
                                           host_sync=r.get("host_sync"), torch=r.get("torch"),
                                           max_memory_allocated_gib=r.get("max_memory_allocated_gib"))
                        except Exception as e:  # noqa: BLE001 - one failed run must not lose the others
                            row["error"] = failure(e)
                        runs.append(row)
                        print(f"rep {rep} {name} {label} {system}: "
                              + (f"{row['tok_per_s']:.0f} tok/s" if row["tok_per_s"] else "FAILED " + row["error"]),
                              file=sys.stderr, flush=True)

        peak = med(peaks) if peaks else None
        for name in a.models.split(","):
            for label in labels:
                arch, pos, head = METHODS[label]
                mine = [r for r in runs if r["model"] == name and r["method"] == label]
                xrows = [r for r in mine if r["system"] == "xtrap" and r["tok_per_s"]]
                x = [r["tok_per_s"] for r in xrows]
                variant_rows = {v: [r for r in mine if r["system"] == f"xtrap:{v}" and r["tok_per_s"]]
                                for v in a.xtrap_variants}
                variant_tps = {v: med([r["tok_per_s"] for r in rows]) if rows else None
                               for v, rows in variant_rows.items()}
                e = [r["tok_per_s"] for r in mine if r["system"] == "eager" and r["tok_per_s"]]
                fx = [r["flop_per_token"] for r in mine if r["system"] == "xtrap" and r["flop_per_token"]]
                fe = [r["flop_per_token"] for r in mine if r["system"] == "eager" and r["flop_per_token"]]
                fpt = med(fx) if fx else (med(fe) if fe else None)  # xtrap's count first; the same formula
                xm, em = (med(x) if x else None), (med(e) if e else None)
                cm, cmode, csec = fastest_compiled(mine)
                s = {"model": name, "method": label, "arch": arch, "pos": pos, "head": head,
                     "xtrap_tok_per_s": xm, "eager_tok_per_s": em, "ratio": xm / em if xm and em else None,
                     "xtrap_train_step": train_steps(xrows),
                     "xtrap_variant_tok_per_s": variant_tps,
                     # Each variant's median tok/s and the steps it trained with, as "name=tok/s (step)".
                     "xtrap_variants": ", ".join(f"{v}={fmt(variant_tps[v], '.0f')} ({train_steps(rows) or 'failed'})"
                                                 for v, rows in variant_rows.items()),
                     "compiled_tok_per_s": cm, "compiled_mode": cmode or compile_note or "every run failed",
                     "compile_s": csec, "ratio_compiled": xm / cm if xm and cm else None,
                     "compiled_mfu": cm * fpt / peak if cm and fpt and peak else None,
                     "compiled_runs": " ".join(f"{r['system'].split(':', 1)[1]}={r['tok_per_s']:.0f}" for r in mine
                                               if r["system"].startswith("compiled:") and r["tok_per_s"]),
                     "flop_per_token": fpt, "xtrap_flop_per_token": med(fx) if fx else None,
                     "eager_flop_per_token": med(fe) if fe else None,
                     "xtrap_mfu": xm * fpt / peak if xm and fpt and peak else None,
                     "eager_mfu": em * fpt / peak if em and fpt and peak else None,
                     "xtrap_runs": " ".join(f"{v:.0f}" for v in x), "eager_runs": " ".join(f"{v:.0f}" for v in e),
                     "failures": sum(1 for r in mine if r["error"]), "profile": ""}
                summaries.append(s)

        if a.profile != "none":
            for s in summaries:
                if a.profile == "short" and s["ratio"] is not None and s["ratio"] >= 1.0:
                    continue
                if s["xtrap_tok_per_s"] is None and s["eager_tok_per_s"] is None:
                    notes.append(f"{s['method']}: every run failed, not profiled")
                    continue
                m, w = MODELS[s["model"]], warmups[s["model"]]
                label, arch, pos, head = s["method"], s["arch"], s["pos"], s["head"]
                files = []
                path = os.path.abspath(os.path.join(a.out_dir, f"profile_eager_{slug(label)}.txt"))
                try:
                    r = baseline_json(a, baseline_cmd(a, m, arch, pos, head, 2, w,
                                                      ["--profile", path, "--profile-steps", str(a.profile_steps)]))
                    files.append(os.path.basename(path))
                    s["eager_profile"] = r.get("profile")
                except Exception as e:  # noqa: BLE001
                    notes.append(f"eager profile of {label}: {failure(e)}")
                # The eager baseline with xtrap's two host reads a step (loss, gradient norm).
                try:
                    r = baseline_json(a, baseline_cmd(a, m, arch, pos, head, steps[s["model"]], w,
                                                      ["--host-sync", "step"]))
                    s["eager_host_sync_tok_per_s"] = r["tok_per_s"]
                except Exception as e:  # noqa: BLE001
                    notes.append(f"eager --host-sync step of {label}: {failure(e)}")
                for variant in [None, *a.profile_variants] if a.device == "cuda" else []:
                    if shutil.which("nsys"):
                        path, why = nsys_xtrap(a, m, label, arch, pos, head, work, w, variant)
                    else:
                        tps = s["xtrap_variant_tok_per_s"].get(variant) if variant else s["xtrap_tok_per_s"]
                        step_ms = 1e3 * a.batch * a.L / tps if tps else None
                        path, why = ncu_xtrap(a, m, label, arch, pos, head, work, w, step_ms, variant)
                    if path:
                        files.append(os.path.basename(path))
                    if why:
                        notes.append(f"xtrap{' --xtrap-variants ' + variant if variant else ''} profile of {label}: "
                                     f"{why}")
                s["profile"] = " ".join(files)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    stem = os.path.join(a.out_dir, f"{'gpu' if a.device == 'cuda' else 'cpu'}_throughput")
    write_csv(stem + "_runs.csv", runs, ["model", "method", "arch", "pos", "head", "rep", "system", "train_step",
                                         "tok_per_s",
                                         "compile_s", "flop_per_token", "attention", "adamw", "host_sync", "torch",
                                         "max_memory_allocated_gib", "error"])
    write_csv(stem + ".csv", summaries, ["model", "method", "arch", "pos", "head", "xtrap_tok_per_s",
                                         "xtrap_train_step", "xtrap_variants",
                                         "eager_tok_per_s", "ratio", "compiled_tok_per_s", "compiled_mode",
                                         "compile_s", "ratio_compiled", "compiled_mfu", "compiled_runs",
                                         "xtrap_mfu", "eager_mfu", "flop_per_token",
                                         "xtrap_flop_per_token", "eager_flop_per_token",
                                         "eager_host_sync_tok_per_s", "xtrap_runs", "eager_runs", "failures",
                                         "profile"])
    peak = med(peaks) if peaks else None
    eager_meta = next((r for r in runs if r["system"] == "eager" and r["tok_per_s"]), {})
    lines = [f"Training throughput, xtrap against PyTorch eager ({a.dtype}, {a.device}"
             + (f", {device_info.get('gpu')}" if device_info.get("gpu") else "") + ")",
             "",
             f"Command: `{' '.join([os.path.basename(sys.executable), *sys.argv])}` "
             f"({time.time() - started:.0f} s, {time.strftime('%Y-%m-%d %H:%M')}); torch {device_info.get('torch', '?')}.",
             "",
             f"Per method: {a.reps} reps, xtrap, eager and each torch.compile mode in turn (the order rotates every "
             f"rep); each "
             f"run " + ", ".join(f"{name}: {warmups[name]} untimed + {steps[name]} timed steps"
                                 for name in a.models.split(",")) + "; tok/s over the timed steps; medians. "
             f"Model {a.models} ({', '.join(f'{k}={v}' for k, v in MODELS[a.models.split(',')[0]].items())}), "
             f"L={a.L}, {a.batch} sequences a step, dropout {a.dropout}, "
             + ("tied full softmax / CLAP head" if a.adaptive == "none" else f"adaptive softmax {a.adaptive}")
             + f", AdamW lr {a.lr}. xtrap: `--device {a.device} --dtype {a.dtype}`; eager: bench/baseline.py, "
             f"attention {eager_meta.get('attention', '?')}, AdamW {eager_meta.get('adamw', '?')}, host syncs per "
             f"step: {eager_meta.get('host_sync', '?')} (xtrap reads loss and gradient norm every step).",
             "",
             (f"MFU: model FLOPs (xtrap's count, src/model/flops.cpp: attention over all T keys, causal or not) "
              f"per second over the median of {len(peaks)} {a.matmul_n}^3 {a.dtype} torch.mm on {a.device} "
              f"measured in this command: {peak / 1e12:.1f} TFLOP/s "
              f"(runs {', '.join(f'{x / 1e12:.1f}' for x in peaks)})." if peak else "MFU: no matmul peak measured."),
             "",
             "| model | method | xtrap tok/s | xtrap step | xtrap variants: tok/s (step) | eager tok/s | "
             "compiled tok/s | xtrap / eager | xtrap / compiled | "
             "compiled: fastest mode, compile s | xtrap MFU | eager MFU | compiled MFU | "
             "eager, host reads per step | xtrap runs | eager runs | compiled runs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(f"| {s['model']} | {s['method']} | {fmt(s['xtrap_tok_per_s'], ',.0f')} | "
                     f"{s['xtrap_train_step']} | {s['xtrap_variants'] or '-'} | "
                     f"{fmt(s['eager_tok_per_s'], ',.0f')} | {fmt(s['compiled_tok_per_s'], ',.0f')} | "
                     f"{fmt(s['ratio'], '.2f')} | {fmt(s['ratio_compiled'], '.2f')} | "
                     f"{s['compiled_mode']}{', ' + fmt(s['compile_s'], '.0f') + ' s' if s['compile_s'] else ''} | "
                     f"{fmt(s['xtrap_mfu'], '.1%')} | {fmt(s['eager_mfu'], '.1%')} | {fmt(s['compiled_mfu'], '.1%')} | "
                     f"{fmt(s.get('eager_host_sync_tok_per_s'), ',.0f')} | "
                     f"{s['xtrap_runs']} | {s['eager_runs']} | {s['compiled_runs']} |")
    lines.append("")
    for s in summaries:
        if s.get("eager_profile"):
            lines.append(f"- eager profile, {s['method']}: {json.dumps(s['eager_profile'])}")
        if s["profile"]:
            lines.append(f"- profiles of {s['method']}: {s['profile']}")
        if s["failures"]:
            lines.append(f"- {s['method']}: {s['failures']} failed runs (see {os.path.basename(stem)}_runs.csv)")
    lines += [f"- {n}" for n in notes]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")
    with open(stem + ".json", "w") as f:
        json.dump({"args": vars(a), "device": device_info, "matmul_peaks": peaks, "summaries": summaries,
                   "runs": runs, "notes": notes}, f, indent=1)
    short = ", ".join(f"{s['method']} {fmt(s['ratio'], '.2f')}x (compiled {fmt(s['ratio_compiled'], '.2f')}x)"
                      for s in summaries)
    summary = (f"xtrap/eager (xtrap/compiled) train tok/s ({a.dtype}, {a.device}): {short}; "
               f"peak {fmt(peak and peak / 1e12, '.1f')} TFLOP/s")
    with open(stem + "_summary.txt", "w") as f:
        f.write(summary + "\n")
    print("\n".join(lines))
    print(summary)
    failed = any(s["ratio"] is None for s in summaries)
    return 1 if failed else 0


def steps_per_model(p, flag, text, models):
    """--steps / --warmup "model=N,...": {model: N}, with an entry for every model in `models`, or
    a one-line usage error."""
    counts = {}
    for item in text.split(","):
        name, _, n = item.partition("=")
        if not n.isdigit():
            p.error(f"{flag}: {item!r} is not MODEL=N (e.g. small=10)")
        counts[name] = int(n)
    missing = [m for m in dict.fromkeys(models) if m not in counts]
    if missing:
        p.error(f"{flag} {text!r} has no count for {', '.join(missing)}")
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where xtrap and the baseline run")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16"],
                   help="compute precision of both (default: bfloat16 on cuda, float32 on cpu)")
    p.add_argument("--suite", default=None, choices=["models", "methods"],
                   help="models: train + eval per model size (the CPU comparison); methods: training per position "
                        "method, side by side, into --out-dir (default: methods on cuda, models on cpu)")
    p.add_argument("--xtrap", default=None, help="default: build-cuda/xtrap on cuda, build/xtrap on cpu")
    p.add_argument("--python", default=None, help=f"interpreter for baseline.py (default: {GPU_PY} on cuda, {CPU_PY} on cpu)")
    p.add_argument("--data", default="data/wikitext-2")
    p.add_argument("--models", default=None, help="default: large for --suite methods, small,large otherwise")
    p.add_argument("--methods", default=",".join(DEFAULT_METHODS),
                   help="--suite methods: labels of " + ", ".join(METHODS) + " (default: " + ",".join(DEFAULT_METHODS) + ")")
    p.add_argument("--pos", default="alibi")
    p.add_argument("--arch", default="decoder")
    p.add_argument("--L", type=int, default=512)
    p.add_argument("--batch", type=int, default=None, help="sequences a step (default: 32 for methods, 8 for models)")
    p.add_argument("--adaptive", default=None, help="cutoffs, or none for the full softmax (default: none for methods)")
    p.add_argument("--lr", type=float, default=2e-3, help="--suite methods: peak learning rate of both")
    p.add_argument("--dropout", type=float, default=0.1, help="--suite methods: dropout of both")
    p.add_argument("--threads", type=int, default=None, help="intra-op CPU threads (default: 2 on cpu, 0 = all on cuda)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", default=None, help="untimed training steps per model (default: small=2,large=1; "
                                                  "cuda: large=10)")
    p.add_argument("--steps", default=None, help="timed training steps per model (default: small=10,large=3; "
                                                 "cuda: large=50)")
    p.add_argument("--baseline-default-omp", action="store_true", help="run the baseline with libgomp's default spinning")
    p.add_argument("--eval-tokens", type=int, default=16384)
    p.add_argument("--positions", action="store_true", help="also compare every position method (small model)")
    p.add_argument("--skip-baseline", action="store_true", help="only the --positions comparison")
    p.add_argument("--out-dir", default=None, help="--suite methods: where the tables go (required there)")
    p.add_argument("--matmul-n", type=int, default=None, help="peak matmul size (default: 8192 on cuda, 2048 on cpu)")
    p.add_argument("--matmul-iters", type=int, default=None, help="peak matmul repetitions (default: 50 cuda, 5 cpu)")
    p.add_argument("--xtrap-variants", default="",
                   help="--suite methods: xtrap variants also timed in the rotation, comma-separated: "
                        f"{', '.join(XTRAP_VARIANTS)} (see above)")
    p.add_argument("--compile-modes", default=None,
                   help="torch.compile modes measured beside eager, comma-separated, or none (default: "
                        "default,max-autotune-no-cudagraphs,reduce-overhead on cuda, default on cpu)")
    p.add_argument("--profile", default="none", choices=["none", "short", "all"],
                   help="--suite methods: profile the methods where xtrap is below eager (short) or all of them")
    p.add_argument("--profile-steps", type=int, default=5)
    p.add_argument("--profile-variants", default="",
                   help="xtrap variants (names as --xtrap-variants) profiled too wherever --profile profiles xtrap")
    p.add_argument("--keep-nsys", action="store_true", help="copy nsys's .nsys-rep files into --out-dir")
    p.add_argument("--timeout", type=float, default=None, help="seconds per subprocess (default: 300 on cuda, none)")
    a = p.parse_args()
    cuda = a.device == "cuda"
    a.suite = a.suite or ("methods" if cuda else "models")
    methods = a.suite == "methods"
    a.dtype = a.dtype or ("bfloat16" if cuda else "float32")
    a.xtrap = a.xtrap or ("build-cuda/xtrap" if cuda else "build/xtrap")
    a.python = a.python or (GPU_PY if cuda else CPU_PY)
    a.models = a.models or ("large" if methods else "small,large")
    a.batch = a.batch or (32 if methods else 8)
    a.adaptive = a.adaptive or ("none" if methods else "2000,10000")
    a.threads = a.threads if a.threads is not None else (0 if cuda else 2)
    a.warmup = a.warmup or ("tiny=2,small=2,large=10" if cuda else "tiny=2,small=2,large=1")
    a.steps = a.steps or ("tiny=10,small=50,large=50" if cuda else "tiny=3,small=10,large=3")
    for name in a.models.split(","):
        if name not in MODELS:
            p.error(f"unknown --models name {name!r} (valid: {', '.join(MODELS)})")
    timed = a.models.split(",") + (["small"] if a.positions else [])  # --positions trains the small model
    a.steps = steps_per_model(p, "--steps", a.steps, timed)
    a.warmup = steps_per_model(p, "--warmup", a.warmup, timed)
    a.matmul_n = a.matmul_n or (8192 if cuda else 2048)
    a.matmul_iters = a.matmul_iters or (50 if cuda else 5)
    a.timeout = a.timeout or (300 if cuda else None)
    a.compile_modes = a.compile_modes or ("default,max-autotune-no-cudagraphs,reduce-overhead" if cuda else "default")
    for option in ("xtrap_variants", "profile_variants"):
        setattr(a, option, [name for name in getattr(a, option).split(",") if name])
        flag = "--" + option.replace("_", "-")
        for name in getattr(a, option):
            if name not in XTRAP_VARIANTS:
                p.error(f"unknown {flag} name {name!r} (valid: {', '.join(XTRAP_VARIANTS)})")
            if name != "off" and not cuda:
                p.error(f"{flag} {name}: a CUDA-only xtrap option (--device cuda)")
    if methods:
        if not a.out_dir:
            p.error("--suite methods writes its tables into --out-dir")
        sys.exit(methods_suite(a))
    if cuda or a.dtype != "float32":
        p.error("the models suite is the CPU float32 comparison; use --suite methods for cuda or bfloat16")
    steps, warmups = a.steps, a.warmup
    work = tempfile.mkdtemp(prefix="xtrap-bench-")
    results = {"args": vars(a), "models": {}, "positions": {}}
    peaks = []
    modes, compile_note = compile_modes(a) if not a.skip_baseline else ([], None)
    if compile_note:
        results["compile_note"] = compile_note
    try:
        if not a.skip_baseline:
            for name in a.models.split(","):
                m, n, w = MODELS[name], steps[name], warmups[name]
                r = {k: [] for k in ["xtrap_train", "xtrap_train_flops", "base_train", "xtrap_eval",
                                     "xtrap_eval_flops", "base_eval", *(f"compiled_train:{c}" for c in modes)]}
                r.update({f"compile_s:{c}": [] for c in modes})
                for rep in range(a.reps):
                    tps, fps, run = xtrap_train(a, m, a.pos, a.arch, work, n, w)
                    r["xtrap_train"].append(tps)
                    r["xtrap_train_flops"].append(fps)
                    r["base_train"].append(baseline(a, m, a.pos, a.arch, "train", n, w)["tok_per_s"])
                    for c in modes:
                        try:
                            j = baseline(a, m, a.pos, a.arch, "train", n, w, ["--compile", c])
                        except Exception as e:  # noqa: BLE001 - a mode that fails must not lose the others
                            results.setdefault("compile_errors", []).append(f"{name} {c}: {failure(e)}")
                            continue
                        r[f"compiled_train:{c}"].append(j["tok_per_s"])
                        r[f"compile_s:{c}"].append(j["compile_s"])
                    tps, fps = xtrap_eval(a, run)
                    r["xtrap_eval"].append(tps)
                    r["xtrap_eval_flops"].append(fps)
                    r["base_eval"].append(baseline(a, m, a.pos, a.arch, "eval")["tok_per_s"])
                    peaks.append(matmul_peak(a))
                    shutil.rmtree(run)
                    print(name, rep, {k: round(v[-1], 1) for k, v in r.items()}, f"peak {peaks[-1] / 1e9:.1f} GFLOP/s",
                          file=sys.stderr, flush=True)
                results["models"][name] = r
        if a.positions:
            m, n, w = MODELS["small"], steps["small"], warmups["small"]
            runs = [(arch, pos) for pos in DECODER_POSITIONS for arch in ["decoder"]]
            runs += [("encoder", pos) for pos in ENCODER_POSITIONS]
            tps = {f"{arch}/{pos}": [] for arch, pos in runs}
            for rep in range(a.reps):
                for arch, pos in runs:
                    t, _, run = xtrap_train(a, m, pos, arch, work, n, w)
                    tps[f"{arch}/{pos}"].append(t)
                    shutil.rmtree(run)
                print("positions", rep, {k: round(v[-1]) for k, v in tps.items()}, file=sys.stderr, flush=True)
            results["positions"] = tps
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if peaks:
        results["matmul_peak"] = peaks
        peak = med(peaks)
        print(f"matmul peak (2048^3 sgemm, {a.threads} threads): median {peak / 1e9:.1f} GFLOP/s "
              f"of {[round(x / 1e9, 1) for x in peaks]}")
        print("| model | phase | xtrap tok/s | baseline tok/s | ratio | compiled tok/s (fastest mode, compile s) | "
              "xtrap / compiled | xtrap GFLOP/s | MFU vs peak |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, r in results["models"].items():
            for phase in ["train", "eval"]:
                x, b, f = med(r[f"xtrap_{phase}"]), med(r[f"base_{phase}"]), med(r[f"xtrap_{phase}_flops"])
                compiled, ratio = (compile_note or "-") if phase == "train" else "-", "-"
                measured = [k for k in modes if r[f"compiled_train:{k}"]]
                if phase == "train" and modes and not measured:
                    compiled = "every compiled run failed (see compile_errors)"
                if phase == "train" and measured:  # eval is not compiled
                    c = max(measured, key=lambda k: med(r[f"compiled_train:{k}"]))
                    ct = med(r[f"compiled_train:{c}"])
                    compiled, ratio = f"{ct:.0f} ({c}, {med(r[f'compile_s:{c}']):.0f} s)", f"{x / ct:.2f}"
                print(f"| {name} | {phase} | {x:.0f} | {b:.0f} | {x / b:.2f} | {compiled} | {ratio} | {f / 1e9:.1f} | "
                      f"{f / peak:.0%} |")
    if results["positions"]:
        print("| arch/pos | train tok/s (median) | vs none | runs |")
        print("|---|---|---|---|")
        for k, v in results["positions"].items():
            ref = med(results["positions"][k.split("/")[0] + "/none"])
            print(f"| {k} | {med(v):.0f} | {med(v) / ref - 1:+.1%} | {[round(x) for x in v]} |")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
