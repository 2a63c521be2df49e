#pragma once
// The text a pretrained model (run/pretrained_config.h) reads, for evaluation and for attention
// probes: a UTF-8 file, else the split of a WikiText directory (raw as it is, tokenized files
// detokenized: data/text_tokens.h), tokenized by the model directory's tokenizer.json. Torch-free.
#include <memory>
#include <string>
#include <vector>

#include "data/mlm_masking.h"
#include "data/text_tokens.h"
#include "data/tokenizer.h"
#include "run/run_directory.h"

namespace xtrap {

struct PretrainedText {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const std::vector<int32_t>> ids;
  TextCounts counts;         // of the whole file as written (text_tokens.h)
  bool detokenized = false;  // WikiText's tokenized file, read detokenized
};

// `textFile` when not empty, else `dataDir`'s `split`. One-line errors: neither given (naming
// both options) when `textRequired`, else the tokenizer and no text; a tokenizer with more ids
// than the model's embedding has rows, and those of tokenizeTextFile.
PretrainedText loadPretrainedText(const RunInfo& run, const std::string& textFile, const std::string& dataDir,
                                  const std::string& split, bool textRequired = true);

// A pretrained encoder's masked-LM tokens from its tokenizer.json: [MASK] (or <mask>); the
// post-processor's frame, one token before the text and one after ([CLS] ... [SEP], <s> ... </s>),
// which wraps every window; and every id of the tokenizer as a random replacement, as Hugging
// Face's DataCollatorForLanguageModeling draws it (torch.randint(len(tokenizer))). One-line errors
// name the file: no mask token, a frame of another shape.
MlmTokens pretrainedMlmTokens(const Tokenizer& tokenizer, const std::string& file);

}  // namespace xtrap
