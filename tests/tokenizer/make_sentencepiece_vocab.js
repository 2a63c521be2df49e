// Writes tests/tokenizer/sentencepiece-bpe_tokenizer.json: a small SentencePiece-style BPE
// tokenizer.json with Llama 2's settings (normalizer Prepend("▁") + Replace(" ", "▁"), no
// pre-tokenizer, byte fallback with the 256 <0xHH> tokens, <s> added by TemplateProcessing, the
// decoder Replace/ByteFallback/Fuse/Strip), its 2,000-token vocabulary and merges learnt here by
// plain BPE on the first 200 kB of WikiText-2's training text (characters seen fewer than 3 times
// are left to byte fallback). Deterministic; rerun only to change the vocabulary:
//   node tests/tokenizer/make_sentencepiece_vocab.js
'use strict';
const fs = require('fs');
const path = require('path');

const here = __dirname;
const text = fs.readFileSync(path.join(here, '../../data/wikitext-2/wiki.train.tokens'), 'utf8').slice(0, 200000);
const vocabSize = 2000;

const vocab = {'<unk>': 0, '<s>': 1, '</s>': 2};
for (let b = 0; b < 256; ++b) vocab['<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>'] = 3 + b;
const add = (token) => {
  if (!(token in vocab)) vocab[token] = Object.keys(vocab).length;
};

// Words as SentencePiece sees them: each run of non-spaces with "▁" before it.
const wordCounts = new Map();
for (const word of text.split(/\s+/).filter((w) => w.length > 0)) {
  const w = '\u2581' + word;
  wordCounts.set(w, (wordCounts.get(w) || 0) + 1);
}
const charCounts = new Map();
for (const [w, n] of wordCounts) for (const c of w) charCounts.set(c, (charCounts.get(c) || 0) + n);
[...charCounts.entries()].filter(([, n]) => n >= 3).map(([c]) => c).sort().forEach(add);

// Each word as its symbols; a character without a token stays alone and never merges.
const words = [...wordCounts.entries()].map(([w, n]) => ({symbols: [...w], n}));
const merges = [];
while (Object.keys(vocab).length < vocabSize) {
  const pairs = new Map();
  for (const {symbols, n} of words)
    for (let i = 0; i + 1 < symbols.length; ++i) {
      if (!(symbols[i] in vocab) || !(symbols[i + 1] in vocab)) continue;
      const key = symbols[i] + '\u0000' + symbols[i + 1];
      pairs.set(key, (pairs.get(key) || 0) + n);
    }
  let best = null, bestCount = 0;
  for (const [key, n] of pairs)
    if (n > bestCount || (n === bestCount && key < best)) [best, bestCount] = [key, n];
  if (best === null) break;
  const [left, right] = best.split('\u0000');
  merges.push([left, right]);
  add(left + right);
  for (const word of words) {
    const s = word.symbols, out = [];
    for (let i = 0; i < s.length; ++i) {
      if (i + 1 < s.length && s[i] === left && s[i + 1] === right) {
        out.push(left + right);
        ++i;
      } else {
        out.push(s[i]);
      }
    }
    word.symbols = out;
  }
}

const special = (id, content) => ({id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true});
const tokenizer = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')],
  normalizer: {type: 'Sequence', normalizers: [{type: 'Prepend', prepend: '\u2581'}, {type: 'Replace', pattern: {String: ' '}, content: '\u2581'}]},
  pre_tokenizer: null,
  post_processor: {
    type: 'TemplateProcessing',
    single: [{SpecialToken: {id: '<s>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}],
    pair: [{SpecialToken: {id: '<s>', type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}, {SpecialToken: {id: '<s>', type_id: 1}}, {Sequence: {id: 'B', type_id: 1}}],
    special_tokens: {'<s>': {id: '<s>', ids: [1], tokens: ['<s>']}},
  },
  decoder: {type: 'Sequence', decoders: [{type: 'Replace', pattern: {String: '\u2581'}, content: ' '}, {type: 'ByteFallback'}, {type: 'Fuse'}, {type: 'Strip', content: ' ', start: 1, stop: 0}]},
  model: {type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges},
};
const out = path.join(here, 'sentencepiece-bpe_tokenizer.json');
fs.writeFileSync(out, JSON.stringify(tokenizer) + '\n');
console.log(`${out}: ${Object.keys(vocab).length} tokens, ${merges.length} merges`);
