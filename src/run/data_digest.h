#pragma once
// What eval and --resume say when the data a run was trained on changed since (the digest is
// data/corpus_digest.h's, recorded in run.json and kept in the token cache).
#include <string>

namespace xtrap {

// The warning eval and --resume print when `recorded` (run.json's; empty for runs from before
// the digest) differs from `current`; empty when there is nothing to say.
std::string dataChangedWarning(const std::string& runDir, const std::string& dataDir, const std::string& recorded,
                               const std::string& current);

}  // namespace xtrap
