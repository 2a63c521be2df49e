#pragma once
// A WikiText-format directory as a pretrained model's tokenizer reads it, for training from that
// model (train --init DIR, docs/adapt.md): each split's text as evaluation reads it (raw where the
// directory has it, else the tokenized file detokenized; a WordLevel tokenizer's words as written:
// text_tokens.h), tokenized by `tokenizer`, its ids cached beside the text. Torch-free.
#include <cstdint>
#include <filesystem>

#include "data/tokenizer.h"
#include "data/wikitext.h"

namespace xtrap {

// The corpus of the three splits' ids; its vocabulary is empty (the tokenizer is the vocabulary),
// `contextToken` is the id each split's first token is predicted from, and its digest covers the
// three splits' ids. One-line errors name a missing or unreadable split.
Corpus loadTokenizedCorpus(const std::filesystem::path& dir, const Tokenizer& tokenizer, int32_t contextToken);

}  // namespace xtrap
