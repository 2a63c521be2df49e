// Writes tests/tokenizer/wordpiece-bert_tokenizer.json: a small WordPiece tokenizer.json with
// bert-base-uncased's settings (BertNormalizer lowercasing and stripping accents, BertPreTokenizer,
// [CLS] A [SEP] by TemplateProcessing, the WordPiece decoder with cleanup) and a 2,000-token
// vocabulary made here from the first 200 kB of WikiText-2's training text: the five special
// tokens, every character seen at least 3 times (alone and as a "##" continuation), the most
// frequent words, then the most frequent 2- to 4-character word endings as "##" pieces.
// Deterministic; rerun only to change the vocabulary:
//   node tests/tokenizer/make_wordpiece_vocab.js
'use strict';
const fs = require('fs');
const path = require('path');

const here = __dirname;
const text = fs.readFileSync(path.join(here, '../../data/wikitext-2/wiki.train.tokens'), 'utf8').slice(0, 200000);
const vocabSize = 2000;
const specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];

const vocab = {};
const add = (token) => {
  if (!(token in vocab)) vocab[token] = Object.keys(vocab).length;
};
specials.forEach(add);

// Words as BertNormalizer (uncased) and BertPreTokenizer leave them, near enough for a vocabulary.
const normalized = text.toLowerCase().normalize('NFD').replace(/\p{Mn}/gu, '');
const words = normalized.match(/\p{P}|[^\s\p{P}]+/gu);
const count = (map, key) => map.set(key, (map.get(key) || 0) + 1);
const wordCounts = new Map(), charCounts = new Map();
for (const w of words) {
  count(wordCounts, w);
  for (const c of w) count(charCounts, c);
}
const byCount = (map) => [...map.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
const chars = byCount(charCounts).filter(([, n]) => n >= 3).map(([c]) => c);
chars.forEach(add);
chars.forEach((c) => add('##' + c));
for (const [w] of byCount(wordCounts)) {
  if (Object.keys(vocab).length >= vocabSize - 300) break;
  add(w);
}
const endings = new Map();
for (const [w, n] of wordCounts) {
  if (w in vocab) continue;
  const letters = [...w];
  for (let k = 2; k <= 4 && k < letters.length; ++k) endings.set(letters.slice(-k).join(''), (endings.get(letters.slice(-k).join('')) || 0) + n);
}
for (const [e] of byCount(endings)) {
  if (Object.keys(vocab).length >= vocabSize) break;
  add('##' + e);
}

const special = (id, content) => ({id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true});
const tokenizer = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: specials.map((s) => special(vocab[s], s)),
  normalizer: {type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true},
  pre_tokenizer: {type: 'BertPreTokenizer'},
  post_processor: {
    type: 'TemplateProcessing',
    single: [{SpecialToken: {id: '[CLS]', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}, {SpecialToken: {id: '[SEP]', type_id: 0}}],
    pair: [{SpecialToken: {id: '[CLS]', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}, {SpecialToken: {id: '[SEP]', type_id: 0}},
           {Sequence: {id: 'B', type_id: 1}}, {SpecialToken: {id: '[SEP]', type_id: 1}}],
    special_tokens: {
      '[CLS]': {id: '[CLS]', ids: [vocab['[CLS]']], tokens: ['[CLS]']},
      '[SEP]': {id: '[SEP]', ids: [vocab['[SEP]']], tokens: ['[SEP]']},
    },
  },
  decoder: {type: 'WordPiece', prefix: '##', cleanup: true},
  model: {type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab},
};
const out = path.join(here, 'wordpiece-bert_tokenizer.json');
fs.writeFileSync(out, JSON.stringify(tokenizer, null, 1) + '\n');
console.log(`${out}: ${Object.keys(vocab).length} tokens`);
