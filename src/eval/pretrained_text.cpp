#include "eval/pretrained_text.h"

#include <fmt/format.h>

#include <optional>
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
  TextSource source =
      !textFile.empty() ? TextSource{textFile, false} : wikiTextSplitSource(dataDir, split, t.tokenizer->wordLevel());
  TokenizedText tokenized = tokenizeTextFile(source, *t.tokenizer);
  t.ids = std::make_shared<const std::vector<int32_t>>(std::move(tokenized.ids));
  t.counts = tokenized.counts;
  t.detokenized = source.detokenize;
  return t;
}

MlmTokens pretrainedMlmTokens(const Tokenizer& tokenizer, const std::string& file) {
  MlmTokens m;
  std::optional<int32_t> mask = tokenizer.tokenId("[MASK]");
  if (!mask) mask = tokenizer.tokenId("<mask>");
  if (!mask) throw std::runtime_error(file + " has no [MASK] or <mask> token: masked-LM scoring needs one");
  m.maskId = *mask;
  Tokenizer::SpecialFrame frame = tokenizer.specialFrame();
  if (frame.before.size() != 1 || frame.after.size() != 1)
    throw std::runtime_error(fmt::format(
        "{}: its post-processor puts {} token(s) before a text and {} after; xtrap's encoder windows take one each "
        "([CLS] ... [SEP])",
        file, frame.before.size(), frame.after.size()));
  m.bosId = frame.before.front();
  m.eosId = frame.after.front();
  m.replacementWords.resize(size_t(tokenizer.vocabSize()));
  for (int32_t id = 0; id < tokenizer.vocabSize(); ++id) m.replacementWords[size_t(id)] = id;
  return m;
}

}  // namespace xtrap
