"""Which decoders learn retrieval at their training length, and when (issue 78 item 0): retrieval-mini's
decoder recipe (L = 128, 2 layers, d = 128, 4 heads, FFN 512, no dropout, adaptive softmax 2000 /
10000, batch 16, lr 2e-3, warmup 40, cosine) trained for --steps with a task mix, every method in
turn, each run's task probe (32 prompts a task at L, depths 0..100% of the filler, teacher-forced:
train/task_probe.h) read from its train.jsonl at every validation:

  /usr/bin/python3 bench/retrieval_recipes.py --work /tmp/recipes [--methods rotary,t5,kerple-log,fire,alibi] \\
      [--steps 3000] [--mix passkey:0.5,niah-multikey:0.25] [--task-loss all] [--seed 1] [--init-seed N] \
      [--out results/retrieval_recipes.csv]

A method `encoder:POS` trains an encoder of that position method (no adaptive softmax), whose task
answers are masked. A run already finished in --work is read, not trained again. Writes OUT (one
row per method, step and task: the probe's accuracy and mean answer log-probability, chance for a
digit log(1/10) = -2.30, and that step's validation loss) and OUT_at_L.csv: each finished run's
`xtrap eval --task T --Lvalid 128 --depths 0..100:25 --trials 40`, one row per task and depth, with
its Wilson interval: the "at least 90% at every depth" criterion.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train(a, method, run):
    status = json.load(open(os.path.join(run, "run.json")))["status"] if os.path.exists(
        os.path.join(run, "run.json")) else ""
    if status == "finished":
        return
    arch, pos = method.split(":") if ":" in method else ("decoder", method)
    cmd = [a.xtrap, "train", "--data", os.path.join(ROOT, "data", "wikitext-2"), "--arch", arch, "--pos", pos,
           "--L", "128", "--layers", "2", "--d-model", "128", "--heads", "4", "--ffn", "512", "--dropout", "0",
           "--steps", str(a.steps), "--batch", "16", "--lr", "2e-3", "--warmup", "40", "--eval-every", "500",
           "--eval-tokens", "8192", "--checkpoint-every", "500", "--threads", str(a.threads), "--seed", str(a.seed),
           "--task-mix", a.mix, "--task-loss", a.task_loss, "--no-progress", "--out", run]
    if a.init_seed is not None:
        cmd += ["--init-seed", str(a.init_seed)]
    # retrieval-mini's encoders have the full softmax tied to the input (train's default is adaptive).
    cmd += ["--adaptive-softmax", "2000,10000" if arch == "decoder" else "none"]
    if status:
        cmd = [a.xtrap, "train", "--resume", run, "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{method}: {r.stderr.strip()}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--methods", default="rotary,t5,kerple-log,fire,alibi")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--mix", default="passkey:0.5,niah-multikey:0.25")
    p.add_argument("--task-loss", default="all", help="all | answer (train --task-loss)")
    p.add_argument("--seed", type=int, default=1, help="train --seed: data order, dropout, masking")
    p.add_argument("--init-seed", type=int, default=None, help="train --init-seed (default: train's own)")
    p.add_argument("--threads", type=int, default=2, help="train and eval --threads")
    p.add_argument("--xtrap", default=os.path.join(ROOT, "build", "xtrap"))
    p.add_argument("--out", default=os.path.join(ROOT, "results", "retrieval_recipes.csv"))
    a = p.parse_args()
    rows, at_l = [], []
    tasks = [t.split(":")[0] for t in a.mix.split(",")]
    for method in a.methods.split(","):
        run = os.path.join(a.work, method.replace(":", "-"))
        train(a, method, run)
        for task in tasks:
            out = os.path.join(run, f"at-L-{task}.csv")
            if not os.path.exists(out):
                r = subprocess.run([a.xtrap, "eval", run, "--task", task, "--Lvalid", "128", "--depths", "0..100:25",
                                    "--trials", "40", "--threads", str(a.threads), "--no-progress", "--out", out],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"{method} {task}: {r.stderr.strip()}")
            for row in csv.DictReader(open(out)):
                at_l.append(dict(method=method, task_loss=a.task_loss, seed=a.seed, init_seed=a.init_seed or "", steps=a.steps, mix=a.mix, task=task,
                                 depth=row["depth"],
                                 trials=row["trials"], accuracy=row["accuracy"], accuracy_low=row["accuracy_low"],
                                 accuracy_high=row["accuracy_high"], answer_logprob=row["answer_logprob"]))
        for line in open(os.path.join(run, "train.jsonl")):
            j = json.loads(line)
            for task, probe in (j.get("tasks") or {}).items():
                rows.append(dict(method=method, task_loss=a.task_loss, seed=a.seed, init_seed=a.init_seed or "", steps=a.steps, mix=a.mix,
                                 step=j["step"], task=task,
                                 accuracy=f"{probe['accuracy']:.4f}", answer_logprob=f"{probe['answer_logprob']:.4f}",
                                 val_loss=f"{j['val_loss']:.4f}" if "val_loss" in j else ""))
        print(f"{method}: " + ", ".join(f"{r['task']} {r['accuracy']} at {r['step']}" for r in rows
                                        if r["method"] == method and r["step"] == a.steps), flush=True)
    for path, table in ((a.out, rows), (a.out.replace(".csv", "_at_L.csv"), at_l)):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)


main()
