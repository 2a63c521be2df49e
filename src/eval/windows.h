#pragma once
// Which tokens each evaluation window scores, for a decoder over a stream x of N tokens.
// As in fairseq, the stream is read after an <eos> (WikiText's line separator), so its first
// token is predicted too: windows index the prefixed stream x' = <eos> x[0..N-1] (N + 1 tokens).
// A window (start s, length T) feeds inputs x'[s, s+T) and predicts x'[s+1, s+T+1) = x[s, s+T);
// it scores the predictions at window positions [scoreFrom, T). Targets are x[0..N-1]: every one
// is scored exactly once (N in total; WikiText-2 valid: 217,646).
//  - non-overlapping (stride = Lvalid): consecutive windows; the last, partial one is kept;
//  - sliding (stride S < Lvalid): windows advance by S; the first scores all its predictions,
//    every later one only those not yet scored (its last S), so every token after the first
//    window has >= Lvalid - S tokens of context (fairseq's --context-window Lvalid - S; Hugging
//    Face's strided perplexity); the first window's tokens have what precedes them in it.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace xtrap {

struct EvalWindow {
  int64_t start = 0;
  int64_t length = 0;
  int64_t scoreFrom = 0;
  bool operator==(const EvalWindow& o) const {
    return start == o.start && length == o.length && scoreFrom == o.scoreFrom;
  }
};

// streamLength = N, the tokens of x (not counting the <eos> prefix).
std::vector<EvalWindow> decoderWindows(int64_t streamLength, int64_t Lvalid, int64_t stride);

}  // namespace xtrap

namespace xtrap {

// Encoder windows over N tokens: [s, min(s + Lvalid, N)) for s = 0, stride, 2*stride, ... until
// one reaches the end (scoreFrom unused). With stride = Lvalid they are non-overlapping.
std::vector<EvalWindow> encoderWindows(int64_t streamLength, int64_t Lvalid, int64_t stride);

// The window in which position p sits farthest from both edges, i.e. maximising
// min(p - start, start + length - 1 - p); ties go to the earlier window. Each masked token is
// scored once, there.
size_t bestEncoderWindow(const std::vector<EvalWindow>& windows, int64_t stride, int64_t p);

}  // namespace xtrap
