#pragma once
// The tokenizer files of a Hugging Face directory that a run trained from it keeps (train --init DIR)
// and that its export writes back (export --hf): copied from one directory to another where present.
#include <filesystem>

#include "util/atomic_file.h"

namespace xtrap {

inline void copyTokenizerFiles(const std::filesystem::path& from, const std::filesystem::path& to) {
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    if (std::filesystem::exists(from / name)) writeTextAtomically(to / name, readTextFile(from / name));
}

}  // namespace xtrap
