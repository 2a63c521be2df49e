#pragma once
// A scenario file (TOML) names one experiment end to end: what to train, which variants, how to
// evaluate and probe them. Parsing is torch-free so the grammar is testable without tensors.
//
//   description = "..."                  optional, one line
//   [train]                              model and training keys shared by every variant
//   [[variant]]  name = "alibi"          a variant: its name plus any [train] key as an override
//   [[variant]]  name = "bloom-1b7"      a pretrained model evaluated as it is, instead of a
//                model = "DIR"           run the scenario trains (see below)
//   [eval] or [[eval]]                   one or more evaluation blocks
//   [probe]                              optional: bias / attention dumps per variant
//
// Pretrained variants: `model` names a Hugging Face model directory (run/pretrained_config.h),
// relative to the scenario file's directory. The variant takes only `data` (the WikiText
// directory whose split it scores, tokenized by its tokenizer), `device`, `dtype` and
// `threads`, from its table or else from [train]; a scenario whose variants are all pretrained
// needs no [train]. The directory is read when the scenario is parsed: a missing one is a
// one-line error naming it, so is any other key.
//
// Model / training keys (the names of `xtrap train` options with '_' for '-'):
//   data arch config pos head L layers d_model heads ffn dropout max_positions
//   adaptive_softmax_cutoffs scale_embedding clap_beta alibi_init bos rotary_base t5_buckets
//   t5_max_distance init_seed steps tokens batch batch_tokens lr min_lr_ratio warmup schedule
//   weight_decay clip seed threads batch_order log_every eval_every eval_tokens checkpoint_every
//   mask_prob device dtype task_mix task_filler seeds adam_betas; init interp scale recipe
// `device` (auto | cpu | cuda) and `dtype` (float32 | bfloat16) are where and in what precision a
// variant trains, is evaluated and probed; `xtrap run --device/--dtype` overrides them for all.
// `seeds = [1, 2, 3]` (in [train] or a [[variant]]) runs the variant once per seed, each run
// with that seed as both `seed` and `init_seed` (initialisation, data order, dropout, training
// masks); tables then show mean ± sample standard deviation over the seeds. It cannot be combined
// with `seed` or `init_seed` in the same scenario.
// `adam_betas = [0.9, 0.95]` sets AdamW's betas (train --adam-betas).
// `init = "NAME"` (train --init, docs/adapt.md) trains the variant from the final weights of the
// earlier variant NAME at the variant's own `L` (required), with `interp` (none | linear | ntk |
// yarn) at factor `scale` (default L / NAME's L) baked into its model, and `recipe` (pi | yarn)
// setting lr, warmup, schedule, weight_decay and adam_betas where the variant's table does not.
// Its model is NAME's: model keys, seeds and other data are errors. Its run identity names NAME's
// run identity and final step, so its directory is known before NAME is trained. NAME may be a
// pretrained variant: the adapted run trains on its tokenizer's ids of the variant's `data`, and
// names it by its weights digest.
// `config` (a named encoder configuration) is applied before the other keys of its table, so
// `config = "zero-clap"` with `pos = "alibi"` means zero-clap's head with symmetric ALiBi.
// A relative `data` path is relative to the scenario file's directory.
//
// Eval keys: task (perplexity | passkey | kv-lines; retrieval adds depths (the --depths grammar,
// a string, or a list of whole percents), trials, filler (passkey: repeat | natural),
// prompt_seed), lvalid (the --Lvalid range grammar, a string, or a list of integers), modes
// (nonoverlap / sliding), strides (sliding strides; default L/2), interps, ntk_heads (all |
// leading-power-of-two, with ntk or dynamic-ntk), scale (linear / ntk / yarn: the fixed factor a;
// default the longest Lvalid / L_train), scale_per_length (true: linear / ntk / yarn take
// a = Lvalid / L_train for each length), split, max_tokens, batch, variants (names;
// default all).
// Probe keys: bias_len, attn_lvalid, attn_offset, stats_only, variants.
//
// Unknown keys, wrong types and invalid values are errors "FILE:LINE:COLUMN: ..." naming the key.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/interpolation.h"
#include "model/model_config.h"
#include "run/train_config.h"

namespace xtrap {

// One run of a variant. A variant with `seeds` is several runs of the same name, one per seed.
struct ScenarioVariant {
  std::string name;
  ModelConfig model;
  TrainConfig train;
  bool repeated = false;  // one of a `seeds` list: its seed is train.seed (= model.initSeed)
  // A pretrained model evaluated as it is, read when the scenario is parsed: its directory
  // (absolute or relative to the working directory), model_type and pretrainedWeightsDigest
  // (run/pretrained_config.h); `model` is its config. Empty for a variant the scenario trains.
  std::string pretrainedDir, pretrainedType, weightsDigest;
  int64_t trainLength = 0;  // pretrained: train_length, the L_train its config does not record; 0 = none
  bool pretrained() const { return !pretrainedDir.empty(); }
  // `init = "NAME"`: trained from variant NAME's final weights (scenario/variant_keys.h); empty
  // for a run trained from scratch.
  std::string initVariant;
  bool adapted() const { return !initVariant.empty(); }
  // The name, with "@seedN" for a repeated run (manifest keys, probe files, messages).
  std::string label() const { return repeated ? name + "@seed" + std::to_string(train.seed) : name; }
};

struct ScenarioEval {
  std::vector<int64_t> lvalids;
  std::vector<std::string> modes{"nonoverlap"};
  std::vector<int64_t> strides;  // sliding strides; empty = L_train / 2
  std::vector<Interp> interps{Interp::None};
  // Context extension (eval --extend): one pass per interpolation and extension.
  std::vector<std::string> extensions{"none"};
  ExtensionSettings extensionSettings;
  NtkHeads ntkHeads = NtkHeads::All;  // ntk / dynamic-ntk of ALiBi slopes
  bool scalePerLength = false;        // linear / ntk / yarn: a = Lvalid / L_train each row (eval --scale-per-length)
  double scale = 0;                   // linear / ntk / yarn: the fixed a (eval --scale); 0 = longest Lvalid / L_train
  std::string split = "valid";
  int64_t maxTokens = 0;  // > 0: score only a prefix of the split
  int64_t batch = 8;
  std::vector<std::string> variants;  // empty = every variant
  // Retrieval (eval/retrieval_score.h): task passkey | kv-lines scores prompts, one row per
  // (Lvalid, depth); modes and strides then do not apply.
  std::string task = "perplexity";
  std::vector<double> depths{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};  // percent
  int64_t trials = 50;
  std::string filler = "repeat";
  uint64_t promptSeed = 1;
  bool retrieval() const { return task != "perplexity"; }
};

struct ScenarioProbe {
  int64_t biasLen = 0;     // > 0: dump each variant's bias matrix of this size
  int64_t attnLvalid = 0;  // > 0: dump attention statistics for one window of this length
  int64_t attnOffset = 0;
  bool statsOnly = true;
  std::vector<std::string> variants;  // empty = every variant
};

struct Scenario {
  std::string name;  // the file's stem; results go to results/<name>/
  std::string description;
  std::string text;  // the file as read, copied next to the results
  std::vector<ScenarioVariant> variants;
  std::vector<ScenarioEval> evals;
  bool hasProbe = false;
  ScenarioProbe probe;

  // Variants selected by a block's `variants` list (all when empty), in file order.
  std::vector<const ScenarioVariant*> select(const std::vector<std::string>& names) const;
};

// Names each adapted variant's source (train.initSource) by that variant's run identity, which
// needs the devices resolved (auto -> cpu | cuda), or a pretrained variant's weights digest.
void linkInitSources(Scenario& s);

// `source` names the text in error messages; relative `data` paths resolve against `baseDir`.
Scenario parseScenario(const std::string& text, const std::string& source, const std::filesystem::path& baseDir);
Scenario loadScenario(const std::filesystem::path& file);

}  // namespace xtrap
