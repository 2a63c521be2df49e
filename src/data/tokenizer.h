#pragma once
// A Hugging Face `tokenizer.json` with a BPE model, byte-level (BLOOM's, GPT-NeoX-20B's and so
// MPT's, Llama 3's, DeepSeek-V3's) or SentencePiece-style (Llama 2's, TinyLlama's, Mistral's,
// Gemma's: "▁" for spaces, byte fallback), or a WordPiece model (BERT's, MosaicBERT's, JinaBERT's),
// tokenizing as the Hugging Face tokenizers library does:
//   added tokens found in the raw text (those not `normalized`) -> normalizer -> added tokens
//   found in the normalized text -> pre-tokenizers -> the model on each piece.
// Supported: normalizer null, NFC, Prepend, Replace (String or Regex pattern), BertNormalizer or a
// Sequence of them; pre-tokenizer null, ByteLevel, Split (String or Regex pattern, every behaviour,
// invert), Metaspace (prepend_scheme always, first or never, or the older add_prefix_space; split),
// BertPreTokenizer, WhitespaceSplit and Sequence; model BPE (merges spelled "a b" or ["a", "b"],
// unk_token, fuse_unk, ignore_merges, subword prefix and suffix, byte_fallback with all 256 <0xHH>
// tokens; dropout null or 0) or WordPiece (unk_token, continuing_subword_prefix,
// max_input_chars_per_word) or WordLevel (unk_token); post-processor null, ByteLevel,
// TemplateProcessing, BertProcessing, RobertaProcessing or a Sequence of them; decoder null (tokens
// joined by spaces), ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece or a
// Sequence of them. Anything else in a file is refused by name when it is read. Unicode versions:
// unicode_regex.h, unicode_nfc.h, bert_text.h.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/added_tokens.h"
#include "data/bpe_model.h"
#include "data/normalizer.h"
#include "data/pre_tokenizer.h"
#include "data/token_decoder.h"
#include "data/token_model.h"

namespace xtrap {

class Tokenizer {
 public:
  // The version of what this code makes of a tokenizer.json: raised with every change that alters
  // the ids of some file, so that ids an older xtrap cached (text_tokens.h) are not served. 2: the
  // Unicode versions of Hugging Face's regex classes and NFC (unicode_regex.h, unicode_nfc.h).
  static constexpr int kCodeVersion = 2;

  // Reads a tokenizer.json. Throws std::runtime_error, one line naming the file, for a file that
  // cannot be read, is malformed, or uses something not supported (named).
  static Tokenizer fromFile(const std::filesystem::path& path);
  // The same from the file's text; `source` names it in errors.
  static Tokenizer fromJson(std::string_view json, const std::string& source);

  // The ids of `text` (UTF-8; std::invalid_argument otherwise), without the post-processor's
  // special tokens: Hugging Face's encode(text, add_special_tokens=False). This is what a corpus
  // stream wants (it places document separators itself); for BLOOM and GPT-NeoX, whose
  // post-processor is ByteLevel, it is also what encode with special tokens gives. Added and
  // special tokens written in the text are still recognised, as Hugging Face does.
  std::vector<int32_t> encode(std::string_view text) const;
  // With the post-processor's special tokens: TemplateProcessing's `single` template applied
  // (Hugging Face's default, add_special_tokens=True).
  std::vector<int32_t> encodeWithSpecialTokens(std::string_view text) const;

  // UTF-8 text of `ids` through the file's decoder, special tokens included; bytes that do not
  // form UTF-8 become U+FFFD as in Hugging Face's decode. Throws std::out_of_range for an id no
  // token has (Hugging Face skips it silently).
  std::string decode(const std::vector<int32_t>& ids) const;

  // One more than the largest id of any token (the model's vocabulary and the added tokens): the
  // rows an embedding needs.
  int32_t vocabSize() const { return vocabSize_; }
  // The id of a token string (an added token's content or a vocabulary entry, in the byte-level
  // alphabet: " the" is "Ġthe"; in SentencePiece's, "▁the"), as Hugging Face's token_to_id.
  std::optional<int32_t> tokenId(const std::string& token) const;
  // The special tokens the post-processors' single templates put before and after a text's ids
  // (BERT's [CLS] and [SEP], RoBERTa's <s> and </s>): encodeWithSpecialTokens(t) is
  // before + encode(t) + after.
  struct SpecialFrame {
    std::vector<int32_t> before, after;
  };
  SpecialFrame specialFrame() const;
  // "fnv1a64:<16 hex digits>" of the file's bytes: a cache of token ids made with this file is
  // valid while this is unchanged.
  const std::string& digest() const { return digest_; }
  // A WordLevel model (a word vocabulary such as `xtrap export --hf` writes): it reads WikiText's
  // tokenized text as it is, not detokenized.
  bool wordLevel() const { return wordLevel_; }

  struct TemplatePiece {
    bool sequence;  // the text's ids; otherwise `ids` of a special token
    std::vector<int32_t> ids;
  };

 private:
  Tokenizer() = default;
  void appendIds(std::string_view text, std::vector<int32_t>& ids) const;
  friend struct TokenizerJsonReader;

  std::shared_ptr<const Normalizer> normalizer_;
  std::shared_ptr<const AddedTokenMatcher> rawAddedTokens_, normalizedAddedTokens_;
  std::shared_ptr<const PreTokenizer> preTokenizer_;
  std::shared_ptr<const TokenModel> model_;  // BPE or WordPiece
  std::shared_ptr<const TokenDecoder> decoder_;
  std::vector<std::vector<TemplatePiece>> templates_;   // the post-processors' single templates, in order
  std::unordered_map<std::string, int32_t> addedIds_;   // content -> id
  std::unordered_map<int32_t, std::string> tokenOfId_;  // what decode maps each id to
  int32_t vocabSize_ = 0;
  std::string digest_;
  bool wordLevel_ = false;
};

}  // namespace xtrap
