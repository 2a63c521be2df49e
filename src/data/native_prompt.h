#pragma once
// Retrieval prompts as their authors write them, for pretrained models (eval --format native):
// text with capitals, punctuation and contiguous numbers, tokenized by the model's tokenizer.json
// with its special tokens (as transformers' tokenizer(prompt) does), answered by generation.
//
//  passkey (Landmark Attention, epfml/landmark-attention llama/run_test.py, generate_prompt):
//    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize
//    them. I will quiz you about the important information there." \n <garbage prefix> \n
//    "The pass key is K. Remember it. K is the pass key." \n <garbage suffix> \n
//    "What is the pass key? The pass key is"
//  garbage: the first n characters of "The grass is green. The sky is blue. The sun is yellow.
//  Here we go. There and back again." repeated with spaces (cut mid-word as the authors cut it);
//  the prefix has round(depth x n) characters, the suffix the rest (both from the start of the
//  repetition, as theirs); K uniform in [1, 50000]. Scored on the first integer of the generation
//  (their max_new_tokens is 10).
//
//  kv-lines (LongEval "lines", DachengLi1/LongChat longeval/utils.py, generate_lines_testcases,
//  asked as its test_lines_one_sample asks a base model, MPT-StoryWriter):
//    "Below is a record of lines I want you to remember. Each line begins with 'line <line
//    index>' and contains a '<REGISTER_CONTENT>' at the end of the line as a numerical value. For
//    each line index, memorize its corresponding <REGISTER_CONTENT>. At the end of the record, I
//    will ask you to retrieve the corresponding <REGISTER_CONTENT> of a certain line index. Now
//    the record start:\n\n" + N x "line ADJ-NOUN: REGISTER_CONTENT is <V>\n" + "\nNow the record
//    is over. Tell me what is the <REGISTER_CONTENT> in line ADJ-NOUN? I need the number." +
//    "Line <ADJ-NOUN>: <REGISTER_CONTENT> is"
//  names distinct adjective-noun pairs of xtrap's key words (theirs: wonderwords' lists), V
//  uniform in [1, 50000]; the asked line is line round(depth x (N - 1)). Scored on the last
//  integer of the generation (their StoryWriter call generates 15 tokens).
//
// The garbage length n (passkey) and the line count N (kv-lines) are the largest whose prompt is
// at most the requested length in tokens: prompts are as long as they can be without passing
// Lvalid, not exactly Lvalid (text cannot be cut to a token count without changing how it
// tokenizes). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "data/retrieval_prompt.h"
#include "data/tokenizer.h"

namespace xtrap {

struct NativePrompt {
  std::vector<int32_t> tokens;  // the prompt, at most the requested length
  int64_t needleBegin = 0;      // the tokens of the text before the needle's line, tokenized alone
  std::string answer;           // the number asked for
  bool lastInteger = false;     // the answer is the generation's last integer (LongEval), else its first
};

// Passkey and kv-lines; a function of (task, seed, length, depth, trial). Throws a one-line
// error for another task or a length too short for the prompt without filler.
NativePrompt buildNativePrompt(const Tokenizer& tokenizer, const PromptRequest& request);

// The generation's first (or last) run of ASCII digits as an integer (leading zeros dropped, as
// the authors' int() drops them), "" when it has none.
std::string integerIn(const std::string& text, bool last);

// RULER's string_match_all for one sample: how many of the items occur in the text, ASCII
// letters compared case-insensitively.
int64_t itemsFound(const std::string& text, const std::vector<std::string>& items);

}  // namespace xtrap
