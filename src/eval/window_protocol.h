#pragma once
// The windowing protocols of the tools a user may compare xtrap with, as named presets over the
// same token stream, so a difference between two numbers can be traced to the windows rather than
// the model (docs/evaluation.md, "Protocols"). Torch-free.
//
// Every protocol is expressed over the prefixed stream x' = c x (N + 1 tokens) that xtrap scores
// (eval/windows.h): c is the context token (a word-level run's <eos>; a pretrained model's bos,
// else its eos), x the N tokens of the text. A window feeds the inputs x'[start, start + length),
// the first of them replaced by c where contextFirst, and scores the predictions made at window
// positions [scoreFrom, scoreTo): position p predicts x'[start + p + 1] = x[start + p].
//  - xtrap: eval/windows.h's non-overlapping or sliding windows (every token scored once);
//  - llama.cpp (tools/perplexity): x' is llama.cpp's tokens with the bos its tokenizer adds; chunks
//    of n_ctx = Lvalid, floor((N + 1) / n_ctx) of them, the rest dropped; each chunk's first token
//    replaced by c; predictions at positions [n_ctx/2, n_ctx - 1) scored (n_ctx - 1 - n_ctx/2 a
//    chunk); at least two chunks (N + 1 >= 2 n_ctx);
//  - lm-eval (loglikelihood_rolling: get_rolling_token_windows with context_len 1 and
//    make_disjoint_window): each document alone, its first window c + its first min(Lvalid, n) - 1
//    tokens scoring all of them, then disjoint windows of Lvalid predictions, each fed the Lvalid
//    tokens before its last target (the last, shorter one keeps a full window of context);
//  - strided (Hugging Face's perplexity guide, YaRN's eval/perplexity.py): windows over x (no
//    context token) starting every S tokens, the last S targets of each scored (the first window:
//    all it can predict); with bos, c is put before each window's Lvalid - 1 tokens (YaRN's
//    add_start_token) so every window's first token is predicted too; without it a window's first
//    token is never predicted (the labels' shift), so the stream's first token is not scored.
#include <cstdint>
#include <string>
#include <vector>

namespace xtrap {

enum class WindowProtocol { Xtrap, LlamaCpp, LmEval, Strided };

WindowProtocol parseWindowProtocol(const std::string& name);  // one-line error listing the names
std::vector<std::string> windowProtocolNames();

struct ProtocolWindow {
  int64_t start = 0;
  int64_t length = 0;
  int64_t scoreFrom = 0;
  int64_t scoreTo = 0;
  bool contextFirst = false;
  bool operator==(const ProtocolWindow& o) const {
    return start == o.start && length == o.length && scoreFrom == o.scoreFrom && scoreTo == o.scoreTo &&
           contextFirst == o.contextFirst;
  }
};

struct WindowPlan {
  WindowProtocol protocol = WindowProtocol::Xtrap;
  int64_t Lvalid = 512;
  int64_t stride = 0;  // xtrap (sliding) and strided; 0 = Lvalid
  bool bos = false;    // strided: the context token before each window
  // lm-eval: the documents, document d being x[documentStarts[d], documentStarts[d + 1]) (ascending,
  // the first 0; data/text_documents.h); empty = one document.
  std::vector<int64_t> documentStarts;
};

// The windows over a stream of N tokens (x, not counting c). One-line errors: a stride outside
// [1, Lvalid] (strided with bos: [1, Lvalid - 1]), llama.cpp with fewer than 2 Lvalid tokens.
std::vector<ProtocolWindow> protocolWindows(const WindowPlan& plan, int64_t streamLength);

// What a row scored under `plan` prints: the window length, stride, scored part, context token
// (`context`, its text) and document handling, in a few words without commas.
std::string protocolDescription(const WindowPlan& plan, const std::string& context);

}  // namespace xtrap
