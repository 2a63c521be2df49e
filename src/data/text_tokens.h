#pragma once
// Any UTF-8 text tokenized by a pretrained model's tokenizer (tokenizer.h),
// and the counts that make models with different tokenizers comparable.
// The ids are cached beside the text as `<file>.xtrap-bpe-code<N>-<tokenizer digest>.bin`, N the
// tokenizer code's version (Tokenizer::kCodeVersion: a cache made before a tokenizer fix is not
// found), the digest the tokenizer.json's (like the word-level token cache, token_cache.h):
// "XTRAPBPE", format version, the text's size and fnv1a64, the id count, the ids (int32
// little-endian). A cache that does not match the text, or holds an id outside the tokenizer, is
// rebuilt; a directory that cannot be written means no cache.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace xtrap {

// What bits per byte and word-level perplexity divide by. bytes: UTF-8 bytes of the text scored.
// words: whitespace-separated words (space, tab, CR, LF) plus one per line end, WikiText's count
// (its words and one <eos> a line), so one text gives one word count whatever the tokenizer.
struct TextCounts {
  int64_t bytes = 0;
  int64_t words = 0;
};
TextCounts countText(std::string_view text);

// lm-evaluation-harness's counts of one WikiText document's page (its wikitext task's
// process_results): words = len(re.split(r"\s+", page)), so a page that starts or ends with
// whitespace counts an empty word there, and Python's Unicode whitespace separates (U+00A0 and the
// other Unicode spaces included); bytes = the page's UTF-8 bytes.
TextCounts harnessPageCounts(std::string_view page);

// A text file to score, and whether it is WikiText's tokenized text, which the tokenizer reads
// detokenized (data/wikitext_detokenizer.h).
struct TextSource {
  std::filesystem::path file;
  bool detokenize = false;
};

struct TokenizedText {
  std::vector<int32_t> ids;
  // Of the whole file as written, before any detokenization: what lm-evaluation-harness divides
  // by, and what a word-level run of the same file counts.
  TextCounts counts;
};

// Reads the file (UTF-8; a one-line error naming it otherwise), detokenizes it where `source`
// says, and tokenizes it, through the cache (a detokenized text's cache is named
// `<file>.xtrap-bpe-detok-code<N>-<digest>.bin`).
TokenizedText tokenizeTextFile(const TextSource& source, const Tokenizer& tokenizer);

// The text a WikiText directory gives for `split`: wiki.<split>.raw when present (the raw
// release, as it is), else wiki.<split>.tokens, detokenized; for a tokenizer of WikiText's own
// words (`wordLevel`: a WordLevel vocabulary, Tokenizer::wordLevel), wiki.<split>.tokens as it is.
TextSource wikiTextSplitSource(const std::filesystem::path& dir, const std::string& split, bool wordLevel);

}  // namespace xtrap
