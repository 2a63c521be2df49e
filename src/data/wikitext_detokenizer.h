#pragma once
// WikiText's tokenized files (wiki.<split>.tokens: " @-@ " for a hyphen inside a word, spaces
// around every punctuation mark) back into running text for a model with its own tokenizer, by
// the rules the evaluation harnesses apply: wikitext_detokenizer of Megatron-LM
// (tasks/zeroshot_gpt/detokenizer.py), copied unchanged into lm-evaluation-harness
// (lm_eval/tasks/wikitext/preprocess_wikitext.py). Every rule is kept as written there, the two
// that rarely do what their comments say included (the contraction regex matches a literal
// "/' <digit>/"; the single-quote rule pairs apostrophes). Torch-free.
#include <string>
#include <string_view>

namespace xtrap {

// The rules in their order, on the whole text (Megatron-LM applies them to the whole file; the
// harness to one article at a time, which differs only where a bracket or quote is left unpaired
// in an article). `text` is valid UTF-8.
std::string detokenizeWikiText(std::string_view text);

}  // namespace xtrap
