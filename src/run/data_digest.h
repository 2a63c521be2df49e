#pragma once
// A digest of the data a run was trained on, kept in run.json: data files edited after training
// while keeping the vocabulary size would otherwise go unnoticed by eval and --resume.
#include <string>

#include "data/wikitext.h"

namespace xtrap {

// "fnv1a64:<16 hex digits>" over the vocabulary's words and the three splits' token ids.
std::string corpusDigest(const Corpus& corpus);

// The warning eval and --resume print when `recorded` (run.json's; empty for runs from before
// the digest) differs from `current`; empty when there is nothing to say.
std::string dataChangedWarning(const std::string& runDir, const std::string& dataDir, const std::string& recorded,
                               const std::string& current);

}  // namespace xtrap
