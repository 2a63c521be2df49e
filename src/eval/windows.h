#pragma once
// Which tokens each evaluation window scores, for a decoder over a stream of N tokens.
// A window (start s, length T) feeds inputs x[s, s+T) and predicts x[s+1, s+T+1); it scores the
// predictions at window positions [scoreFrom, T). Targets are x[1..N-1]: every one is scored
// exactly once (N - 1 in total; the first token has nothing to be predicted from).
//  - non-overlapping (stride = Lvalid): consecutive windows; the last, partial one is kept;
//  - sliding (stride S < Lvalid): windows advance by S; the first scores all its predictions,
//    every later one only those not yet scored (its last S), so each has >= Lvalid - S tokens of
//    context (fairseq's --context-window Lvalid - S; Hugging Face's strided perplexity).
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
