"""Does a masked-LM encoder use its learned position table? An independent check in PyTorch eager.

xtrap's learned-position encoders scored like encoders without positions (results/scenarios.md,
encoder-variants-gpu). This trains bench/baseline.py's model (the same architecture, masking and
AdamW as xtrap, written separately in PyTorch) for --train-steps steps with xtrap's schedule
(linear warmup over --lr-warmup steps, then cosine to 0.1 x --lr) and prints, every --eval-every
steps, the masked-LM loss on the first --eval-tokens tokens of the valid split: non-overlapping
windows of L, the same masked tokens for every run (drawn from --eval-seed). One JSON line per
evaluation: {"step", "train_tokens", "val_loss", "val_ppl"}.

Every model option of bench/baseline.py passes through (--pos, --layers, --d-model, --L, --batch,
--lr, --no-scale-embedding, --position-init-std, --threads, ...); its --mode, --steps, --warmup and
--profile options, which time a run rather than train one, are refused.

  /usr/bin/python3 bench/encoder_positions.py --pos learned --arch encoder --L 128 --layers 4 \\
      --d-model 256 --heads 4 --ffn 1024 --batch 16 --lr 1e-3 --train-steps 600 --lr-warmup 60
"""
import argparse
import json
import math
import sys

import torch

import baseline

TIMING_OPTIONS = ("--mode", "--steps", "--warmup", "--profile", "--profile-steps", "--profile-rows",
                  "--matmul-n", "--matmul-iters")


def learning_rate(a, step):
    """xtrap's cosine schedule (src/train/lr_schedule.cpp), min_lr_ratio 0.1."""
    s = step + 1
    if s <= a.lr_warmup:
        return a.model.lr * s / a.lr_warmup
    progress = min(1.0, (s - a.lr_warmup) / max(1.0, a.train_steps - a.lr_warmup))
    low = 0.1 * a.model.lr
    return low + 0.5 * (a.model.lr - low) * (1.0 + math.cos(math.pi * progress))


@torch.no_grad()
def validation_loss(model, valid, m, words, rt, eval_tokens, eval_seed):
    """Mean masked-token NLL over non-overlapping windows of L; the masking drawn from eval_seed."""
    model.eval()
    state = torch.get_rng_state()
    torch.manual_seed(eval_seed)
    n = (min(eval_tokens, len(valid)) // m.L) * m.L
    total, count = 0.0, 0
    for w0 in range(0, n, m.L * m.batch):
        starts = torch.arange(w0, min(n, w0 + m.L * m.batch), m.L)
        nll = baseline.masked_nll(model, baseline.window_batch(valid, starts, m.L), m, words, rt)
        total += nll.double().sum().item()
        count += nll.numel()
    torch.set_rng_state(state)
    model.train()
    return total / count


def main():
    # No abbreviations: --lr (the model's) must not be read as --lr-warmup.
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--train-steps", type=int, default=600, help="optimizer steps")
    p.add_argument("--lr-warmup", type=int, default=60, help="linear warmup steps of the learning rate")
    p.add_argument("--eval-every", type=int, default=200, help="validation every N steps (and at the end)")
    p.add_argument("--eval-tokens", type=int, default=65536, help="valid-split tokens scored")
    p.add_argument("--eval-seed", type=int, default=12345, help="seed of the validation masking")
    a, rest = p.parse_known_args()
    refused = [o for o in rest if o.split("=")[0] in TIMING_OPTIONS]
    if refused:
        p.error(f"{refused[0]} times a run in bench/baseline.py; this script trains (--train-steps)")
    if a.train_steps < 1 or a.lr_warmup < 1 or a.eval_every < 1 or a.eval_tokens < 1:
        p.error("--train-steps, --lr-warmup, --eval-every and --eval-tokens must be positive")
    model_parser = baseline.make_parser()
    m = model_parser.parse_args(rest)
    baseline.check_arguments(model_parser, m)
    if m.arch != "encoder":
        p.error("--arch encoder: this check is about masked-LM encoders")
    a.model = m
    baseline.configure_torch(m)
    rt = baseline.Runtime(m)
    words, train, valid = baseline.load_corpus(m.data)
    model = baseline.Transformer(m, words + 1, rt.sdpa).to(rt.device)  # + <mask>
    opt, _ = baseline.make_optimizer(model, m, rt)
    model.train()
    for step in range(a.train_steps):
        for group in opt.param_groups:
            group["lr"] = learning_rate(a, step)
        opt.zero_grad(set_to_none=True)
        starts = torch.randint(0, len(train) - m.L, (m.batch,))
        baseline.loss_on(model, train, starts, m, words, rt).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        done = step + 1
        if done % a.eval_every == 0 or done == a.train_steps:
            loss = validation_loss(model, valid, m, words, rt, a.eval_tokens, a.eval_seed)
            print(json.dumps({"step": done, "train_tokens": done * m.batch * m.L, "val_loss": loss,
                              "val_ppl": math.exp(loss)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
