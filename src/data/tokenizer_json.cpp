// Reading a tokenizer.json into a Tokenizer (declared in tokenizer.h). Every field is
// type-checked here, so that a damaged or hostile file ends in one std::runtime_error naming the
// file and what is wrong, never in a crash or in tokenization that differs from Hugging Face's.
#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/tokenizer.h"
#include "data/word_level_model.h"
#include "data/wordpiece_model.h"
#include "util/fnv1a64.h"

namespace xtrap {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument(what); }

[[noreturn]] void unsupported(const std::string& what, const std::string& supported) {
  fail(fmt::format("{} is not supported (supported: {})", what, supported));
}

const json& member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) fail(where + " is not a JSON object");
  auto it = object.find(key);
  if (it == object.end()) fail(fmt::format("{} has no \"{}\"", where, key));
  return *it;
}

bool flag(const json& object, const char* key, const std::string& where, std::optional<bool> fallback) {
  auto it = object.find(key);
  if (it == object.end() || (it->is_null() && fallback)) {
    if (!fallback) fail(fmt::format("{} has no \"{}\"", where, key));
    return *fallback;
  }
  if (!it->is_boolean()) fail(fmt::format("{}'s \"{}\" is not true or false", where, key));
  return it->get<bool>();
}

const std::string& text(const json& value, const std::string& what) {
  if (!value.is_string()) fail(what + " is not a string");
  return value.get_ref<const std::string&>();
}

std::optional<std::string> optionalText(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  return text(*it, fmt::format("{}'s \"{}\"", where, key));
}

int32_t tokenIdValue(const json& value, const std::string& what) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() > std::numeric_limits<int32_t>::max())
    fail(what + " is not an id (an integer from 0 to 2^31-1)");
  return static_cast<int32_t>(value.get<int64_t>());
}

// `component`'s type, or "" for null.
std::string typeOf(const json& component, const std::string& where) {
  if (component.is_null()) return "";
  return text(member(component, "type", where), where + "'s type");
}

const json& array(const json& object, const char* key, const std::string& where) {
  const json& value = member(object, key, where);
  if (!value.is_array()) fail(fmt::format("{}'s \"{}\" is not an array", where, key));
  return value;
}

// A pattern {"String": ...} or {"Regex": ...} (Split's, Replace's), compiled.
std::shared_ptr<const UnicodeRegex> pattern(const json& object, const std::string& where) {
  const json& p = member(object, "pattern", where);
  std::string regex;
  if (p.is_object() && p.size() == 1 && p.contains("String")) {
    regex = UnicodeRegex::escape(text(p["String"], where + "'s String pattern"));
  } else if (p.is_object() && p.size() == 1 && p.contains("Regex")) {
    regex = text(p["Regex"], where + "'s Regex pattern");
  } else {
    fail(where + "'s pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
  }
  try {
    return std::make_shared<const UnicodeRegex>(regex);
  } catch (const std::invalid_argument& e) {
    fail(fmt::format("{}'s pattern: {}", where, e.what()));
  }
}

// One character (Metaspace's replacement, Strip's content), as Hugging Face's `char` fields.
char32_t character(const json& object, const char* key, const std::string& where) {
  const std::string& s = text(member(object, key, where), fmt::format("{}'s \"{}\"", where, key));
  const auto lead = s.empty() ? 0 : static_cast<unsigned char>(s[0]);
  const size_t length = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
  if (s.empty() || s.size() != length) fail(fmt::format("{}'s \"{}\" is not one character", where, key));
  char32_t c = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return c;
}

size_t count(const json& object, const char* key, const std::string& where) {
  const json& value = member(object, key, where);
  if (!value.is_number_unsigned()) fail(fmt::format("{}'s \"{}\" is not a count", where, key));
  return value.get<size_t>();
}

// Metaspace's prepend scheme: "prepend_scheme" (default "always"), or an older file's
// add_prefix_space false meaning "never", as tokenizers reads them.
PrependScheme prependScheme(const json& m, const std::string& where) {
  PrependScheme scheme = PrependScheme::Always;
  if (auto it = m.find("prepend_scheme"); it != m.end()) {
    const std::string& name = text(*it, where + "'s prepend_scheme");
    if (name == "always") {
      scheme = PrependScheme::Always;
    } else if (name == "first") {
      scheme = PrependScheme::First;
    } else if (name == "never") {
      scheme = PrependScheme::Never;
    } else {
      unsupported(fmt::format("Metaspace prepend_scheme \"{}\"", name), "always, first, never");
    }
  }
  if (!flag(m, "add_prefix_space", where, true)) {
    if (scheme != PrependScheme::Never) fail(where + "'s add_prefix_space false does not match its prepend_scheme");
    scheme = PrependScheme::Never;
  }
  return scheme;
}

}  // namespace

struct TokenizerJsonReader {
  const json& root;
  Tokenizer& tokenizer;

  void normalizer(const json& n, Normalizer& steps) {
    const std::string type = typeOf(n, "normalizer");
    if (type.empty()) return;
    if (type == "NFC") {
      steps.addNfc();
    } else if (type == "Prepend") {
      steps.addPrepend(text(member(n, "prepend", "Prepend normalizer"), "Prepend's prepend"));
    } else if (type == "Replace") {
      steps.addReplace(pattern(n, "Replace normalizer"),
                       text(member(n, "content", "Replace normalizer"), "Replace's content"));
    } else if (type == "BertNormalizer") {
      const std::string where = "BertNormalizer";
      BertNormalizerSettings bert;
      bert.cleanText = flag(n, "clean_text", where, true);
      bert.chineseChars = flag(n, "handle_chinese_chars", where, true);
      bert.lowercase = flag(n, "lowercase", where, true);
      bert.stripAccents = flag(n, "strip_accents", where, bert.lowercase);  // null: as lowercase
      steps.addBert(bert);
    } else if (type == "Sequence") {
      for (const json& inner : array(n, "normalizers", "normalizer Sequence")) normalizer(inner, steps);
    } else {
      unsupported(fmt::format("normalizer \"{}\"", type), "null, NFC, Prepend, Replace, BertNormalizer, Sequence");
    }
  }

  void preTokenizer(const json& p, PreTokenizer& steps) {
    const std::string type = typeOf(p, "pre_tokenizer");
    if (type.empty()) return;
    if (type == "ByteLevel") {
      steps.addByteLevel(flag(p, "add_prefix_space", "ByteLevel pre_tokenizer", std::nullopt),
                         flag(p, "use_regex", "ByteLevel pre_tokenizer", true));
    } else if (type == "Split") {
      const std::string& behavior = text(member(p, "behavior", "Split pre_tokenizer"), "Split's behavior");
      static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
          {"Removed", SplitBehavior::Removed},
          {"Isolated", SplitBehavior::Isolated},
          {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
          {"MergedWithNext", SplitBehavior::MergedWithNext},
          {"Contiguous", SplitBehavior::Contiguous}};
      const std::pair<const char*, SplitBehavior>* found = nullptr;
      for (const auto& b : kBehaviors)
        if (behavior == b.first) found = &b;
      if (!found)
        unsupported(fmt::format("Split behavior \"{}\"", behavior),
                    "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
      steps.addSplit(pattern(p, "Split"), found->second, flag(p, "invert", "Split pre_tokenizer", std::nullopt));
    } else if (type == "Metaspace") {
      const std::string where = "Metaspace pre_tokenizer";
      steps.addMetaspace(text(member(p, "replacement", where), where + "'s replacement"), prependScheme(p, where),
                         flag(p, "split", where, true));
    } else if (type == "BertPreTokenizer") {
      steps.addBert();
    } else if (type == "WhitespaceSplit") {
      // Rust's char::is_whitespace: Unicode's White_Space, which UnicodeRegex's \s is.
      static const auto whiteSpace = std::make_shared<const UnicodeRegex>("\\s");
      steps.addSplit(whiteSpace, SplitBehavior::Removed, false);
    } else if (type == "Sequence") {
      for (const json& inner : array(p, "pretokenizers", "pre_tokenizer Sequence")) preTokenizer(inner, steps);
    } else {
      unsupported(fmt::format("pre_tokenizer \"{}\"", type),
                  "null, ByteLevel, Split, Metaspace, BertPreTokenizer, WhitespaceSplit, Sequence");
    }
  }

  // The vocab object of a model: token -> id, every id of one token (what decode maps it back to).
  std::unordered_map<std::string, int32_t> vocabulary(const json& m, const std::string& where) {
    const json& vocabJson = member(m, "vocab", where);
    if (!vocabJson.is_object()) fail(where + "'s vocab is not a JSON object");
    std::unordered_map<std::string, int32_t> vocab;
    vocab.reserve(vocabJson.size());
    for (auto it = vocabJson.begin(); it != vocabJson.end(); ++it) {
      const int32_t id = tokenIdValue(it.value(), fmt::format("the vocab's value of \"{}\"", it.key()));
      auto [previous, fresh] = tokenizer.tokenOfId_.emplace(id, it.key());
      if (!fresh) fail(fmt::format("the vocab gives id {} to both \"{}\" and \"{}\"", id, previous->second, it.key()));
      vocab.emplace(it.key(), id);
    }
    return vocab;
  }

  void wordPiece(const json& m) {
    const std::string where = "WordPiece model";
    WordPieceSettings settings;
    settings.unkToken = optionalText(m, "unk_token", where).value_or(settings.unkToken);
    settings.continuingSubwordPrefix =
        optionalText(m, "continuing_subword_prefix", where).value_or(settings.continuingSubwordPrefix);
    if (m.contains("max_input_chars_per_word"))
      settings.maxInputCharsPerWord = count(m, "max_input_chars_per_word", where);
    tokenizer.model_ = std::make_shared<const WordPieceModel>(vocabulary(m, where), std::move(settings));
  }

  void model(const json& m) {
    const std::string type = typeOf(m, "model");
    if (type == "WordPiece") {
      wordPiece(m);
      return;
    }
    if (type == "WordLevel") {
      const std::string where = "WordLevel model";
      tokenizer.model_ = std::make_shared<const WordLevelModel>(vocabulary(m, where),
                                                                optionalText(m, "unk_token", where).value_or("<unk>"));
      tokenizer.wordLevel_ = true;
      return;
    }
    if (type != "BPE") unsupported(fmt::format("model \"{}\"", type), "BPE, WordPiece, WordLevel");
    const std::string where = "BPE model";
    auto dropout = m.find("dropout");
    if (dropout != m.end() && !dropout->is_null()) {
      if (!dropout->is_number()) fail("BPE dropout is not a number");
      if (dropout->get<double>() != 0.0) unsupported("BPE dropout (random merges)", "null or 0");
    }
    BpeSettings settings;
    settings.unkToken = optionalText(m, "unk_token", where);
    settings.fuseUnk = flag(m, "fuse_unk", where, false);
    settings.ignoreMerges = flag(m, "ignore_merges", where, false);
    settings.continuingSubwordPrefix = optionalText(m, "continuing_subword_prefix", where).value_or("");
    settings.endOfWordSuffix = optionalText(m, "end_of_word_suffix", where).value_or("");
    settings.byteFallback = flag(m, "byte_fallback", where, false);

    std::unordered_map<std::string, int32_t> vocab = vocabulary(m, where);

    std::vector<std::pair<std::string, std::string>> merges;
    const json& mergesJson = array(m, "merges", where);
    merges.reserve(mergesJson.size());
    const bool pairs = mergesJson.empty() || mergesJson.front().is_array();
    for (const json& merge : mergesJson) {
      if (pairs) {
        if (!merge.is_array() || merge.size() != 2 || !merge[0].is_string() || !merge[1].is_string())
          fail(fmt::format("BPE merge {} is not a pair of strings", merges.size() + 1));
        merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
        continue;
      }
      const std::string& line = text(merge, fmt::format("BPE merge {}", merges.size() + 1));
      if (line.rfind("#version", 0) == 0) continue;  // a merges.txt header kept in the list
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        fail(fmt::format("BPE merge {} (\"{}\") is not two tokens separated by one space", merges.size() + 1, line));
      merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    }
    tokenizer.model_ = std::make_shared<const BpeModel>(std::move(vocab), merges, std::move(settings));
  }

  // Hugging Face gives an added token the id its content has in the vocabulary, else the next
  // free one from the vocabulary's size (the file's "id" is only checked there by a warning).
  void addedTokens() {
    auto list = root.find("added_tokens");
    if (list == root.end() || list->is_null()) {
      finishAddedTokens({});
      return;
    }
    if (!list->is_array()) fail("added_tokens is not an array");
    std::map<int32_t, AddedToken> byId;
    int64_t nextId = static_cast<int64_t>(tokenizer.model_->vocabSize());
    for (const json& entry : *list) {
      const std::string where = fmt::format("added token {}", byId.size() + 1);
      AddedToken token;
      token.content = text(member(entry, "content", where), where + "'s content");
      token.special = flag(entry, "special", where, false);
      token.singleWord = flag(entry, "single_word", where, false);
      token.lstrip = flag(entry, "lstrip", where, false);
      token.rstrip = flag(entry, "rstrip", where, false);
      token.normalized = flag(entry, "normalized", where, !token.special);
      if (token.content.empty()) continue;
      std::optional<int32_t> id;
      auto known = tokenizer.addedIds_.find(token.content);
      if (known != tokenizer.addedIds_.end()) id = known->second;
      if (!id) id = tokenizer.model_->tokenId(token.content);
      if (!id) {
        if (nextId > std::numeric_limits<int32_t>::max()) fail("too many added tokens");
        id = static_cast<int32_t>(nextId++);
      }
      token.id = *id;
      tokenizer.addedIds_[token.content] = *id;
      byId[*id] = token;
    }
    finishAddedTokens(byId);
  }

  void finishAddedTokens(const std::map<int32_t, AddedToken>& byId) {
    std::vector<AddedTokenMatcher::Pattern> raw, normalized;
    for (const auto& [id, token] : byId) {
      // What the token matches in the normalized text, and what decode gives for it.
      const std::string form = token.normalized ? tokenizer.normalizer_->apply(token.content) : token.content;
      tokenizer.tokenOfId_[id] = form;
      (token.normalized ? normalized : raw).push_back({form, token});
    }
    tokenizer.rawAddedTokens_ = std::make_shared<const AddedTokenMatcher>(std::move(raw));
    tokenizer.normalizedAddedTokens_ = std::make_shared<const AddedTokenMatcher>(std::move(normalized));
  }

  void postProcessor(const json& p) {
    const std::string type = typeOf(p, "post_processor");
    if (type.empty() || type == "ByteLevel") return;  // ByteLevel only trims offsets
    if (type == "Sequence") {
      for (const json& inner : array(p, "processors", "post_processor Sequence")) postProcessor(inner);
      return;
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      // [CLS] A [SEP] (BERT), <s> A </s> (RoBERTa): a single sequence between the two; RoBERTa's
      // trim_offsets and add_prefix_space change offsets only.
      auto special = [&](const char* key) {
        const json& pair = member(p, key, type);
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string())
          fail(fmt::format("{}'s {} is not [token, id]", type, key));
        int32_t id = tokenIdValue(pair[1], fmt::format("{}'s {} id", type, key));
        if (!tokenizer.tokenOfId_.count(id)) fail(fmt::format("{}'s {} has id {}, which no token has", type, key, id));
        return Tokenizer::TemplatePiece{false, {id}};
      };
      tokenizer.templates_.push_back({special("cls"), {true, {}}, special("sep")});
      return;
    }
    if (type != "TemplateProcessing")
      unsupported(fmt::format("post_processor \"{}\"", type),
                  "null, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing, Sequence");
    const json& specials = member(p, "special_tokens", "TemplateProcessing");
    std::vector<Tokenizer::TemplatePiece> pieces;
    for (const json& piece : array(p, "single", "TemplateProcessing")) {
      if (!piece.is_object() || piece.size() != 1)
        fail("a TemplateProcessing piece is not {\"SpecialToken\"|\"Sequence\": ...}");
      if (piece.contains("Sequence")) {
        if (text(member(piece["Sequence"], "id", "template Sequence"), "template Sequence id") != "A")
          unsupported("a single template's Sequence other than A", "A");
        pieces.push_back({true, {}});
      } else if (piece.contains("SpecialToken")) {
        const std::string& name =
            text(member(piece["SpecialToken"], "id", "template SpecialToken"), "template SpecialToken id");
        const json& special = member(specials, name.c_str(), "TemplateProcessing's special_tokens");
        Tokenizer::TemplatePiece out{false, {}};
        for (const json& id : array(special, "ids", "special token " + name)) {
          out.ids.push_back(tokenIdValue(id, "special token " + name + "'s id"));
          if (!tokenizer.tokenOfId_.count(out.ids.back()))
            fail(fmt::format("TemplateProcessing's special token {} has id {}, which no token has", name,
                             out.ids.back()));
        }
        pieces.push_back(std::move(out));
      } else {
        fail("a TemplateProcessing piece is not {\"SpecialToken\"|\"Sequence\": ...}");
      }
    }
    tokenizer.templates_.push_back(std::move(pieces));
  }

  void decoder(const json& d, TokenDecoder& steps) {
    const std::string type = typeOf(d, "decoder");
    if (type.empty()) {
      steps.addSpaceJoin();  // Hugging Face's decode without a decoder: tokens.join(" ")
    } else if (type == "ByteLevel") {
      steps.addByteLevel();
    } else if (type == "Metaspace") {
      const std::string where = "Metaspace decoder";
      steps.addMetaspace(character(d, "replacement", where), prependScheme(d, where) != PrependScheme::Never);
    } else if (type == "Replace") {
      steps.addReplace(pattern(d, "Replace decoder"),
                       text(member(d, "content", "Replace decoder"), "Replace's content"));
    } else if (type == "ByteFallback") {
      steps.addByteFallback();
    } else if (type == "Fuse") {
      steps.addFuse();
    } else if (type == "Strip") {
      steps.addStrip(character(d, "content", "Strip decoder"), count(d, "start", "Strip decoder"),
                     count(d, "stop", "Strip decoder"));
    } else if (type == "WordPiece") {
      steps.addWordPiece(optionalText(d, "prefix", "WordPiece decoder").value_or("##"),
                         flag(d, "cleanup", "WordPiece decoder", true));
    } else if (type == "Sequence") {
      for (const json& inner : array(d, "decoders", "decoder Sequence")) decoder(inner, steps);
    } else {
      unsupported(fmt::format("decoder \"{}\"", type),
                  "null, ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece, Sequence");
    }
  }

  void read() {
    if (!root.is_object()) fail("is not a JSON object");
    auto version = root.find("version");
    if (version != root.end() && text(*version, "version") != "1.0")
      unsupported(fmt::format("version \"{}\"", version->get<std::string>()), "1.0");
    for (const char* key : {"truncation", "padding"}) {
      auto it = root.find(key);
      if (it != root.end() && !it->is_null()) unsupported(fmt::format("{} (it changes encode's ids)", key), "null");
    }
    auto normalizerSteps = std::make_shared<Normalizer>();
    normalizer(root.value("normalizer", json()), *normalizerSteps);
    tokenizer.normalizer_ = std::move(normalizerSteps);
    auto steps = std::make_shared<PreTokenizer>();
    preTokenizer(root.value("pre_tokenizer", json()), *steps);
    tokenizer.preTokenizer_ = std::move(steps);
    model(member(root, "model", "the file"));
    addedTokens();
    postProcessor(root.value("post_processor", json()));
    auto decoderSteps = std::make_shared<TokenDecoder>();
    decoder(root.value("decoder", json()), *decoderSteps);
    tokenizer.decoder_ = std::move(decoderSteps);
    int64_t largest = -1;
    for (const auto& [id, token] : tokenizer.tokenOfId_) largest = std::max<int64_t>(largest, id);
    if (largest + 1 > std::numeric_limits<int32_t>::max()) fail("an id is too large");
    tokenizer.vocabSize_ = static_cast<int32_t>(largest + 1);
  }
};

Tokenizer Tokenizer::fromJson(std::string_view jsonText, const std::string& source) {
  Tokenizer tokenizer;
  try {
    const json root = json::parse(jsonText.begin(), jsonText.end());
    TokenizerJsonReader{root, tokenizer}.read();
  } catch (const std::exception& e) {  // nlohmann's parse and type errors included
    std::string message = e.what();
    for (char& c : message)
      if (c == '\n' || c == '\r') c = ' ';
    throw std::runtime_error(source + ": " + message);
  }
  tokenizer.digest_ = fmt::format("fnv1a64:{:016x}", fnv1a64(jsonText));
  return tokenizer;
}

Tokenizer Tokenizer::fromFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open the tokenizer file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(path.string() + ": cannot read the tokenizer file");
  return fromJson(bytes, path.string());
}

}  // namespace xtrap
