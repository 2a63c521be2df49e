#!/usr/bin/env python3
"""eval --protocol against small re-implementations of each tool's windowing (ctest protocol_check).

Each reference below follows its tool's own loop over token ids (llama.cpp tools/perplexity's
perplexity(), lm-evaluation-harness's get_rolling_token_windows + make_disjoint_window + HFLM's
concatenation, Hugging Face's strided perplexity guide, YaRN's eval/perplexity.py with
add_start_token, and xtrap's fairseq-style windows), written from their descriptions, not from
xtrap's code. Every token of a synthetic stream is unique, so a scored label names its position;
each label gets a loss that depends on the target, the length of the context it is predicted from
and that context's first token. The per-token losses summed over the labels each tool scores must
equal the sum over the windows xtrap's protocol_windows prints, to 1e-9, with the same count.

usage: protocol_check.py PROTOCOL_WINDOWS_BINARY
"""
import math
import subprocess
import sys

C = 1  # the context token: bos for llama.cpp / lm-eval / YaRN, <eos> before xtrap's stream


def ids(n):
    return [100 + i for i in range(n)]


def loss(target, context):
    """A per-token loss that differs with the target, the context length and the context's first token."""
    return math.sin(0.37 * target + 1.0) ** 2 + 0.013 * len(context) + (0.5 if context[0] == C else 0.002 * context[0])


def xtrap_labels(x, L, S):
    tokens = [C] + x
    out, covered, s = [], 0, 0
    while covered < len(x):
        T = min(L, len(x) - s)
        inp = tokens[s:s + T]
        for p in range(max(0, covered - s), T):
            out.append((tokens[s + p + 1], inp[:p + 1]))
        covered = s + T
        s += S
    return out


def llama_cpp_labels(x, n_ctx):
    tokens = [C] + x  # common_tokenize(..., add_special=true) with a bos-adding vocabulary
    if len(tokens) < 2 * n_ctx:
        return None
    out, first = [], n_ctx // 2
    for i in range(len(tokens) // n_ctx):
        start = i * n_ctx
        batch = tokens[start:start + n_ctx]
        batch[0] = C  # add BOS token for the first batch of each chunk
        for j in range(first, n_ctx - 1):
            out.append((tokens[start + j + 1], batch[:j + 1]))
    return out


def rolling_windows(token_list, prefix_token, max_seq_len, context_len):
    pred_len = max_seq_len - context_len + 1
    predicted = 0
    first_seq_len = min(max_seq_len, len(token_list))
    yield [prefix_token] + token_list[:first_seq_len - 1], token_list[:first_seq_len]
    predicted += first_seq_len
    while predicted < len(token_list):
        window_pred_len = min(len(token_list) - predicted, pred_len)
        window_end = predicted + window_pred_len
        yield token_list[window_end - max_seq_len - 1:window_end - 1], token_list[window_end - window_pred_len:window_end]
        predicted += window_pred_len


def lm_eval_labels(x, L, starts):
    out = []
    bounds = starts + [len(x)]
    for d in range(len(starts)):
        doc = x[bounds[d]:bounds[d + 1]]
        if not doc:
            continue
        for a, b in rolling_windows(doc, C, L, 1):
            a = a[:len(a) - (len(b) - 1)]  # make_disjoint_window
            inp = (a + b)[-(L + 1):][:-1]  # HFLM._loglikelihood_tokens
            offset = len(inp) - len(b)
            for k, target in enumerate(b):
                out.append((target, inp[:offset + k + 1]))
    return out


def strided_labels(x, max_length, stride, add_start_token):
    out = []
    window = max_length - 1 if add_start_token else max_length
    prev_end_loc = 0
    for begin_loc in range(0, len(x), stride):
        end_loc = min(begin_loc + window, len(x))
        trg_len = end_loc - prev_end_loc
        input_ids = x[begin_loc:end_loc]
        if add_start_token:
            input_ids = [C] + input_ids
        labels = [-100] * (len(input_ids) - trg_len) + input_ids[len(input_ids) - trg_len:]
        for q in range(1, len(input_ids)):  # the model shifts labels by one
            if labels[q] != -100:
                out.append((labels[q], input_ids[:q]))
        prev_end_loc = end_loc
        if end_loc == len(x):
            break
    return out


def xtrap_side(binary, protocol, n, L, S, bos, starts):
    args = [binary, protocol, str(n), str(L), str(S), "1" if bos else "0"] + [str(s) for s in starts]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    tokens = [C] + ids(n)
    out = []
    for line in r.stdout.split("\n"):
        if not line:
            continue
        start, length, score_from, score_to, context_first = map(int, line.split())
        inp = tokens[start:start + length]
        if context_first:
            inp[0] = C
        for p in range(score_from, score_to):
            out.append((tokens[start + p + 1], inp[:p + 1]))
    return out, ""


def main():
    binary = sys.argv[1]
    failures, cases = 0, 0
    for n in [1, 5, 16, 17, 20, 33, 64, 100]:
        x = ids(n)
        for L in [1, 2, 3, 8, 16]:
            for S in sorted({s for s in (1, 2, max(1, L // 2), L) if s <= L}):
                cases_here = [("xtrap", S, False, [], xtrap_labels(x, L, S))]
                if S == L:
                    cases_here.append(("llama.cpp", 0, False, [], llama_cpp_labels(x, L)))
                    for starts in [[0], [0, min(n, 3)], [0, min(n, 7), min(n, 12)]]:
                        starts = sorted(set(starts))
                        cases_here.append(("lm-eval", 0, False, starts, lm_eval_labels(x, L, starts)))
                cases_here.append(("strided", S, False, [], strided_labels(x, L, S, False)))
                if S <= L - 1:
                    cases_here.append(("strided", S, True, [], strided_labels(x, L, S, True)))
                for protocol, stride, bos, starts, expected in cases_here:
                    cases += 1
                    got, error = xtrap_side(binary, protocol, n, L, stride, bos, starts)
                    what = f"{protocol} N={n} L={L} S={stride} bos={bos} docs={starts}"
                    if expected is None or got is None:
                        if (expected is None) != (got is None):
                            print(f"FAIL {what}: reference {'refuses' if expected is None else 'scores'}, "
                                  f"xtrap {'refuses: ' + error if got is None else 'scores'}")
                            failures += 1
                        continue
                    sum_expected = math.fsum(loss(t, c) for t, c in expected)
                    sum_got = math.fsum(loss(t, c) for t, c in got)
                    if len(got) != len(expected) or abs(sum_got - sum_expected) > 1e-9:
                        print(f"FAIL {what}: {len(got)} tokens, NLL sum {sum_got:.12f}; "
                              f"reference {len(expected)} tokens, {sum_expected:.12f}")
                        failures += 1
    print(f"protocol_check: {cases - failures}/{cases} cases agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
