#pragma once
// The digest of a corpus that runs record (run.json's data_digest): data files edited after
// training while keeping the vocabulary size would otherwise go unnoticed by eval and --resume.
#include <string>

#include "data/token_span.h"
#include "data/vocabulary.h"

namespace xtrap {

// "fnv1a64:<16 hex digits>" over the vocabulary's words and the three splits' token ids (each
// split's length first, so tokens cannot move between splits unseen).
std::string corpusDigest(const Vocabulary& vocab, TokenSpan train, TokenSpan valid, TokenSpan test);

}  // namespace xtrap
