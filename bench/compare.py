"""Throughput of xtrap against the PyTorch eager baseline (bench/baseline.py), in one invocation.

For each model size: xtrap training, baseline training, xtrap eval forward and baseline eval
forward, alternating, --reps times; then median tokens/s and the xtrap / baseline ratio. Also a
square matmul (LibTorch's sgemm through torch.mm, the same OpenBLAS kernels xtrap uses) as the
peak that model FLOPs utilisation (MFU) is quoted against, and with --positions the training
throughput of every position method relative to `none`.

Training tok/s counts only steps after --warmup (from train.jsonl's elapsed_s, logged every
step); eval tok/s is what `xtrap eval` reports per row. Run from the repository root:
  /usr/bin/python3 bench/compare.py --xtrap build/xtrap --reps 3
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"  # Debian's interpreter: python3-torch, the same LibTorch 1.13 kernels
MODELS = {
    "small": dict(layers=4, d_model=128, heads=8, ffn=512),  # the quickstart model
    "large": dict(layers=6, d_model=512, heads=8, ffn=2048),
}
DECODER_POSITIONS = ["none", "sinusoidal", "learned", "rotary", "t5", "alibi"]
ENCODER_POSITIONS = ["none", "alibi", "alibi-offset", "alibi-onesided", "alibi-learned", "bialibi"]


def sh(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return out.stdout


def baseline_env(a):
    """xtrap re-executes itself with OMP_WAIT_POLICY=passive (src/util/omp_wait_policy.h); the
    baseline gets the same setting unless --baseline-default-omp."""
    env = dict(os.environ)
    if not a.baseline_default_omp:
        env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


def model_flags(m):
    return ["--layers", str(m["layers"]), "--d-model", str(m["d_model"]), "--heads", str(m["heads"]),
            "--ffn", str(m["ffn"])]


def xtrap_train(a, m, pos, arch, workdir, steps, warmup):
    """Tokens/s and model FLOP/s over the timed steps of an `xtrap train` run."""
    run = os.path.join(workdir, f"run-{time.monotonic_ns()}")
    sh([a.xtrap, "train", "--out", run, "--arch", arch, "--pos", pos, *model_flags(m), "--L", str(a.L),
        "--batch", str(a.batch), "--adaptive-softmax", a.adaptive, "--threads", str(a.threads),
        "--steps", str(warmup + steps), "--warmup", "1", "--log-every", "1", "--eval-every", "0",
        "--eval-tokens", "1024", "--checkpoint-every", "1000000", "--data", a.data, "--no-progress"])
    lines = [json.loads(l) for l in open(os.path.join(run, "train.jsonl")) if '"elapsed_s"' in l]
    first, last = lines[warmup - 1], lines[-1]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    tokens = last["tokens"] - first["tokens"]
    flop_per_token = last["flop_per_s"] / last["tok_per_s"]
    return tokens / seconds, flop_per_token * tokens / seconds, run


def xtrap_eval(a, run):
    out = os.path.join(run, "bench-eval.json")
    sh([a.xtrap, "eval", run, "--Lvalid", str(a.L), "--max-tokens", str(a.eval_tokens), "--batch", str(a.batch),
        "--threads", str(a.threads), "--out", out, "--no-progress"])
    row = json.load(open(out))[0]
    return row["tokens_per_s"], row["flop_per_s"]


def baseline(a, m, pos, arch, mode, steps=0, warmup=1):
    out = sh([PY, os.path.join(os.path.dirname(__file__), "baseline.py"), "--mode", mode, "--arch", arch, "--pos", pos,
              *model_flags(m), "--L", str(a.L), "--batch", str(a.batch), "--adaptive-softmax", a.adaptive,
              "--threads", str(a.threads), "--steps", str(steps), "--warmup", str(warmup),
              "--eval-tokens", str(a.eval_tokens), "--data", a.data], baseline_env(a))
    return json.loads(out.strip().splitlines()[-1])["tok_per_s"]


def matmul_peak(a):
    code = ("import torch,time\n"
            f"torch.set_num_threads({a.threads}); torch.set_flush_denormal(True)\n"
            "n=2048; x=torch.randn(n,n); y=torch.randn(n,n); o=torch.empty(n,n); torch.mm(x,y,out=o)\n"
            "t=time.perf_counter(); [torch.mm(x,y,out=o) for _ in range(5)]\n"
            "print(5*2*n**3/(time.perf_counter()-t))\n")
    return float(sh([PY, "-c", code], baseline_env(a)))


def med(xs):
    return statistics.median(xs)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--xtrap", default="build/xtrap")
    p.add_argument("--data", default="data/wikitext-2")
    p.add_argument("--models", default="small,large")
    p.add_argument("--pos", default="alibi")
    p.add_argument("--arch", default="decoder")
    p.add_argument("--L", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--adaptive", default="2000,10000")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", default="small=2,large=1", help="untimed training steps per model")
    p.add_argument("--steps", default="small=10,large=3", help="timed training steps per model")
    p.add_argument("--baseline-default-omp", action="store_true", help="run the baseline with libgomp's default spinning")
    p.add_argument("--eval-tokens", type=int, default=16384)
    p.add_argument("--positions", action="store_true", help="also compare every position method (small model)")
    p.add_argument("--skip-baseline", action="store_true", help="only the --positions comparison")
    a = p.parse_args()
    steps = {k: int(v) for k, v in (kv.split("=") for kv in a.steps.split(","))}
    warmups = {k: int(v) for k, v in (kv.split("=") for kv in a.warmup.split(","))}
    work = tempfile.mkdtemp(prefix="xtrap-bench-")
    results = {"args": vars(a), "models": {}, "positions": {}}
    peaks = []
    try:
        if not a.skip_baseline:
            for name in a.models.split(","):
                m, n, w = MODELS[name], steps[name], warmups[name]
                r = {k: [] for k in ["xtrap_train", "xtrap_train_flops", "base_train", "xtrap_eval",
                                     "xtrap_eval_flops", "base_eval"]}
                for rep in range(a.reps):
                    tps, fps, run = xtrap_train(a, m, a.pos, a.arch, work, n, w)
                    r["xtrap_train"].append(tps)
                    r["xtrap_train_flops"].append(fps)
                    r["base_train"].append(baseline(a, m, a.pos, a.arch, "train", n, w))
                    tps, fps = xtrap_eval(a, run)
                    r["xtrap_eval"].append(tps)
                    r["xtrap_eval_flops"].append(fps)
                    r["base_eval"].append(baseline(a, m, a.pos, a.arch, "eval"))
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
        print(f"| model | phase | xtrap tok/s | baseline tok/s | ratio | xtrap GFLOP/s | MFU vs peak |")
        print("|---|---|---|---|---|---|---|")
        for name, r in results["models"].items():
            for phase in ["train", "eval"]:
                x, b, f = med(r[f"xtrap_{phase}"]), med(r[f"base_{phase}"]), med(r[f"xtrap_{phase}_flops"])
                print(f"| {name} | {phase} | {x:.0f} | {b:.0f} | {x / b:.2f} | {f / 1e9:.1f} | {f / peak:.0%} |")
    if results["positions"]:
        print("| arch/pos | train tok/s (median) | vs none | runs |")
        print("|---|---|---|---|")
        for k, v in results["positions"].items():
            ref = med(results["positions"][k.split("/")[0] + "/none"])
            print(f"| {k} | {med(v):.0f} | {med(v) / ref - 1:+.1%} | {[round(x) for x in v]} |")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
