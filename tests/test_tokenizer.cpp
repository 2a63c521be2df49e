// The tokenizer.json reader (byte-level BPE): token ids and decodes against Hugging Face
// tokenizers' own (goldens made by tests/tokenizer/make_goldens.js on GPT-NeoX-20B's real file and
// on variants of it that exercise each supported setting), the byte-level alphabet and the
// UTF-8 repair against hand-derived values, and a one-line error for each unsupported or damaged file.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/text_tokens.h"
#include "data/tokenizer.h"
#include "data/unicode_regex.h"
#include "data/wikitext_detokenizer.h"
#include "error_of.h"
#include "util/fnv1a64.h"

using namespace xtrap;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = "tests/tokenizer";

json readJson(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

// The case's tokenizer.json, edited as make_goldens.js edits it.
std::string caseTokenizerJson(const json& c) {
  const fs::path base = c["base"].get<std::string>();
  json file = readJson(base.is_absolute() ? base : kDir / base);
  for (const auto& [key, value] : c["override"].items()) {
    if (key == "model")
      file["model"].update(value);
    else
      file[key] = value;
  }
  if (c.value("merges_as_pairs", false))
    for (json& merge : file["model"]["merges"]) {
      const std::string line = merge.get<std::string>();
      const size_t space = line.find(' ');
      merge = json::array({line.substr(0, space), line.substr(space + 1)});
    }
  return file.dump();
}

std::vector<int32_t> idsOf(const json& array) { return array.get<std::vector<int32_t>>(); }

// Every string of every case of a goldens file: ids without and with special tokens, decodes.
void checkGoldens(const fs::path& goldensPath) {
  const json goldens = readJson(goldensPath);
  size_t strings = 0;
  for (const json& c : goldens["cases"]) {
    const std::string name = c["name"];
    const Tokenizer tokenizer = Tokenizer::fromJson(caseTokenizerJson(c), name);
    for (const json& s : c["strings"]) {
      const std::string text = s["text"];
      INFO(name << ": \"" << text << "\"");
      const std::vector<int32_t> ids = tokenizer.encode(text);
      CHECK(ids == idsOf(s["ids"]));
      CHECK(tokenizer.encodeWithSpecialTokens(text) == idsOf(s["ids_special"]));
      CHECK(tokenizer.decode(idsOf(s["ids"])) == s["decoded"].get<std::string>());
      const std::vector<int32_t> all = idsOf(s["ids"]);
      const std::vector<int32_t> half(all.begin(), all.begin() + (all.size() + 1) / 2);
      CHECK(tokenizer.decode(half) == s["half_decoded"].get<std::string>());
      ++strings;
    }
  }
  CHECK(strings > 0);
}

Tokenizer neox() { return Tokenizer::fromFile(kDir / "gpt-neox-20b_tokenizer.json"); }

// The NeoX file with `edit` applied, read under the name "edited.json"; returns the error.
std::string errorOfEdited(const std::function<void(json&)>& edit) {
  json file = readJson(kDir / "gpt-neox-20b_tokenizer.json");
  edit(file);
  return test::errorOf([&] { Tokenizer::fromJson(file.dump(), "edited.json"); });
}

}  // namespace

TEST_CASE(
    "tokenizer ids and decodes equal Hugging Face tokenizers' on GPT-NeoX-20B, SentencePiece-style and WordPiece files "
    "and variants") {
  checkGoldens(kDir / "goldens.json");
}

TEST_CASE("tokenizer goldens of a user's own tokenizer.json (XTRAP_TOKENIZER_GOLDENS)") {
  const char* path = std::getenv("XTRAP_TOKENIZER_GOLDENS");
  if (!path) {
    SUCCEED("XTRAP_TOKENIZER_GOLDENS not set: nothing to check");
    return;
  }
  checkGoldens(path);
}

TEST_CASE("tokenizer API on GPT-NeoX-20B: sizes, token ids, digest") {
  const Tokenizer t = neox();
  CHECK(t.vocabSize() == 50277);  // 50,254 vocabulary entries and 23 added runs of spaces (ids to 50276)
  CHECK(t.tokenId("<|endoftext|>") == 0);
  CHECK(t.tokenId("\xC4\xA0the") == 253);  // "Ġthe" in the file
  CHECK(t.tokenId("  ") == 50276);         // an added token, not in the model's vocabulary
  CHECK_FALSE(t.tokenId("not a token").has_value());
  CHECK(t.digest().rfind("fnv1a64:", 0) == 0);
  CHECK(t.digest().size() == 8 + 16);
  std::ifstream in(kDir / "gpt-neox-20b_tokenizer.json");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(Tokenizer::fromJson(bytes, "copy").digest() == t.digest());
  CHECK(Tokenizer::fromJson(bytes + "\n", "copy").digest() != t.digest());
  CHECK(test::errorOf([&] { t.encode("bad \xFF byte"); }) == "text is not valid UTF-8 at byte 4");
  CHECK(test::errorOf([&] { t.decode({50277}); }) == "no token has id 50277");
}

TEST_CASE("a text file's token cache names the tokenizer code's version and a directory is no text") {
  const fs::path dir = fs::temp_directory_path() / "xtrap-test-text-tokens";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "book.txt";
  std::ofstream(file, std::ios::binary) << "Hello world";
  const Tokenizer t = neox();
  const std::string hex = t.digest().substr(t.digest().find(':') + 1);
  // A cache of the layout text_tokens.h describes, well formed and matching the text, but under
  // the name an xtrap before tokenizer code version 2 gave it, holding other ids: not served.
  std::string stale = "XTRAPBPE";
  for (uint64_t v : {uint64_t(1), uint64_t(11), fnv1a64("Hello world"), uint64_t(2)})
    for (int i = 0; i < 8; ++i) stale.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  const int32_t staleIds[2] = {7, 7};
  stale.append(reinterpret_cast<const char*>(staleIds), sizeof staleIds);
  std::ofstream(dir / ("book.txt.xtrap-bpe-" + hex + ".bin"), std::ios::binary) << stale;
  const std::vector<int32_t> helloWorld{12092, 1533};  // Hugging Face's ids (goldens.json)
  CHECK(tokenizeTextFile({file, false}, t).ids == helloWorld);
  CHECK(fs::exists(dir / ("book.txt.xtrap-bpe-code2-" + hex + ".bin")));
  CHECK(tokenizeTextFile({file, false}, t).ids == helloWorld);  // now from that cache
  CHECK(test::errorOf([&] { tokenizeTextFile({dir, false}, t); }) == dir.string() + " is a directory, not a text file");
  fs::remove_all(dir);
}

TEST_CASE("WordLevel with WhitespaceSplit and a null decoder: WikiText's words, <eos> per line end") {
  // What `xtrap export --hf` writes: line ends become " <eos> ", whitespace (Unicode's White_Space,
  // U+00A0 included) splits, an unknown word is <unk>, and decode joins the tokens with spaces.
  json file = {{"version", "1.0"},
               {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", "\n"}}}, {"content", " <eos> "}}},
               {"pre_tokenizer", {{"type", "WhitespaceSplit"}}},
               {"decoder", nullptr},
               {"model",
                {{"type", "WordLevel"},
                 {"vocab", {{"<unk>", 0}, {"<eos>", 1}, {"the", 2}, {"@-@", 3}, {"cat", 4}}},
                 {"unk_token", "<unk>"}}}};
  const Tokenizer t = Tokenizer::fromJson(file.dump(), "word.json");
  CHECK(t.wordLevel());
  CHECK(t.encode("the cat\xC2\xA0@-@\tdog\n the\n") == std::vector<int32_t>{2, 4, 3, 0, 1, 2, 1});
  CHECK(t.encode("  \n\n") == std::vector<int32_t>{1, 1});
  CHECK(t.decode({2, 4, 1, 3}) == "the cat <eos> @-@");
  CHECK(t.vocabSize() == 5);
  file["model"]["unk_token"] = "[UNK]";
  std::string err = test::errorOf([&] { Tokenizer::fromJson(file.dump(), "word.json"); });
  CHECK(err.find("word.json") != std::string::npos);
  CHECK(err.find("[UNK]") != std::string::npos);
}

TEST_CASE("byte-level alphabet: GPT-2's byte-to-character table") {
  std::string mapped;
  appendByteLevel(std::string("a \n\x7F\xAD\xFF", 6), mapped);
  // 'a' is printable; space, newline, DEL and soft hyphen are bytes 32, 10, 127, 173, which are
  // the 33rd, 11th, 34th+... non-printable bytes in order: U+0120, U+010A, U+0121, U+0143.
  CHECK(mapped == "a\xC4\xA0\xC4\x8A\xC4\xA1\xC5\x83\xC3\xBF");
  CHECK(byteLevelToBytes(mapped) == std::string("a \n\x7F\xAD\xFF", 6));
  CHECK(byteLevelToBytes("  ") == "  ");  // outside the alphabet: the token's own bytes
}

TEST_CASE("decode repairs bytes that are not UTF-8 as Rust's from_utf8_lossy does") {
  const std::string r = "\xEF\xBF\xBD";
  CHECK(utf8Lossy("ok") == "ok");
  CHECK(utf8Lossy("\xE2\x82") == r);  // a truncated 3-byte sequence: one replacement
  CHECK(utf8Lossy("\xE2\x82"
                  "a") == r + "a");
  CHECK(utf8Lossy("\xF0\x28") == r + "(");        // the second byte does not continue it
  CHECK(utf8Lossy("\xED\xA0\x80") == r + r + r);  // a surrogate: each byte on its own
  CHECK(utf8Lossy("\xC0\xAF") == r + r);          // overlong lead bytes are never valid
  CHECK(utf8Lossy("\xE2\x82\xAC") == "\xE2\x82\xAC");
}

TEST_CASE("Oniguruma patterns run on PCRE2: nested classes, White_Space, property classes, empty matches") {
  using Matches = std::vector<std::pair<size_t, size_t>>;
  const UnicodeRegex bloom(
      " ?[^(\\s|[.,!?])]+");  // BLOOM's shape: the nested class joins the outer one; "(" and " (" match nothing
  CHECK(bloom.findAll("a.b (c)[d]") == Matches{{0, 1}, {2, 3}, {5, 6}, {7, 10}});
  CHECK(UnicodeRegex("\\s").findAll("a\xC2\x85"
                                    "b") == Matches{{1, 3}});
  // \s is exactly Unicode's White_Space (PropList.txt), as in Oniguruma: U+180E is not, since 6.3.
  const UnicodeRegex space("^\\s\\z");
  std::vector<char32_t> matched;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c < 0xE000) continue;
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    } else if (c < 0x10000) {
      s += {static_cast<char>(0xE0 | (c >> 12)), static_cast<char>(0x80 | ((c >> 6) & 0x3F)),
            static_cast<char>(0x80 | (c & 0x3F))};
    } else {
      s += {static_cast<char>(0xF0 | (c >> 18)), static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
            static_cast<char>(0x80 | ((c >> 6) & 0x3F)), static_cast<char>(0x80 | (c & 0x3F))};
    }
    if (space.search(s)) matched.push_back(c);
  }
  CHECK(matched == std::vector<char32_t>{0x9,    0xA,    0xB,    0xC,    0xD,    0x20,   0x85,   0xA0,   0x1680,
                                         0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
                                         0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000});
  CHECK(UnicodeRegex("x*").findAll("axxb") == Matches{{0, 0}, {1, 3}, {4, 4}});
  CHECK(UnicodeRegex(UnicodeRegex::escape("a.b")).findAll("a.b axb") == Matches{{0, 3}});
  // Property classes are ICU's Unicode 15.0: Kawi digits (15.0) are \p{N}, not \p{L}; every spelling
  // of a negation agrees.
  const std::string kawiDigit = "\xF0\x91\xBD\x90";  // U+11F50
  CHECK(UnicodeRegex("\\p{N}").findAll("a" + kawiDigit) == Matches{{1, 5}});
  CHECK(UnicodeRegex("[x\\p{Nd}]+").findAll("x" + kawiDigit + "y") == Matches{{0, 5}});
  CHECK(UnicodeRegex("\\pL+").findAll("ab" + kawiDigit) == Matches{{0, 2}});
  for (const char* notLetter : {"\\P{L}+", "\\p{^L}+", "[^\\p{L}]+", "[\\P{L}]+"})
    CHECK(UnicodeRegex(notLetter).findAll("ab" + kawiDigit + " c") == Matches{{2, 7}});
  CHECK(test::errorOf([] { UnicodeRegex("\\p{NoSuchProperty}"); }) == "unknown Unicode property \\p{NoSuchProperty}");
  CHECK(test::errorOf([] { UnicodeRegex("a\\p{L"); }) == "\\p without a property name");
  CHECK(test::errorOf([] { UnicodeRegex("[a[^b]]"); }) == "a negated character class nested in another");
  CHECK(test::errorOf([] { UnicodeRegex("[a&&b]"); }) == "character class intersection (&&) is not supported");
  CHECK(!test::errorOf([] { UnicodeRegex("(unclosed"); }).empty());
}

TEST_CASE("unsupported or damaged tokenizer.json: one line naming the file and the problem") {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& f) { f["model"]["type"] = "Unigram"; },
       "model \"Unigram\" is not supported (supported: BPE, WordPiece, WordLevel)"},
      {[](json& f) {
         f["normalizer"] = {{"type", "NFD"}};
       },
       "normalizer \"NFD\" is not supported"},
      {[](json& f) {
         f["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer \"Whitespace\" is not supported"},
      {[](json& f) {
         f["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}};
       },
       "Metaspace prepend_scheme \"sometimes\" is not supported"},
      {[](json& f) {
         f["decoder"] = {{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}};
       },
       "Strip decoder's \"content\" is not one character"},
      {[](json& f) {
         f["post_processor"] = {{"type", "BertProcessing"}};
       },
       "BertProcessing has no \"cls\""},
      {[](json& f) {
         f["post_processor"] = {{"type", "BertProcessing"}, {"cls", {"[CLS]", 99999}}, {"sep", {"[SEP]", 0}}};
       },
       "BertProcessing's cls has id 99999, which no token has"},
      {[](json& f) {
         f["model"] = {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}};
       },
       "WordPiece unk_token \"[UNK]\" is not in the vocab"},
      {[](json& f) {
         f["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", "yes"}};
       },
       "BertNormalizer's \"lowercase\" is not true or false"},

      {[](json& f) {
         f["decoder"] = {{"type", "CTC"}};
       },
       "decoder \"CTC\" is not supported"},
      {[](json& f) { f["model"]["byte_fallback"] = true; },
       "byte_fallback is true but the vocabulary lacks 256 of the 256 byte tokens <0x00> to <0xFF> (first <0x00>)"},
      {[](json& f) { f["model"]["dropout"] = 0.1; }, "BPE dropout (random merges) is not supported"},
      {[](json& f) {
         f["truncation"] = {{"max_length", 8}};
       },
       "truncation (it changes encode's ids)"},
      {[](json& f) { f["version"] = "2.0"; }, "version \"2.0\" is not supported"},
      {[](json& f) { f["model"]["vocab"]["\xC4\xA0the"] = -3; }, "is not an id"},
      {[](json& f) { f["model"]["vocab"]["\xC4\xA0the"] = 254; }, "the vocab gives id 254 to both"},
      {[](json& f) { f["model"]["merges"][5] = "a b c"; }, "BPE merge 6 (\"a b c\") is not two tokens"},
      {[](json& f) { f["model"]["merges"][5] = "zz\xE2\x82\xAC q"; },
       "merge token \"zz\xE2\x82\xAC\" is not in the vocabulary"},
      {[](json& f) { f["model"]["merges"] = json::array({json::array({"a"})}); },
       "BPE merge 1 is not a pair of strings"},
      {[](json& f) { f["model"]["unk_token"] = "<nope>"; }, "unk_token \"<nope>\" is not in the vocabulary"},
      {[](json& f) { f["model"].erase("vocab"); }, "BPE model has no \"vocab\""},
      {[](json& f) { f["added_tokens"][0]["content"] = 7; }, "added token 1's content is not a string"},
      {[](json& f) {
         f["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "(("}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       "Split's pattern: missing closing parenthesis"},
      {[](json& f) {
         f["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}, {"invert", false}};
       },
       "Split behavior \"Sideways\" is not supported"},
      {[](json& f) {
         f["post_processor"] = {{"type", "TemplateProcessing"},
                                {"single", {{{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}}}},
                                {"special_tokens", {{"<x>", {{"id", "<x>"}, {"ids", {90000}}}}}}};
       },
       "special token <x> has id 90000, which no token has"},
      {[](json& f) { f = json::array(); }, "is not a JSON object"},
  };
  for (const auto& [edit, expected] : cases) {
    const std::string error = errorOfEdited(edit);
    INFO(error);
    CHECK(error.rfind("edited.json: ", 0) == 0);
    CHECK(error.find(expected) != std::string::npos);
    CHECK(error.find('\n') == std::string::npos);
  }
  const std::string truncated = test::errorOf([] { Tokenizer::fromJson("{\"model\": {\"type\": \"BP", "cut.json"); });
  CHECK(truncated.rfind("cut.json: ", 0) == 0);
  CHECK(truncated.find("parse error") != std::string::npos);
  CHECK(test::errorOf([] { Tokenizer::fromFile("no/such/tokenizer.json"); }) ==
        "no/such/tokenizer.json: cannot open the tokenizer file");
}

// Each expected text is derived by hand from the rules of Megatron-LM's wikitext_detokenizer
// (tasks/zeroshot_gpt/detokenizer.py), applied in their order.
TEST_CASE("WikiText detokenization follows Megatron-LM's wikitext_detokenizer rule by rule") {
  // number separators, then " , " and " . " (the last " ." has no space after it: kept)
  CHECK(detokenizeWikiText("The 2 @,@ 000 @-@ year @-@ old ship , 3 @.@ 5 m long . Sunk .") ==
        "The 2,000-year-old ship, 3.5 m long. Sunk .");
  // punctuation, brackets and quotes stripped inside, the degree sign joined
  CHECK(detokenizeWikiText("He said , \" hello world \" ( see below ) ; then : 3 @.@ 5 \u00b0 C ! ok ? yes . Done") ==
        "He said, \"hello world\" (see below); then: 3.5\u00b0C! ok? yes. Done");
  CHECK(detokenizeWikiText("see [ 1 ] and { x }") == "see [1] and {x}");
  // headings: "= =" pairs joined, the space before and after a line end dropped
  CHECK(detokenizeWikiText("\n = = Early life = = \n") == "\n== Early life ==\n");
  CHECK(detokenizeWikiText(" = = = Later = = = \n = = = = Deep = = = = \n") == " === Later ===\n==== Deep ====\n");
  // " 's" joins; an apostrophe pair is stripped inside like a quote pair (the rule pairs any two)
  CHECK(detokenizeWikiText("the dog 's bone and the cat 's toy") == "the dog's bone and the cat's toy");
  // "s '" (a plural possessive) joins before the pairing rule sees it
  CHECK(detokenizeWikiText("the players ' union") == "the players' union");
  // " N " (WikiText's number placeholder in some releases) becomes " 1 "
  CHECK(detokenizeWikiText("in N years") == "in 1 years");
  // the contraction regex, as written, matches the literal "/' <digit>/" and writes "/'[0-9]/"
  CHECK(detokenizeWikiText("a/' 5/b") == "a/'[0-9]/b");
  // an unpaired bracket or quote is left alone; a pair spans lines
  CHECK(detokenizeWikiText("a \" b ( c") == "a \" b ( c");
  CHECK(detokenizeWikiText("( a\n b )") == "(a\nb)");
  // word-internal spacing that no rule names stays
  CHECK(detokenizeWikiText("x - y") == "x - y");
}
