#pragma once
// `xtrap export RUN --hf DIR`: a trained decoder as a Hugging Face model directory that
// transformers and xtrap's own pretrained loader (run/pretrained_config.h) read:
//   DIR/config.json            the model type that computes the run exactly: gpt_neox
//                              (use_parallel_residual false) for rotary decoders, with rope_scaling
//                              for an adapted run; mpt (llm-foundry's) for ALiBi decoders
//   DIR/model.safetensors      the parameters under that model type's names and row layouts
//   DIR/tokenizer.json         the run's words as a WordLevel vocabulary: line ends become <eos>
//                              (a Replace normalizer), words split at whitespace (WhitespaceSplit),
//                              unknown words <unk>; so a WikiText file gives the run's own ids
//   DIR/tokenizer_config.json  the tokenizer class and its special tokens, for AutoTokenizer
// Folded where the model type has an exact equivalent: the sqrt(d) embedding scale into the input
// embedding, which then differs from the output head (tie_word_embeddings false). Refused, one line
// naming the setting and the training flag that avoids it: encoders, the adaptive softmax (the
// default head) and adaptive input, other heads, and whatever the model type's family refuses
// (run/pretrained_family.h, FamilyExporter). The written config is read back through the loader's
// own key checks before the directory appears. DIR is either complete or absent.
// A run trained from a pretrained directory (train --init DIR) is written as that directory's own
// model type instead: its config.json with the run's length and position transform (rope_scaling,
// rope_theta), the parameters under the source's tensor names, its tokenizer files as they were;
// refused, one line, where the config cannot say the run's settings (interpolated ALiBi slopes).
#include <filesystem>

namespace xtrap {

void exportHuggingFace(const std::filesystem::path& runDir, const std::filesystem::path& outDir);

}  // namespace xtrap
