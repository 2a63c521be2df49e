// Golden token ids and decodes from Hugging Face tokenizers (the reference), for
// tests/test_tokenizer.cpp. Not run in CI (CI has no node); rerun after changing the cases:
//   npm install --prefix /tmp/tokref tokenizers      (outside the repository)
//   NODE_PATH=/tmp/tokref/node_modules node tests/tokenizer/make_goldens.js
// writes tests/tokenizer/goldens.json. For a tokenizer.json of your own (BLOOM's, 14.5 MB, is
// not committed):
//   NODE_PATH=... node tests/tokenizer/make_goldens.js --tokenizer PATH --out OUT.json
// then XTRAP_TOKENIZER_GOLDENS=OUT.json ctest -R tokenizer checks xtrap against it.
// Each case is a tokenizer.json: a base file with some top-level fields replaced (`override`;
// its `model` is merged into the base's model) and, with merges_as_pairs, the "a b" merges
// respelled ["a", "b"]. The C++ test applies the same edits.
'use strict';
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('tokenizers');

const here = __dirname;
const bloomPattern = ' ?[^(\\s|[.,!?…。，、।۔،])]+';
const byteLevel = (prefix, regex) => ({type: 'ByteLevel', add_prefix_space: prefix, trim_offsets: true, use_regex: regex});
const split = (pattern, behavior, invert) => ({type: 'Split', pattern, behavior, invert});
const special = (id, content, extra = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true, ...extra});
// Llama-3's pre-tokenizer pattern and DeepSeek-V3's three (the third has literal CR and LF
// characters where Llama-3's has \r and \n escapes), as their tokenizer.json files have them.
const llama3Pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const deepseekV3Patterns = ['\\p{N}{1,3}', '[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+',
  '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+'];
const metaspace = (scheme, split, extra = {}) => ({type: 'Metaspace', replacement: '\u2581', prepend_scheme: scheme, split, ...extra});
const neoxAdded = JSON.parse(fs.readFileSync(path.join(here, 'gpt-neox-20b_tokenizer.json'))).added_tokens;

const cases = [
  {name: 'gpt-neox-20b', override: {}, random: true},
  {
    // BLOOM's tokenizer.json settings (bigscience/bloom), on GPT-NeoX's merges spelled as pairs.
    name: 'bloom-format',
    override: {
      added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>'), special(3, '<pad>')],
      normalizer: null,
      pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: bloomPattern}, 'Isolated', false), byteLevel(false, false)]},
      post_processor: byteLevel(true, false),
      decoder: byteLevel(true, false),
      model: {unk_token: null},
    },
    merges_as_pairs: true,
    random: true,
  },
  {
    name: 'prefix-space-template',
    override: {
      normalizer: {type: 'Sequence', normalizers: [{type: 'NFC'}]},
      pre_tokenizer: {type: 'Sequence', pretokenizers: [byteLevel(true, true)]},
      post_processor: {type: 'Sequence', processors: [byteLevel(false, true), {
        type: 'TemplateProcessing',
        single: [{SpecialToken: {id: '<|endoftext|>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
                 {SpecialToken: {id: '<|endoftext|>', type_id: 0}}],
        pair: [{Sequence: {id: 'A', type_id: 0}}, {Sequence: {id: 'B', type_id: 1}}],
        special_tokens: {'<|endoftext|>': {id: '<|endoftext|>', ids: [0], tokens: ['<|endoftext|>']}},
      }]},
    },
  },
  {
    // Llama-3's settings (meta-llama/Meta-Llama-3-8B) on GPT-NeoX's vocabulary.
    name: 'llama-3-pretokenizer',
    override: {
      normalizer: null,
      pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: llama3Pattern}, 'Isolated', false), byteLevel(false, false)]},
    },
    random: true,
  },
  {
    // DeepSeek-V3's settings (deepseek-ai/DeepSeek-V3) on GPT-NeoX's vocabulary.
    name: 'deepseek-v3-pretokenizer',
    override: {
      normalizer: {type: 'Sequence', normalizers: []},
      pre_tokenizer: {type: 'Sequence', pretokenizers: deepseekV3Patterns.map((p) => split({Regex: p}, 'Isolated', false)).concat([byteLevel(false, false)])},
    },
    random: true,
  },
  // SentencePiece-style BPE (make_sentencepiece_vocab.js): Llama 2's file as it is, then the
  // settings of other families on its vocabulary.
  {name: 'llama-2-format', base: 'sentencepiece-bpe_tokenizer.json', override: {}, random: true, sentencepiece: true},
  {
    // Llama 2 converted with legacy=false, Mistral: Metaspace "first", no split.
    name: 'metaspace-first',
    base: 'sentencepiece-bpe_tokenizer.json',
    override: {normalizer: null, pre_tokenizer: metaspace('first', false), decoder: metaspace('first', false)},
    sentencepiece: true,
  },
  {
    name: 'metaspace-always-split',
    base: 'sentencepiece-bpe_tokenizer.json',
    override: {normalizer: null, pre_tokenizer: metaspace('always', true), decoder: metaspace('always', true), model: {ignore_merges: true}},
    sentencepiece: true,
  },
  {
    // An older file's add_prefix_space false (prepend_scheme "never").
    name: 'metaspace-never',
    base: 'sentencepiece-bpe_tokenizer.json',
    override: {normalizer: null, pre_tokenizer: metaspace('never', true, {add_prefix_space: false}), decoder: metaspace('never', true)},
    sentencepiece: true,
  },
  {
    // Gemma's: spaces replaced, nothing prepended, no Strip.
    name: 'gemma-format',
    base: 'sentencepiece-bpe_tokenizer.json',
    override: {
      normalizer: {type: 'Replace', pattern: {String: ' '}, content: '\u2581'},
      decoder: {type: 'Sequence', decoders: [{type: 'Replace', pattern: {String: '\u2581'}, content: ' '}, {type: 'ByteFallback'}, {type: 'Fuse'}]},
    },
    sentencepiece: true,
  },
  {name: 'split-digits-removed', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: '\\p{N}'}, 'Removed', false), byteLevel(false, false)]}}},
  {name: 'split-space-string-merged-with-previous', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({String: ' '}, 'MergedWithPrevious', false), byteLevel(false, false)]}}},
  {name: 'split-spaces-merged-with-next', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: '\\s+'}, 'MergedWithNext', false), byteLevel(false, false)]}}},
  {name: 'split-punctuation-contiguous', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: '[\\p{P}\\p{S}]'}, 'Contiguous', false), byteLevel(false, false)]}}},
  {name: 'split-letters-isolated-inverted', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: '\\p{L}+'}, 'Isolated', true), byteLevel(false, true)]}}},
  {name: 'split-space-removed-inverted', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: '\\s'}, 'Removed', true), byteLevel(false, false)]}}},
  {name: 'split-empty-matches', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({Regex: 'x*'}, 'Isolated', false), byteLevel(false, false)]}}},
  {name: 'split-string-dot-merged-with-next', override: {pre_tokenizer: {type: 'Sequence', pretokenizers: [split({String: '.'}, 'MergedWithNext', false), byteLevel(false, false)]}}},
  {
    // Without ByteLevel, characters outside the vocabulary reach the model: unk_token, fused.
    name: 'unk-fused',
    override: {pre_tokenizer: split({Regex: '\\s+'}, 'Removed', false), model: {unk_token: '<|endoftext|>', fuse_unk: true}},
  },
  {name: 'unk-unfused', override: {pre_tokenizer: split({Regex: '\\s+'}, 'Removed', false), model: {unk_token: '<|endoftext|>', fuse_unk: false}}},
  {name: 'no-unk-token-drops', override: {pre_tokenizer: split({Regex: '\\s+'}, 'Removed', false), model: {unk_token: null}}},
  {name: 'ignore-merges', override: {model: {ignore_merges: true}}},
  // WordPiece (make_wordpiece_vocab.js): bert-base-uncased's settings, then cased and other
  // BertNormalizer settings, a short max_input_chars_per_word, BertProcessing, no cleanup.
  {name: 'bert-uncased', base: 'wordpiece-bert_tokenizer.json', override: {}, random: true, sentencepiece: true},
  {
    name: 'bert-cased',
    base: 'wordpiece-bert_tokenizer.json',
    override: {normalizer: {type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: false}},
    sentencepiece: true,
  },
  {
    name: 'bert-cased-strip-accents',
    base: 'wordpiece-bert_tokenizer.json',
    override: {normalizer: {type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: true, lowercase: false}},
    sentencepiece: true,
  },
  {
    name: 'bert-uncased-keep-accents-raw',
    base: 'wordpiece-bert_tokenizer.json',
    override: {normalizer: {type: 'BertNormalizer', clean_text: false, handle_chinese_chars: false, strip_accents: false, lowercase: true}},
    sentencepiece: true,
  },
  {
    name: 'bert-short-words-bert-processing',
    base: 'wordpiece-bert_tokenizer.json',
    override: {
      model: {max_input_chars_per_word: 6},
      post_processor: {type: 'BertProcessing', sep: ['[SEP]', 3], cls: ['[CLS]', 2]},
      decoder: {type: 'WordPiece', prefix: '##', cleanup: false},
    },
    sentencepiece: true,
  },
  {
    name: 'added-token-options',
    override: {
      added_tokens: neoxAdded.concat([
        special(60000, '[MASK]', {lstrip: true}),
        special(60001, '<sep>', {rstrip: true}),
        {id: 60002, content: 'end', single_word: true, lstrip: false, rstrip: false, normalized: true, special: false},
        {id: 60003, content: 'cafe\u0301', single_word: false, lstrip: false, rstrip: false, normalized: true, special: false},
        {id: 60004, content: 'world', single_word: false, lstrip: false, rstrip: false, normalized: false, special: false},
      ]),
    },
  },
];

const handwritten = [
  '', ' ', 'Hello world', ' Hello world', 'Hello  world', 'Hello   world   ', 'a\tb\nc\r\nd', '\n\n\n',
  '    indented code\n        more', "It's I'm we'll they've you'd she's don't", "IT'S WE'LL 's", '3.14159 and 1,000,000 and 2024-01-01',
  '12345678901234567890', '日本語のテキストです。', '中文，标点！还有？', '한국어 텍스트', '😀👍🏽👨‍👩‍👧‍👦 emoji',
  'café vs cafe\u0301', 'e\u0301\u0301 multiple marks', '\u00c5 vs A\u030a', 'ﬁ ligature', 'Ελληνικά και русский текст',
  'עברית وعربي', 'हिन्दी पाठ।', 'اردو۔ متن،', 'tab\tand\u00a0nbsp\u2003em\u3000ideo', 'nel\u0085next and \u0085 alone',
  'line\u2028sep\u2029para', '<|endoftext|>', 'before<|endoftext|>after', 'a <|endoftext|> b', '<|endoftext|><|endoftext|>',
  'x'.repeat(300), 'a' + ' '.repeat(30) + 'b', '   leading spaces', 'trailing spaces   ', 'mixed\t \t tabs',
  'punctuation!!! ??? ... ,,, ;;', 'email@example.com https://example.com/path?q=1&r=2', 'C++ std::vector<int> x{1,2,3};',
  '$100 €200 £300 ¥400', '\u0000 nul and \u0007 bell', 'zero\u200bwidth\u200djoiner', 'Mixed日本English中文', 'Ünïcödé ÀÉÎÕÜ',
  "BLOOM's separators: a.b,c!d?e…f。g，h、i।j۔k،l", '(parens) [brackets] {braces} |pipes|', 'e\u0301', '\u0301 leading mark',
  'the end. endless end, weekend end', '[MASK] x', 'a   [MASK] b', '<sep>   after <sep>', 'cafe\u0301 café cafés',
  'world worlds underworld', 'x \u0085y', 'x\u0085 y', '\u0085\u0085 z \u0085\u0085', 'xxx axxb x', 'a\u180e b a \u180eb x\u2028\u180e\u180e y', 'end\u0301 ²end end² end_x x_end endé \u0663end end\u200d', 'é', '€', '𝄞 music', 'ab.cd..ef.', '  \n  \n', 'Ω≈ç√∫˜µ≤≥÷',
  // Unicode versions. Hugging Face's regular expressions have Unicode 16.0's classes and xtrap's
  // 15.0's (src/data/unicode_regex.h): characters of 15.0 (Kawi, U+1FAE8) must split alike; those
  // of 15.1 and 16.0 would not, and are not here. Its NFC is Unicode 9.0's (src/data/unicode_nfc.h):
  // U+11938 (Unicode 13) is not composed, U+0898 (Unicode 14, class 230) not reordered.
  ' \u{11F50}', 'a \u{11F50}\u{11F51}\u{11F52}\u{11F53}', 'x\u{11F04}\u{11F05} y', 'a \u{1FAE8}', 'a\u{1FAE8}b \u{1FAE8}\u{1FAE8}',
  '\u{11935}\u{11930}', '\u{11938}', 'a\u0898\u0316', 'a\u0316\u0898', '\u{10570}\u{10571} Vithkuqi',
  "WE'LL it'S x'Re",
];

// For the SentencePiece cases: paragraphs of WikiText-2's validation text, and an adversarial text
// (many scripts, emoji, runs of spaces at either end and inside, tabs, newlines, characters the
// vocabulary lacks, which fall back to bytes, the special tokens).
const wikiText = fs.readFileSync(path.join(here, '../../data/wikitext-2/wiki.valid.tokens'), 'utf8').slice(0, 6000);
const sentencepieceTexts = wikiText.split('\n').filter((line) => line.length > 0).concat([
  wikiText,
  '  two leading spaces and two trailing  ', '   ', ' a', 'a ', 'a  b   c    d', '\tTab\tseparated\t', '\n\nnew\nlines\n\n',
  ' \n \t mixed \r\n whitespace \t ', '\u2581already\u2581meta\u2581space\u2581', '\u2581 \u2581\u2581 x',
  'Zürich, Kraków, Åland, Ærø, İstanbul', '東京は日本の首都です。', '서울 特別市', 'Привет, мир! Γειά σου κόσμε',
  'مرحبا بالعالم', 'नमस्ते दुनिया', '😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🫨', '𝄞𝕏 \u{10FFFD} \u{E000}', 'a\u0000b\u0007c', '<s> text </s> <unk>',
  'before<s>after', ' <s>  spaced  </s> ', 'zero\u200bwidth\u00a0nbsp\u3000ideographic', '~!@#$%^&*()_+`-={}|[]\\:";\'<>?,./',
  'The lobster\u2019s claws — 60 cm (24 in) — and €13.50', '\u00e9 e\u0301 \ufb01', '$1 $$ ${1} \\1',
]);

// Deterministic mixed-script strings (a fixed linear congruential generator).
let seed = 12345;
const rand = (n) => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % n;
};
const pools = [
  ['the', 'quick', 'brown', 'fox', 'Tokenizer', 'ALiBi', 'extrapolation', 'xtrap', 'a', 'I'],
  ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "n't"],
  ['0', '7', '42', '2048', '3.5', '1e-5', '٣', '१२'],
  [' ', '  ', '   ', '\t', '\n', '\r\n', '\u00a0', '\u3000', '\u0085', ' '.repeat(26)],
  ['日', '本', '語', '中', '文', '한', '글', 'の', 'テ', 'ス'],
  ['😀', '👍🏽', '👨‍👩‍👧', '🇫🇷', '❤️', '🤖'],
  ['\u0301', '\u0308', '\u0327', '\u20dd', '\u093f', '\u064e'],
  ['é', 'ü', 'ñ', 'ß', 'Ø', 'ç', 'å', 'Å'],
  ['مرحبا', 'नमस्ते', 'Привет', 'γειά', 'שלום'],
  ['.', ',', '!', '?', '…', '。', '，', '、', '।', '۔', '،', '(', ')', '[', ']', '|', '-', '--', '"'],
  ['<|endoftext|>', '<|endoftext|>'],
];
const randomStrings = [];
for (let i = 0; i < 150; ++i) {
  let s = '';
  const parts = 1 + rand(12);
  for (let j = 0; j < parts; ++j) {
    const pool = pools[rand(pools.length)];
    s += pool[rand(pool.length)];
  }
  randomStrings.push(s);
}

function tokenizerJson(base, c) {
  const json = JSON.parse(JSON.stringify(base));
  for (const [key, value] of Object.entries(c.override)) {
    if (key === 'model') Object.assign(json.model, value);
    else json[key] = value;
  }
  if (c.merges_as_pairs) json.model.merges = json.model.merges.map((m) => (typeof m === 'string' ? m.split(' ') : m));
  return JSON.stringify(json);
}

async function golden(tokenizer, text) {
  const ids = (await tokenizer.encode(text, null, {addSpecialTokens: false})).getIds();
  const idsSpecial = (await tokenizer.encode(text, null, {addSpecialTokens: true})).getIds();
  const half = ids.slice(0, Math.ceil(ids.length / 2));
  return {
    text, ids, ids_special: idsSpecial,
    decoded: await tokenizer.decode(ids, false),
    half_decoded: await tokenizer.decode(half, false),
  };
}

async function main() {
  const args = process.argv.slice(2);
  const option = (name) => (args.indexOf(name) >= 0 ? args[args.indexOf(name) + 1] : undefined);
  const userFile = option('--tokenizer');
  const out = option('--out') || path.join(here, 'goldens.json');
  const chosen = userFile ? [{name: path.basename(userFile), base: path.resolve(userFile), override: {}, random: true}]
                          : cases.map((c) => ({base: 'gpt-neox-20b_tokenizer.json', ...c}));
  const result = {
    reference: 'tokenizers ' + require('tokenizers/package.json').version + ' (Hugging Face, npm)',
    cases: [],
  };
  for (const c of chosen) {
    const base = JSON.parse(fs.readFileSync(path.resolve(here, c.base)));
    const tokenizer = Tokenizer.fromString(tokenizerJson(base, c));
    const texts = handwritten.concat(c.sentencepiece ? sentencepieceTexts : [], c.random ? randomStrings : []);
    const strings = [];
    for (const text of texts) strings.push(await golden(tokenizer, text));
    const {random, sentencepiece, ...description} = c;
    result.cases.push({...description, strings});
  }
  fs.writeFileSync(out, JSON.stringify(result) + '\n');
  console.log(`${out}: ${result.cases.length} tokenizers, ${result.cases.reduce((n, c) => n + c.strings.length, 0)} strings`);
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
