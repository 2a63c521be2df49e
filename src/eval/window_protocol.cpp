#include "eval/window_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "eval/windows.h"

namespace xtrap {

namespace {

const std::vector<std::pair<WindowProtocol, std::string>>& protocolTable() {
  static const std::vector<std::pair<WindowProtocol, std::string>> table{{WindowProtocol::Xtrap, "xtrap"},
                                                                         {WindowProtocol::LlamaCpp, "llama.cpp"},
                                                                         {WindowProtocol::LmEval, "lm-eval"},
                                                                         {WindowProtocol::Strided, "strided"}};
  return table;
}

// llama.cpp's tools/perplexity: chunks of n_ctx over its tokens (x' here: bos included), the first
// token of each replaced by bos, the predictions from n_ctx/2 to n_ctx - 2 scored.
std::vector<ProtocolWindow> llamaCppWindows(int64_t nCtx, int64_t streamLength) {
  int64_t tokens = streamLength + 1;
  if (tokens < 2 * nCtx)
    throw std::invalid_argument(fmt::format(
        "--protocol llama.cpp needs at least 2 * Lvalid = {} tokens (c + the text: {}), as llama-perplexity does",
        2 * nCtx, tokens));
  std::vector<ProtocolWindow> windows;
  for (int64_t chunk = 0; chunk < tokens / nCtx; ++chunk)
    windows.push_back({chunk * nCtx, nCtx, nCtx / 2, nCtx - 1, true});
  return windows;
}

// lm-evaluation-harness's rolling windows of one document x[first, first + n) (context_len 1).
void appendDocumentWindows(int64_t first, int64_t n, int64_t maxLength, std::vector<ProtocolWindow>& windows) {
  if (n <= 0) return;
  int64_t firstLength = std::min(maxLength, n);  // [prefix] + t[0, firstLength - 1) predicts t[0, firstLength)
  windows.push_back({first, firstLength, 0, firstLength, true});
  for (int64_t predicted = firstLength; predicted < n;) {
    int64_t predict = std::min(n - predicted, maxLength);
    int64_t end = predicted + predict;  // the inputs t[end - maxLength - 1, end - 1) = x'[first + end - maxLength, ...)
    windows.push_back({first + end - maxLength, maxLength, maxLength - predict, maxLength, false});
    predicted = end;
  }
}

// Hugging Face's strided loop over x (prev_end_loc, trg_len, labels shifted by one); with bos,
// YaRN's: the context token before each window's Lvalid - 1 tokens.
std::vector<ProtocolWindow> stridedWindows(int64_t Lvalid, int64_t stride, bool bos, int64_t streamLength) {
  int64_t windowTokens = bos ? Lvalid - 1 : Lvalid;  // tokens of x a window holds
  if (windowTokens < 1 || stride < 1 || stride > windowTokens)
    throw std::invalid_argument(fmt::format("--protocol strided{} needs 1 <= stride <= {}", bos ? " with bos" : "",
                                            std::max<int64_t>(windowTokens, 1)));
  std::vector<ProtocolWindow> windows;
  int64_t previousEnd = 0;
  for (int64_t begin = 0; begin < streamLength; begin += stride) {
    int64_t end = std::min(begin + windowTokens, streamLength);
    int64_t targets = end - previousEnd;  // trg_len: the window's last `targets` labels
    int64_t length = end - begin + (bos ? 1 : 0);
    // Label q (an input position) is predicted at q - 1; position 0 is never a label.
    int64_t firstLabel = std::max<int64_t>(1, length - targets);
    windows.push_back({bos ? begin : begin + 1, length, firstLabel - 1, length - 1, bos});
    previousEnd = end;
    if (end == streamLength) break;
  }
  return windows;
}

}  // namespace

WindowProtocol parseWindowProtocol(const std::string& name) {
  for (const auto& [p, n] : protocolTable())
    if (n == name) return p;
  std::string names;
  for (const auto& n : windowProtocolNames()) names += (names.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown --protocol '" + name + "' (valid: " + names + ")");
}

std::vector<std::string> windowProtocolNames() {
  std::vector<std::string> names;
  for (const auto& entry : protocolTable()) names.push_back(entry.second);
  return names;
}

std::vector<ProtocolWindow> protocolWindows(const WindowPlan& plan, int64_t streamLength) {
  int64_t L = plan.Lvalid;
  if (L < 1) throw std::invalid_argument("windows need Lvalid >= 1");
  int64_t stride = plan.stride > 0 ? plan.stride : L;
  switch (plan.protocol) {
    case WindowProtocol::Xtrap: {
      std::vector<ProtocolWindow> windows;
      for (const EvalWindow& w : decoderWindows(streamLength, L, stride))
        windows.push_back({w.start, w.length, w.scoreFrom, w.length, false});
      return windows;
    }
    case WindowProtocol::LlamaCpp:
      return llamaCppWindows(L, streamLength);
    case WindowProtocol::LmEval: {
      std::vector<int64_t> starts = plan.documentStarts.empty() ? std::vector<int64_t>{0} : plan.documentStarts;
      std::vector<ProtocolWindow> windows;
      for (size_t d = 0; d < starts.size(); ++d) {
        int64_t end = d + 1 < starts.size() ? starts[d + 1] : streamLength;
        appendDocumentWindows(starts[d], end - starts[d], L, windows);
      }
      return windows;
    }
    case WindowProtocol::Strided:
      return stridedWindows(L, stride, plan.bos, streamLength);
  }
  throw std::logic_error("protocolWindows: unknown protocol");
}

std::string protocolDescription(const WindowPlan& plan, const std::string& context) {
  int64_t L = plan.Lvalid, S = plan.stride > 0 ? plan.stride : L;
  switch (plan.protocol) {
    case WindowProtocol::Xtrap:
      return S == L ? fmt::format("xtrap: windows of {} every {}; every token scored once; {} before the stream", L, S,
                                  context)
                    : fmt::format(
                          "xtrap: windows of {} every {}; last {} scored (first window all); {} before the "
                          "stream",
                          L, S, S, context);
    case WindowProtocol::LlamaCpp:
      return fmt::format(
          "llama.cpp: chunks of {}; positions {}..{} scored; first token of each chunk -> {}; "
          "remainder dropped",
          L, L / 2, L - 2, context);
    case WindowProtocol::LmEval:
      return fmt::format("lm-eval: each document alone; rolling disjoint windows of {}; all scored; prefix {}", L,
                         context);
    case WindowProtocol::Strided:
      return plan.bos ? fmt::format("strided: {} + {} tokens every {}; last {} scored (first window all)", context,
                                    L - 1, S, S)
                      : fmt::format(
                            "strided: windows of {} every {}; last {} scored (first window all but its first); "
                            "no context token",
                            L, S, S);
  }
  throw std::logic_error("protocolDescription: unknown protocol");
}

}  // namespace xtrap
