#include "eval/pretrained_text.h"

#include <fmt/format.h>

#include <stdexcept>

namespace xtrap {

PretrainedText loadPretrainedText(const RunInfo& run, const std::string& textFile, const std::string& dataDir,
                                  const std::string& split, bool textRequired) {
  auto tokenizerFile = run.dir / "tokenizer.json";
  PretrainedText t;
  t.tokenizer = std::make_shared<const Tokenizer>(Tokenizer::fromFile(tokenizerFile));
  if (t.tokenizer->vocabSize() > run.model.vocabSize)
    throw std::runtime_error(fmt::format("{} has ids up to {}, the model's embedding has {} rows",
                                         tokenizerFile.string(), t.tokenizer->vocabSize() - 1, run.model.vocabSize));
  if (textFile.empty() && dataDir.empty() && !textRequired) {
    t.ids = std::make_shared<const std::vector<int32_t>>();
    return t;
  }
  if (textFile.empty() && dataDir.empty())
    throw std::invalid_argument(run.dir.string() + " is a pretrained model: give --text FILE or --data DIR to score");
  TextSource source = !textFile.empty() ? TextSource{textFile, false} : wikiTextSplitSource(dataDir, split);
  TokenizedText tokenized = tokenizeTextFile(source, *t.tokenizer);
  t.ids = std::make_shared<const std::vector<int32_t>>(std::move(tokenized.ids));
  t.counts = tokenized.counts;
  t.detokenized = source.detokenize;
  return t;
}

}  // namespace xtrap
