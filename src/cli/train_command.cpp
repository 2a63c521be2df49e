#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "data/task_mix.h"
#include "data/wikitext.h"
#include "dist/dist_env.h"
#include "dist/launcher.h"
#include "model/named_configs.h"
#include "run/adapt_config.h"
#include "train/init_from_run.h"
#include "train/trainer.h"
#include "util/choices.h"
#include "util/execution_context.h"

namespace xtrap {
namespace {

// Whether this build has the fused CUDA kernels (--unfused-elementwise turns them off).
#ifdef XTRAP_WITH_CUDA_KERNELS
constexpr bool kFusedKernels = true;
#else
constexpr bool kFusedKernels = false;
#endif

}  // namespace

CommandAction addTrainCommand(CLI::App& cmd) {
  auto model = std::make_shared<ModelConfig>();
  auto train = std::make_shared<TrainConfig>();
  auto out = std::make_shared<std::string>();
  auto resume = std::make_shared<std::string>();
  auto named = std::make_shared<std::string>();
  auto cutoffs = std::make_shared<std::string>("2000,10000");  // shown in --help; applied by the trainer
  auto noProgress = std::make_shared<bool>(false);
  auto unfusedElementwise = std::make_shared<bool>(false);
  auto noScale = std::make_shared<bool>(false);
  auto injectNan = std::make_shared<std::vector<int64_t>>();
  auto nproc = std::make_shared<int>(1);
  auto cudaGraph = std::make_shared<std::string>("auto");
  auto graphAllreduce = std::make_shared<std::string>("outside");
  train->dataDir = defaultDataDir().string();

  cmd.add_option("--arch", model->arch,
                 joinNames(ModelConfig::archNames()) + " (decoder: causal LM; encoder: masked LM)")
      ->capture_default_str();
  cmd.add_option("--pos", model->pos, "position method: " + joinNames(positionMethodNames()))->capture_default_str();
  std::vector<std::string> fullModels;  // the named configs that are not encoder set-ups
  for (const auto& name : namedConfigNames())
    if (!namedConfigFixesPositionAndHead(name)) fullModels.push_back(name);
  cmd.add_option("--config", *named,
                 "named config: " + joinNames(encoderSeedConfigNames()) + " (encoders: set arch, pos, head) | " +
                     joinNames(fullModels) +
                     " (paper-wt103: Press et al.'s WikiText-103 model; flags given beside it win)");
  cmd.add_option("--head", model->head, "output head: " + joinNames(ModelConfig::headNames()))->capture_default_str();
  cmd.add_option("--L", model->contextLength, "training context length")->capture_default_str();
  cmd.add_option("--layers", model->layers, "transformer blocks")->capture_default_str();
  cmd.add_option("--d-model", model->dModel, "model width")->capture_default_str();
  cmd.add_option("--heads", model->heads, "attention heads")->capture_default_str();
  cmd.add_option("--ffn", model->ffn, "feed-forward hidden width")->capture_default_str();
  cmd.add_option("--dropout", model->dropout, "embedding and residual dropout (and the two below unless given)")
      ->capture_default_str();
  auto attentionDropout = std::make_shared<double>(0.0), activationDropout = std::make_shared<double>(0.0);
  cmd.add_option("--attention-dropout", *attentionDropout, "dropout on attention probabilities (default: --dropout)");
  cmd.add_option("--activation-dropout", *activationDropout, "dropout after the FFN activation (default: --dropout)");
  cmd.add_option("--activation", model->activation, "FFN activation: " + joinNames(ModelConfig::activationNames()))
      ->capture_default_str();
  auto noFinalNorm = std::make_shared<bool>(false);
  cmd.add_flag("--no-final-norm", *noFinalNorm, "no LayerNorm after the last block");
  cmd.add_option("--max-positions", model->maxPositions, "learned position table size (0 = L)")->capture_default_str();
  auto* cutoffsOpt =
      cmd.add_option(
             "--adaptive-softmax", *cutoffs,
             "lm head: adaptive softmax cutoffs (untied), or none for the full softmax tied to the input embedding")
          ->capture_default_str();
  cmd.add_option("--adaptive-softmax-dropout", model->adaptiveSoftmaxDropout,
                 "dropout on the adaptive softmax's input and inside its tails")
      ->capture_default_str();
  cmd.add_flag("--adaptive-input", model->adaptiveInput,
               "adaptive input embeddings tied to the adaptive softmax (no V x d token embedding)");
  cmd.add_option("--alibi-init", model->alibiInit,
                 "learned slopes' init: " + joinNames(ModelConfig::alibiInitNames()) +
                     " (random: p~N(-2,1); default: random for alibi-learned, standard for bialibi)");
  auto bosFlag = std::make_shared<bool>(false), noBosFlag = std::make_shared<bool>(false);
  auto* bosOpt = cmd.add_flag("--bos", *bosFlag, "encoders: prepend <bos> to every window (default for bialibi)");
  cmd.add_flag("--no-bos", *noBosFlag, "encoders: no <bos> token (default except for bialibi)")->excludes(bosOpt);
  cmd.add_option("--clap-beta", model->clapBeta, "initial CLAP inverse temperature")->capture_default_str();
  cmd.add_flag("--no-scale-embedding", *noScale, "do not multiply token embeddings by sqrt(d_model)");
  cmd.add_option("--data", train->dataDir, "WikiText-format directory (wiki.{train,valid,test}.tokens)")
      ->capture_default_str();
  cmd.add_option("--out", *out, "run directory (default: runs/<arch>-<pos>-L<L>-<time>)");
  cmd.add_option("--resume", *resume, "continue RUN from its last checkpoint (its run.json settings apply)");
  auto init = std::make_shared<std::string>();
  auto initInterp = std::make_shared<std::string>("none");
  auto initScale = std::make_shared<double>(0.0);
  auto recipe = std::make_shared<std::string>();
  cmd.add_option("--init", *init,
                 "start from the weights of RUN, or of a pretrained decoder's Hugging Face directory (trained then "
                 "on its tokenizer's ids of --data), with a fresh optimizer at --L with --interp baked into the "
                 "model: extend, then adapt (docs/adapt.md)");
  cmd.add_option("--interp", *initInterp,
                 "--init: the position transform baked in: none | linear (PI; ALiBi: slopes / a) | ntk (NTK-aware; "
                 "NTK-ALiBi) | yarn (rotary)")
      ->capture_default_str();
  cmd.add_option("--scale", *initScale, "--init: the interpolation factor a (default: --L / the source's L)");
  cmd.add_option("--recipe", *recipe,
                 "fine-tuning presets (flags given beside it win): pi (Chen et al. 2023) | yarn (Peng et al. 2023): "
                 "lr 2e-5, 20 warmup steps, constant, AdamW betas 0.9,0.95, no weight decay");
  auto betas = std::make_shared<std::vector<double>>();
  cmd.add_option("--adam-betas", *betas, "AdamW beta1,beta2 (default 0.9,0.98)")->delimiter(',')->expected(2);
  cmd.add_option("--steps", train->steps, "optimizer steps")->capture_default_str();
  cmd.add_option("--tokens", train->tokens, "train on this many tokens instead of --steps")->capture_default_str();
  cmd.add_option("--batch", train->batchSequences, "sequences per step (0 = --batch-tokens / L)")
      ->capture_default_str();
  cmd.add_option("--batch-tokens", train->batchTokens, "tokens per step when --batch is 0")->capture_default_str();
  cmd.add_option("--accumulate", train->accumulate,
                 "micro-batches per step: each rank's sequences of a step through forward and backward in N equal "
                 "parts, gradients summed (the same step in the activation memory of B / N sequences)")
      ->capture_default_str();
  cmd.add_option("--lr", train->lr, "peak learning rate")->capture_default_str();
  cmd.add_option("--min-lr-ratio", train->minLrRatio, "cosine floor as a fraction of --lr")->capture_default_str();
  cmd.add_option("--warmup", train->warmupSteps, "linear warmup steps")->capture_default_str();
  cmd.add_option("--schedule", train->schedule, joinNames(TrainConfig::scheduleNames()))->capture_default_str();
  cmd.add_option("--weight-decay", train->weightDecay, "AdamW weight decay (matrices only)")->capture_default_str();
  cmd.add_option("--clip", train->clipNorm, "gradient norm clip (0 = off)")->capture_default_str();
  cmd.add_option("--seed", train->seed, "seed for data order, dropout, masking")->capture_default_str();
  cmd.add_option("--init-seed", model->initSeed, "seed for parameter initialisation")->capture_default_str();
  cmd.add_option("--threads", train->threads, "intra-op threads (0 = all cores)")->capture_default_str();
  cmd.add_option("--device", train->device,
                 std::string(kDeviceNames) + " (auto: CUDA when present; with --resume: move the run there)")
      ->capture_default_str();
  cmd.add_option("--dtype", train->dtype,
                 std::string(kDtypeNames) +
                     " compute precision (bfloat16: autocast; parameters, AdamW state and loss stay float32)")
      ->capture_default_str();
  cmd.add_option("--batch-order", train->batchOrder,
                 joinNames(TrainConfig::batchOrderNames()) + " (contiguous: L-token blocks in order)")
      ->capture_default_str();
  cmd.add_option("--log-every", train->logEvery, "train.jsonl line every N steps")->capture_default_str();
  cmd.add_option("--eval-every", train->evalEvery, "validation loss at L every N steps (0 = end only)")
      ->capture_default_str();
  cmd.add_option("--eval-tokens", train->evalTokens, "validation tokens for in-training evaluation")
      ->capture_default_str();
  cmd.add_option("--checkpoint-every", train->checkpointEvery, "checkpoint every N steps")->capture_default_str();
  cmd.add_option("--mask-prob", train->maskProb, "encoders: fraction of tokens selected for MLM")
      ->capture_default_str();
  cmd.add_option("--task-mix", train->taskMix,
                 "retrieval prompts in the training stream: TASK:SHARE,... (" + retrievalTaskNames() +
                     "; e.g. passkey:0.2,niah-multikey:0.2), each at the training length with the answer at a "
                     "random depth (default: none)");
  cmd.add_option("--task-filler", train->taskFiller,
                 "--task-mix filler of every task but kv-lines: repeat (grass-is-green sentences) | natural "
                 "(train-split text)")
      ->capture_default_str();
  cmd.add_option("--task-loss", train->taskLoss,
                 "what a --task-mix sequence's loss scores: all (every next token, as any text; an encoder's "
                 "masked words and the answer) | answer (the answer's tokens only)")
      ->capture_default_str();
  cmd.add_option("--max-bad-steps", train->maxBadSteps,
                 "stop after this many steps with a non-finite loss or gradient (0 = never)")
      ->capture_default_str();
  cmd.add_option("--cuda-graph", *cudaGraph,
                 joinNames(kCudaGraphModes) +
                     ": auto captures each training step as one CUDA graph where the GPU and the model allow it "
                     "(decoder, full softmax, dense gradients; else says why and reads loss and gradient norm on "
                     "the host every step, as off does); uncaptured runs the step without host reads, uncaptured, "
                     "on any device. Without host reads the loss is read every --log-every steps, a skipped "
                     "non-finite step is reported in the next train.jsonl line, and data-parallel ranks all-reduce "
                     "one gradient buffer after backward, hold whole AdamW moments and stop for a signal at a read")
      ->capture_default_str();
  cmd.add_option("--graph-allreduce", *graphAllreduce,
                 joinNames(kGraphAllreduceModes) +
                     ": where a captured data-parallel step all-reduces its gradients: outside its CUDA graphs "
                     "(one of the forward and backward, one of the update) or inside its one graph")
      ->capture_default_str();
  cmd.add_flag("--no-progress", *noProgress, "no progress bar");
  cmd.add_flag("--unfused-elementwise", *unfusedElementwise,
               "CUDA: the residual adds with their LayerNorms, the FFN activation and the embedding's dropout as "
               "LibTorch's operators, not the fused kernels (a before/after profile)");
  cmd.add_option("--nproc", *nproc,
                 "data-parallel over N local processes (each takes --batch / N sequences of every step)")
      ->capture_default_str();
  // Hidden test hook for the non-finite guard (tests/reliability_train.sh).
  cmd.add_option("--inject-nan-at", *injectNan, "steps whose loss is made NaN")->delimiter(',')->group("");

  return [=, &cmd] {
    // An option that does not apply is an error, never silently ignored.
    if (!resume->empty()) {
      rejectUnless(cmd, {"--dtype"}, false,
                   "does not apply with --resume (a run keeps the precision it was trained in; --device may move it)");
      for (const CLI::Option* o : cmd.get_options())
        if (o->count() > 0 && o->get_name() != "--resume" && o->get_name() != "--no-progress" &&
            o->get_name() != "--nproc" && o->get_name() != "--inject-nan-at" && o->get_name() != "--device" &&
            o->get_name() != "--cuda-graph" && o->get_name() != "--graph-allreduce")
          throw std::invalid_argument(o->get_name() + " does not apply with --resume (the run's run.json settings do)");
    }
    rejectUnless(cmd, {"--interp", "--scale"}, !init->empty(), "applies with --init (eval interpolates at inference)");
    if (!init->empty()) {
      rejectUnless(cmd,
                   {"--arch",
                    "--pos",
                    "--config",
                    "--head",
                    "--layers",
                    "--d-model",
                    "--heads",
                    "--ffn",
                    "--dropout",
                    "--attention-dropout",
                    "--activation-dropout",
                    "--activation",
                    "--no-final-norm",
                    "--max-positions",
                    "--adaptive-softmax",
                    "--adaptive-softmax-dropout",
                    "--adaptive-input",
                    "--alibi-init",
                    "--bos",
                    "--no-bos",
                    "--clap-beta",
                    "--no-scale-embedding",
                    "--init-seed"},
                   false, "does not apply with --init (the source run's model is adapted)");
      if (cmd.count("--L") == 0) throw std::invalid_argument("--init needs --L, the length to adapt to");
      rejectUnless(cmd, {"--scale"}, *initInterp != "none", "applies with an --interp other than none");
    }
    if (!recipe->empty()) {
      applyAdaptRecipe(*recipe, *train, [&cmd](const std::string& key) {
        std::string flag = "--" + key;
        std::replace(flag.begin(), flag.end(), '_', '-');
        return cmd.count(flag) > 0;
      });
    }
    if (!betas->empty()) train->beta1 = (*betas)[0], train->beta2 = (*betas)[1];
    const TaskMix mix = parseTaskMix(train->taskMix);
    bool mixHasFiller = false;
    for (int task = 0; task < kRetrievalTasks; ++task)
      mixHasFiller |= mix.share[size_t(task)] > 0 && usesFiller(RetrievalTask(task));
    rejectUnless(cmd, {"--task-filler"}, mixHasFiller,
                 "applies with a --task-mix task that has filler (not kv-lines alone)");
    rejectUnless(cmd, {"--task-loss"}, !train->taskMix.empty(), "applies with a --task-mix");
    train->taskMix = taskMixSpec(mix);  // run.json records the canonical spelling
    rejectUnless(cmd, {"--arch", "--pos", "--head"}, named->empty() || !namedConfigFixesPositionAndHead(*named),
                 "and this --config exclude each other (it is its arch, pos and head)");
    // The model the flags describe: a named config first, then every flag given beside it.
    auto modelFromFlags = [&] {
      ModelConfig m = *model;
      m.finalNorm = !*noFinalNorm;
      if (cmd.count("--attention-dropout")) m.attentionDropout = *attentionDropout;
      if (cmd.count("--activation-dropout")) m.activationDropout = *activationDropout;
      if (!named->empty()) applyNamedConfig(*named, m, [&cmd](const std::string& flag) { return cmd.count(flag) > 0; });
      m.scaleEmbedding = !*noScale;
      if (*bosFlag || *noBosFlag) m.bos = *bosFlag;
      if (*cutoffs != "none" && cutoffsOpt->count() > 0) {
        std::stringstream ss(*cutoffs);
        std::string item;
        while (std::getline(ss, item, ',')) {
          try {
            m.adaptiveSoftmaxCutoffs.push_back(std::stoll(item));
          } catch (const std::exception&) {
            throw std::invalid_argument("bad --adaptive-softmax cutoff '" + item + "'");
          }
        }
      }
      return m;
    };
    // --init: the source's model at --L with the transform baked in (run/adapt_config.h).
    std::optional<RunInfo> source;
    double initFactor = 1.0;
    if (!init->empty()) {
      source = readInitSource(*init);
      // A run's words are its embedding's rows; a pretrained model reads any text through its tokenizer.
      if (cmd.count("--data") == 0 && source->pretrained.empty()) train->dataDir = source->train.dataDir;
      if (*initInterp != "none")
        initFactor = *initScale > 0 ? *initScale : defaultAdaptScale(model->contextLength, source->model.contextLength);
    }
    ModelConfig chosen =
        source ? adaptedModelConfig(source->model, model->contextLength, parseInterp(*initInterp), initFactor)
               : modelFromFlags();
    PositionMethod pos = chosen.position();
    rejectUnless(cmd, {"--alibi-init"}, pos == PositionMethod::AlibiLearned || pos == PositionMethod::BiAlibi,
                 "applies to learned slopes only (--pos alibi-learned or bialibi)");
    rejectUnless(cmd, {"--mask-prob", "--no-bos"}, !chosen.causal(), "is for encoders");
    rejectUnless(cmd, {"--clap-beta"}, chosen.head == "clap", "applies to --head clap only");
    rejectUnless(cmd, {"--max-positions"}, pos == PositionMethod::Learned, "applies to --pos learned only");
    rejectUnless(cmd, {"--batch-tokens"}, cmd.count("--batch") == 0, "applies only when --batch is not given");
    rejectUnless(cmd, {"--steps"}, cmd.count("--tokens") == 0, "and --tokens exclude each other");
    rejectUnless(cmd, {"--min-lr-ratio"}, train->schedule == "cosine", "is the cosine schedule's floor");
    // A bad name, or cuda without CUDA, fails before any rank starts.
    const ExecutionContext exec = makeExecutionContext(train->device, train->dtype);
    checkName(kCudaGraphModes, *cudaGraph, "--cuda-graph");
    checkName(kGraphAllreduceModes, *graphAllreduce, "--graph-allreduce");
    rejectUnless(cmd, {"--graph-allreduce"},
                 exec.device.is_cuda() && *cudaGraph == "auto" && (*nproc != 1 || insideDistributedJob()),
                 "applies to a data-parallel job (--nproc N or torchrun) on CUDA with --cuda-graph auto");
    rejectUnless(cmd, {"--unfused-elementwise"}, kFusedKernels && exec.device.is_cuda(),
                 "applies on CUDA in a build with the CUDA kernels (elsewhere nothing is fused)");
    if (*nproc != 1 && !insideDistributedJob()) return launchLocalRanks(*nproc);
    DistEnv dist = distEnvFromEnvironment();
    if (dist.distributed() && resume->empty() && out->empty())
      throw std::invalid_argument("a distributed run needs --out (every rank must name the same run directory)");
    TrainRequest req;
    req.progress = !*noProgress;
    req.cudaGraph = *cudaGraph;
    req.graphAllreduce = *graphAllreduce;
    req.fusedElementwise = !*unfusedElementwise;
    req.injectNanAtSteps.insert(injectNan->begin(), injectNan->end());
    if (!resume->empty()) {
      req.resume = true;
      req.runDir = *resume;
      if (cmd.count("--device")) req.resumeDevice = train->device;
    } else if (source) {
      req.model = chosen;
      req.train = *train;
      req.train.initRun = *init;
      req.train.initSource = initSourceIdentity(*source);
      req.train.initStep = source->stepsDone;
      req.train.initInterp = *initInterp;
      req.train.initScale = initFactor;
      req.runDir = out->empty() ? freshRunDir(kRunsRoot, req.model) : std::filesystem::path(*out);
      requireNoRunIn(req.runDir);
    } else {
      req.model = chosen;
      // Not given: the trainer applies the default cutoffs to an lm head where they fit the
      // vocabulary (a named config's own cutoffs stay). Given with another head, validate() rejects them.
      req.defaultAdaptiveSoftmax = cutoffsOpt->count() == 0 && req.model.head == "lm";
      // Adaptive input with the default cutoffs: the trainer checks it once it has set them.
      ModelConfig checked = req.model;
      if (req.defaultAdaptiveSoftmax && checked.adaptiveSoftmaxCutoffs.empty()) checked.adaptiveInput = false;
      checked.validate();
      req.train = *train;
      req.runDir = out->empty() ? freshRunDir(kRunsRoot, req.model) : std::filesystem::path(*out);
      requireNoRunIn(req.runDir);
    }
    RunInfo run = trainRun(req);
    if (dist.rank != 0) return;
    fmt::print("run {}: {} steps, val loss {:.4f} (ppl {:.2f}) at L={}, {:.0f} tok/s\n", run.dir.string(),
               run.stepsDone, run.extra.value("final_val_loss", 0.0), run.extra.value("final_val_ppl", 0.0),
               run.model.contextLength, run.extra.value("tok_per_s", 0.0));
  };
}

}  // namespace xtrap
