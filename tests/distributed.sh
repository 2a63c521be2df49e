#!/usr/bin/env bash
# Data-parallel training and evaluation with 2 ranks on loopback (Gloo):
#  1. 2 ranks x B/2 sequences give the parameters of 1 rank x B after K steps (decoder through
#     --nproc, encoder through the torchrun environment with rank 0 hosting the store). Dropout is
#     0: each rank has its own dropout stream, so with dropout the runs differ by design. The
#     embedding's AdamW moments are sharded over the 2 ranks (half each). With dropout, 2 ranks
#     interrupted at step 3 and resumed equal the uninterrupted 2-rank run exactly (the checkpoint
#     holds the moments gathered from both). The step without host reads (--cuda-graph uncaptured)
#     with 2 ranks equals the 2-rank host-read step, and resumes exactly. --accumulate 2 (micro-
#     batches) with 2 ranks equals 1 rank, with either step. An adapted run (--init) with 2 ranks
#     equals it with 1 rank, from a run and from a Hugging Face directory.
#  2. kill -9 of rank 1: the job exits non-zero within 60 s with a one-line error naming rank 1,
#     and --resume (with 1 rank: the checkpoint does not depend on the world size) finishes it.
#  3. xtrap eval with 2 ranks scores every token once: same token counts and perplexity as 1 rank.
#  4. xtrap run with 2 ranks: rank 0 alone writes the results, whose numbers equal a 1-rank run's.
# usage: distributed.sh XTRAP COMPARE_CHECKPOINTS
# A build whose LibTorch ships no Gloo headers (a pip wheel's) has no CPU process groups.
[[ -z ${XTRAP_NO_GLOO:-} ]] || { echo "skipped: no CPU process groups in this build (its LibTorch ships no Gloo headers)"; exit 77; }
source "$(dirname "$0")/reliability_lib.sh" "$@"
make_corpus "$WORK/data" 3000 4000 11

SMALL=(--data "$WORK/data" --layers 1 --d-model 32 --heads 2 --ffn 64 --L 32 --threads 1 --no-progress --seed 3
       --log-every 1 --eval-tokens 512)
MODEL=("${SMALL[@]}" --dropout 0)

# 1. equivalence: decoder with --nproc
"$XTRAP" train --out "$WORK/dec1" "${MODEL[@]}" --batch 8 --steps 6 > /dev/null || fail "1-rank decoder run failed"
"$XTRAP" train --nproc 2 --out "$WORK/dec2" "${MODEL[@]}" --batch 8 --steps 6 > /dev/null ||
  fail "2-rank decoder run failed"
# The key bias (elements 32..63 of qkv.bias at d_model 32) has an exactly-zero gradient; see
# compare_checkpoints.cpp.
KEY_BIAS=(--ignore blocks.0.attn.qkv.bias:32:64)
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/dec2" "$WORK/dec1" || fail "2 ranks x 4 differ from 1 rank x 8 (decoder)"
python3 - "$WORK/dec1/run.json" "$WORK/dec2/run.json" <<'PY' || fail "final validation loss differs (decoder)"
import json, sys
a, b = (json.load(open(f))["extra"]["final_val_loss"] for f in sys.argv[1:])
assert abs(a - b) <= 1e-5 * abs(a), (a, b)
PY
# The embedding's AdamW moments (vocab x 32 floats, above InPlaceAdamW::kShardMinElements) are
# sharded over the 2 ranks: rank 0 holds its first vocab / 2 rows of them, every other moment whole.
python3 - "$WORK/dec1/run.json" "$WORK/dec2/run.json" <<'PY' || fail "2 ranks do not shard the embedding's moments"
import json, sys
(one, vocab), (two, _) = ((j["extra"], j["model"]["vocab_size"]) for j in (json.load(open(f)) for f in sys.argv[1:]))
assert one["optimizer_state_bytes"] == 2 * 4 * one["parameters"], one
assert one["optimizer_state_bytes"] - two["optimizer_state_bytes"] == 2 * 4 * 32 * (vocab - vocab // 2), (one, two)
PY
[[ $(ls "$WORK/dec2") == $(ls "$WORK/dec1") ]] || fail "the 2-rank run directory holds other files"
# --accumulate 2: each rank's 4 sequences in 2 micro-batches, the buckets summing both backward
# passes before their all-reduce.
"$XTRAP" train --nproc 2 --out "$WORK/dec2acc" "${MODEL[@]}" --batch 8 --steps 6 --accumulate 2 > /dev/null ||
  fail "2-rank decoder run with --accumulate 2 failed"
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/dec2acc" "$WORK/dec1" ||
  fail "2 ranks x 2 micro-batches x 2 differ from 1 rank x 8 (decoder)"
# An adapted run (train --init, --interp linear at 2x L) with 2 ranks equals it with 1 rank: every
# rank copies the source's weights before the first step.
"$XTRAP" train --init "$WORK/dec1" --out "$WORK/adapt1" --L 64 --interp linear --batch 4 --steps 3 --threads 1 \
  --no-progress --log-every 1 --eval-tokens 512 > /dev/null || fail "1-rank adapted run failed"
"$XTRAP" train --nproc 2 --init "$WORK/dec1" --out "$WORK/adapt2" --L 64 --interp linear --batch 4 --steps 3 \
  --threads 1 --no-progress --log-every 1 --eval-tokens 512 > /dev/null || fail "2-rank adapted run failed"
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/adapt2" "$WORK/adapt1" || fail "2 ranks differ from 1 rank (adapted run)"
# The same from a Hugging Face directory (the export of a run): both ranks read the data through its
# tokenizer (the ids cached once), and 2 ranks equal 1 rank.
"$XTRAP" train --out "$WORK/dechf" "${MODEL[@]}" --adaptive-softmax none --batch 8 --steps 2 > /dev/null ||
  fail "1-rank run to export failed"
"$XTRAP" export "$WORK/dechf" --hf "$WORK/dechf-hf" > /dev/null || fail "export --hf failed"
for n in 1 2; do
  "$XTRAP" train --nproc $n --init "$WORK/dechf-hf" --data "$WORK/data" --out "$WORK/hfadapt$n" --L 64 --batch 4 \
    --steps 3 --threads 1 --no-progress --log-every 1 --eval-tokens 512 > /dev/null || fail "$n-rank run from a Hugging Face directory failed"
done
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/hfadapt2" "$WORK/hfadapt1" ||
  fail "2 ranks differ from 1 rank (run from a Hugging Face directory)"

# 1b. equivalence: encoder (MLM: each rank scores a different number of masked tokens) under the
# torchrun contract by hand, rank 0 hosting the TCPStore.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ENC=(--arch encoder --pos alibi --batch 8 --steps 6 --mask-prob 0.15)
"$XTRAP" train --out "$WORK/enc1" "${MODEL[@]}" "${ENC[@]}" > /dev/null || fail "1-rank encoder run failed"
for rank in 1 0; do
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    "$XTRAP" train --out "$WORK/enc2" "${MODEL[@]}" "${ENC[@]}" > /dev/null 2> "$WORK/enc_err$rank" &
  pids[rank]=$!
done
wait "${pids[0]}" || fail "encoder rank 0 failed: $(cat "$WORK/enc_err0")"
wait "${pids[1]}" || fail "encoder rank 1 failed: $(cat "$WORK/enc_err1")"
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/enc2" "$WORK/enc1" || fail "2 ranks x 4 differ from 1 rank x 8 (encoder)"

# An uneven split is refused with one line.
out=$("$XTRAP" train --nproc 2 --out "$WORK/odd" "${MODEL[@]}" --batch 5 --steps 1 2>&1)
[[ $? -ne 0 && $out == *"does not split evenly over 2 ranks"* ]] || fail "batch 5 over 2 ranks accepted: $out"

# 1c. resume with dropout: every rank's dropout masks continue exactly. The interrupted run stops
# at its first bad step (a NaN injected at step 4, --max-bad-steps 1) with its checkpoint of step 3.
DROP=(--dropout 0.2 --batch 8 --steps 6 --checkpoint-every 3 --max-bad-steps 1)
"$XTRAP" train --nproc 2 --out "$WORK/drop" "${SMALL[@]}" "${DROP[@]}" > /dev/null ||
  fail "2-rank dropout run failed"
"$XTRAP" train --nproc 2 --out "$WORK/drop_cut" "${SMALL[@]}" "${DROP[@]}" --inject-nan-at 4 \
  > /dev/null 2>&1 && fail "the run with a NaN at step 4 did not stop"
"$XTRAP" train --nproc 2 --resume "$WORK/drop_cut" --no-progress > /dev/null || fail "2-rank resume with dropout failed"
"$COMPARE" "$WORK/drop_cut" "$WORK/drop" || fail "2 ranks resumed at step 3 differ from the uninterrupted run"

# 1d. the step without host reads (--cuda-graph uncaptured, train/device_step.h) all-reduces one
# buffer of gradients and loss after backward. With dropout, 2 ranks give the 2-rank host-read
# run's parameters to float rounding (AdamW's scalars are float32 tensors there), holding whole
# moments on every rank; stopped by a NaN at step 4 and resumed, they equal the uninterrupted run.
DEVICE=("${SMALL[@]}" "${DROP[@]}" --adaptive-softmax none)  # the full softmax: static shapes
"$XTRAP" train --nproc 2 --out "$WORK/dev_host" "${DEVICE[@]}" --cuda-graph off > /dev/null ||
  fail "2-rank host-read run failed"
"$XTRAP" train --nproc 2 --out "$WORK/dev" "${DEVICE[@]}" --cuda-graph uncaptured > /dev/null ||
  fail "2-rank run without host reads failed"
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/dev" "$WORK/dev_host" ||
  fail "2 ranks without host reads differ from the 2-rank host-read run"
python3 - "$WORK/dev/run.json" <<'PY' || fail "the step without host reads: run.json"
import json, sys
extra = json.load(open(sys.argv[1]))["extra"]
assert extra["train_step"] == "uncaptured" and extra["allreduce_buckets"] == 1, extra
assert extra["optimizer_state_bytes"] == 2 * 4 * extra["parameters"], extra  # whole moments
PY
"$XTRAP" train --nproc 2 --out "$WORK/dev_cut" "${DEVICE[@]}" --cuda-graph uncaptured --inject-nan-at 4 \
  > /dev/null 2>&1 && fail "the run without host reads with a NaN at step 4 did not stop"
"$XTRAP" train --nproc 2 --resume "$WORK/dev_cut" --no-progress --cuda-graph uncaptured > /dev/null ||
  fail "2-rank resume without host reads failed"
"$COMPARE" "$WORK/dev_cut" "$WORK/dev" || fail "2 ranks without host reads resumed at step 3 differ"
# Without dropout, 2 ranks x 2 micro-batches x 2 sequences give 1 rank x 8.
FULL=("${MODEL[@]}" --batch 8 --steps 6 --adaptive-softmax none)
"$XTRAP" train --out "$WORK/full1" "${FULL[@]}" > /dev/null || fail "1-rank full-softmax run failed"
"$XTRAP" train --nproc 2 --out "$WORK/dev_acc" "${FULL[@]}" --accumulate 2 --cuda-graph uncaptured > /dev/null ||
  fail "2-rank run without host reads, --accumulate 2, failed"
"$COMPARE" --rtol 1e-5 "${KEY_BIAS[@]}" "$WORK/dev_acc" "$WORK/full1" ||
  fail "2 ranks x 2 micro-batches without host reads differ from 1 rank x 8"

echo "equivalence: ${SECONDS}s"
# 2. kill -9 of rank 1; the survivor and the launcher stop within 60 s, naming it.
LONG=(--batch 8 --steps 100000 --checkpoint-every 20 --eval-every 0)
"$XTRAP" train --nproc 2 --out "$WORK/killed" "${MODEL[@]}" "${LONG[@]}" > /dev/null 2> "$WORK/kill_err" &
launcher=$!
for _ in $(seq 600); do
  [[ -f "$WORK/killed/checkpoint.pt" ]] && break
  sleep 0.05
done
[[ -f "$WORK/killed/checkpoint.pt" ]] || fail "no checkpoint after 30 s"
rank1=""
for child in $(pgrep -P "$launcher"); do
  tr '\0' '\n' < "/proc/$child/environ" | grep -qx 'RANK=1' && rank1=$child
done
[[ -n $rank1 ]] || fail "rank 1 not found among the launcher's children"
kill -KILL "$rank1"
start=$SECONDS
wait "$launcher"
status=$?
elapsed=$((SECONDS - start))
(( status != 0 )) || fail "the job exited 0 after rank 1 was killed"
(( elapsed <= 60 )) || fail "the job took ${elapsed}s to stop"
grep -q "^xtrap: error: rank 1 of 2 was killed by signal 9" "$WORK/kill_err" || fail "launcher: $(cat "$WORK/kill_err")"
grep -q "^xtrap: error: rank 0: rank 1 stopped" "$WORK/kill_err" || fail "rank 0: $(cat "$WORK/kill_err")"
no_temporaries "$WORK/killed"
step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps_done"])' "$WORK/killed/run.json")
(( step >= 20 && step % 20 == 0 )) || fail "run.json says $step steps after the kill"
# Resume with one rank, and a shorter total so the test ends: the checkpoint is world-size free.
python3 - "$WORK/killed/run.json" $((step + 4)) <<'PY'
import json, sys
run = json.load(open(sys.argv[1])); run["train"]["steps"] = int(sys.argv[2]); json.dump(run, open(sys.argv[1], "w"))
PY
"$XTRAP" train --resume "$WORK/killed" --no-progress > /dev/null 2> "$WORK/resume_err" ||
  fail "resume failed: $(cat "$WORK/resume_err")"
grep -q '"status": "finished"' "$WORK/killed/run.json" || fail "the resumed run is not finished"
python3 - "$WORK/killed/train.jsonl" $((step + 4)) <<'PY' || fail "the resumed log does not continue the checkpoint"
import json, sys
steps = [j["step"] for j in map(json.loads, open(sys.argv[1])) if "loss" in j]
assert steps == list(range(1, int(sys.argv[2]) + 1)), steps
PY
echo "killed rank 1 at step > $step: the job stopped after ${elapsed}s; resumed with 1 rank to the end"

# 3. evaluation: every token once, same perplexity.
EVAL=(--Lvalid 32,100 --mode both --stride 10 --no-progress --threads 1)
for run in dec1 enc1; do
  "$XTRAP" eval "$WORK/$run" "${EVAL[@]}" --out "$WORK/$run-1.csv" > /dev/null 2>&1 || fail "1-rank eval of $run failed"
  "$XTRAP" eval "$WORK/$run" "${EVAL[@]}" --nproc 2 --out "$WORK/$run-2.csv" > "$WORK/eval_out" 2>&1 ||
    fail "2-rank eval of $run failed: $(cat "$WORK/eval_out")"
  python3 - "$WORK/$run-1.csv" "$WORK/$run-2.csv" "$WORK/data/wiki.valid.tokens" $run <<'PY' || fail "eval of $run"
import csv, sys
one, two = (list(csv.DictReader(open(f))) for f in sys.argv[1:3])
assert len(one) == len(two) == 4, (len(one), len(two))
tokens = sum(len(line.split()) + 1 for line in open(sys.argv[3]) if line.strip())  # words + <eos>
for a, b in zip(one, two):
    assert a["tokens_scored"] == b["tokens_scored"], (a, b)
    if sys.argv[4] == "dec1":  # a decoder scores every token once (the first from <eos>): N of N
        assert int(b["tokens_scored"]) == tokens, (b["tokens_scored"], tokens)
    assert abs(float(a["nll"]) - float(b["nll"])) <= 1e-6 * float(a["nll"]), (a["nll"], b["nll"])
PY
done
# 4. xtrap run under the torchrun contract: every rank trains and evaluates, rank 0 alone writes
# results/NAME (one "results:" line), with the files and numbers of a 1-rank run of the same
# scenario. Rank 1 is given its own --results directory, which must never be created.
cat > "$WORK/tiny.toml" <<EOF
description = "2-rank scenario"
[train]
data = "$WORK/data"
L = 32
layers = 1
d_model = 32
heads = 2
ffn = 64
dropout = 0.0
steps = 4
batch = 8
eval_every = 0
eval_tokens = 512
threads = 1
[[variant]]
name = "alibi"
pos = "alibi"
[eval]
lvalid = "32..64"
EOF
"$XTRAP" run "$WORK/tiny.toml" --runs "$WORK/sruns1" --results "$WORK/res1" --no-progress > /dev/null 2>&1 ||
  fail "1-rank xtrap run failed"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for rank in 1 0; do
  results=$WORK/res2
  [[ $rank == 1 ]] && results+=-rank1
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    "$XTRAP" run "$WORK/tiny.toml" --runs "$WORK/sruns2" --results "$results" --no-progress \
    > "$WORK/run_out$rank" 2> "$WORK/run_err$rank" &
  pids[rank]=$!
done
wait "${pids[0]}" || fail "xtrap run rank 0 failed: $(cat "$WORK/run_err0")"
wait "${pids[1]}" || fail "xtrap run rank 1 failed: $(cat "$WORK/run_err1")"
[[ $(cat "$WORK/run_out0") == "results: $WORK/res2/tiny" && ! -s "$WORK/run_out1" && ! -s "$WORK/run_err1" ]] ||
  fail "rank 1 printed: $(cat "$WORK/run_out1" "$WORK/run_err1")"
[[ ! -e "$WORK/res2-rank1" ]] || fail "rank 1 wrote results: $(find "$WORK/res2-rank1")"
[[ $(cd "$WORK/res1/tiny" && find . | sort) == $(cd "$WORK/res2/tiny" && find . | sort) ]] ||
  fail "2-rank results hold other files: $(cd "$WORK/res2/tiny" && find . | sort | tr '\n' ' ')"
python3 - "$WORK/res1/tiny/results.csv" "$WORK/res2/tiny/results.csv" <<'PY' || fail "2-rank scenario results differ"
import csv, sys
one, two = (list(csv.DictReader(open(f))) for f in sys.argv[1:])
assert len(one) == len(two) == 2, (len(one), len(two))
for a, b in zip(one, two):
    assert a["tokens_scored"] == b["tokens_scored"], (a, b)
    assert abs(float(a["nll"]) - float(b["nll"])) <= 1e-5 * float(a["nll"]), (a["nll"], b["nll"])
PY
echo "distributed: ok"
