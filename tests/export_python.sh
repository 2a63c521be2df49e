#!/usr/bin/env bash
# Export round trip: train tiny runs of several architectures / position methods / heads on a
# slice of the shipped data, `xtrap export` them, and check that the independent PyTorch
# reference module (tests/xtrap_reference.py, Debian's python3-torch, no xtrap code) scores a
# fixed input like xtrap does (tests/tools/export_logits). Also: bad RUN and non-empty OUT fail
# with one line.
set -euo pipefail
XTRAP=$1
EXPORT_LOGITS=$2
# Debian's python3 (python3-torch) unless XTRAP_PYTHON names another with torch (a wheel's, say).
PYTHON=${XTRAP_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/data"
for split in train valid test; do head -n 300 data/wikitext-2/wiki.$split.tokens >"$work/data/wiki.$split.tokens"; done
echo "5 17 3 42 8 1 99 23 7 64 2 11 30 4 9 12 6 50 13 21" >"$work/tokens.txt"

status=0
check() {  # NAME TRAIN-ARGS...
  local name=$1
  shift
  "$XTRAP" train --data "$work/data" --out "$work/$name" --steps 3 --L 16 --layers 2 --d-model 32 --heads 4 \
    --ffn 64 --batch 4 --warmup 1 --lr 0.01 --threads 1 --no-progress --eval-tokens 64 "$@" >/dev/null
  "$XTRAP" export "$work/$name" "$work/$name-export" >/dev/null
  "$EXPORT_LOGITS" "$work/$name" "$work/tokens.txt" "$work/$name.f32"
  "$PYTHON" "$here/export_check.py" "$work/$name-export" "$work/tokens.txt" "$work/$name.f32" || status=1
}
check decoder-alibi --arch decoder --pos alibi
check decoder-rotary --arch decoder --pos rotary
check decoder-sinusoidal --arch decoder --pos sinusoidal
check decoder-t5 --arch decoder --pos t5
check decoder-learned-adaptive --arch decoder --pos learned --max-positions 32 --adaptive-softmax 100,400
check decoder-none --arch decoder --pos none
check encoder-alibi-offset-roberta --arch encoder --pos alibi-offset --head roberta
check encoder-bialibi-clap --arch encoder --pos bialibi --head clap
check encoder-alibi-onesided --arch encoder --pos alibi-onesided
check encoder-alibi-learned --arch encoder --pos alibi-learned
check encoder-t5 --arch encoder --pos t5
check decoder-kerple-log --arch decoder --pos kerple-log
check encoder-kerple-log --arch encoder --pos kerple-log
check decoder-fire --arch decoder --pos fire
check encoder-fire-roberta --arch encoder --pos fire --head roberta
# The paper's WikiText-103 model at reduced size: adaptive input tied to the adaptive softmax, ReLU,
# no final LayerNorm (--d-model 32 with two tails: widths 8 and 2).
check decoder-paper-wt103 --config paper-wt103 --adaptive-softmax 100,400

# The reference reads the computation from config.json: an edited config no longer matches xtrap.
for edit in "decoder-alibi:a['activation']='relu'" "decoder-alibi:a['layer_norm_eps']=0.1" \
  "decoder-alibi:a['query_scale']*=2" "decoder-alibi:a['final_norm']=False" "decoder-alibi:a['qkv_packing']='k,q,v'" \
  "decoder-alibi:a['embedding_scale']=1.0" "decoder-learned-adaptive:a['adaptive_softmax']['div_value']=2.0" \
  "decoder-paper-wt103:a['activation']='gelu'" "decoder-paper-wt103:a['adaptive_input']['bands'][1]['projection_transposed']=True"; do
  name=${edit%%:*}
  rm -rf "$work/edited" && cp -r "$work/$name-export" "$work/edited"
  "$PYTHON" -c "import json,sys; c=json.load(open(sys.argv[1])); a=c['architecture']; ${edit#*:}; json.dump(c, open(sys.argv[1], 'w'))" \
    "$work/edited/config.json"
  if "$PYTHON" "$here/export_check.py" "$work/edited" "$work/tokens.txt" "$work/$name.f32" >/dev/null 2>&1; then
    echo "config.json edit ${edit#*:} changed nothing: the reference does not read it"
    status=1
  fi
done

# One-line errors, non-zero exit, nothing written.
if "$XTRAP" export "$work/no-such-run" "$work/x" 2>"$work/err"; then echo "export of a missing run succeeded"; status=1; fi
[ "$(wc -l <"$work/err")" = 1 ] || { echo "missing run: not one line:"; cat "$work/err"; status=1; }
[ ! -e "$work/x" ] || { echo "missing run left $work/x"; status=1; }
if "$XTRAP" export "$work/decoder-alibi" "$work/decoder-alibi-export" 2>"$work/err"; then
  echo "export over a non-empty OUT succeeded"
  status=1
fi
grep -q "not an empty directory" "$work/err" && [ "$(wc -l <"$work/err")" = 1 ] || { cat "$work/err"; status=1; }
exit $status
