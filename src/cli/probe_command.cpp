#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "attention_dump.h"
#include "bias_dump.h"
#include "cli/commands.h"
#include "dist/dist_env.h"
#include "eval/model_interpolation.h"
#include "run/checkpoint.h"
#include "run/run_directory.h"
#include "util/atomic_file.h"
#include "util/choices.h"
#include "util/execution_context.h"
#include "util/gnuplot.h"
#include "util/runtime.h"

namespace xtrap {

namespace {
// "all" or a comma list of non-negative integers.
std::vector<int64_t> parseIndexList(const std::string& s, const std::string& flag) {
  std::vector<int64_t> v;
  if (s == "all") return v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(flag + ": bad index '" + item + "' (use all or e.g. 0,2)");
    v.push_back(std::stoll(item));
  }
  return v;
}
}  // namespace

CommandAction addProbeCommand(CLI::App& cmd) {
  auto runs = std::make_shared<std::vector<std::string>>();
  auto plotFile = std::make_shared<std::string>();
  auto cells = std::make_shared<int64_t>(256);
  auto biasFile = std::make_shared<std::string>();
  auto attnFile = std::make_shared<std::string>();
  auto print = std::make_shared<bool>(false);
  auto fresh = std::make_shared<ModelConfig>();
  auto len = std::make_shared<int64_t>(8);
  auto req = std::make_shared<AttentionDumpRequest>();
  auto layers = std::make_shared<std::string>("all");
  auto heads = std::make_shared<std::string>("all");
  auto interp = std::make_shared<std::string>("none");
  auto storeDtype = std::make_shared<std::string>("float16");
  auto device = std::make_shared<std::string>("auto");
  auto dtype = std::make_shared<std::string>("float32");
  auto threads = std::make_shared<int64_t>(0);
  auto textFile = std::make_shared<std::string>();
  auto dataDir = std::make_shared<std::string>();
  auto* archOpt =
      cmd.add_option("--arch", fresh->arch, "fresh spec for --dump-bias: " + joinNames(ModelConfig::archNames()));
  auto* posOpt = cmd.add_option("--pos", fresh->pos,
                                "fresh spec for --dump-bias: position method, " + joinNames(positionMethodNames()));
  auto* headsOpt =
      cmd.add_option("--heads", *heads, "fresh spec: number of heads; --dump-attn: heads to dump (all or 0,2)");
  cmd.add_option("runs", *runs,
                 "run directory (default: the most recent under runs/); --plot takes several, side by side");
  cmd.add_option("--dump-bias", *biasFile, "write the attention bias [H, len, len] and per-head parameters to FILE.h5");
  cmd.add_option("--len", *len, "--dump-bias matrix size")->capture_default_str();
  cmd.add_flag("--print", *print, "print the bias matrix per head");
  cmd.add_option("--dump-attn", *attnFile, "write attention maps and statistics to FILE.h5");
  cmd.add_option("--plot", *plotFile,
                 "draw attention heatmaps of the selected layers/heads into FILE.png and the mean attention distance "
                 "per head into FILE-distance.png (gnuplot)");
  cmd.add_option("--cells", *cells, "--plot heatmap resolution: the window is pooled to at most N x N cells")
      ->capture_default_str();
  cmd.add_option("--Lvalid", req->Lvalid, "--dump-attn / --plot window length N")->capture_default_str();
  cmd.add_option("--offset", req->offset, "--dump-attn / --plot first token of the window in the split")
      ->capture_default_str();
  cmd.add_option("--split", req->split, "valid | test")->capture_default_str();
  cmd.add_option("--text", *textFile,
                 "--dump-attn / --plot of a pretrained model: the UTF-8 text file the window is cut from");
  cmd.add_option("--data", *dataDir,
                 "--dump-attn / --plot of a pretrained model: a WikiText directory whose --split the window is cut "
                 "from (raw, or tokenized files detokenized)");
  cmd.add_option("--layers", *layers, "layers to dump maps for (all or 0,2)")->capture_default_str();
  cmd.add_option("--interp", *interp,
                 joinNames(interpNames()) + " (--dump-bias: at --len; --dump-attn / --plot: at --Lvalid)")
      ->capture_default_str();
  cmd.add_option("--scale", req->scale,
                 "linear / ntk / yarn factor a >= 1 (default: window length / L_train; a fresh spec needs it)");
  auto trainLength = std::make_shared<int64_t>(0);
  cmd.add_option("--train-length", *trainLength,
                 "pretrained models: the length they were trained at, where config.json does not record it (the "
                 "interpolation factor; default: from config.json)");
  cmd.add_option("--extend", req->extend,
                 "--dump-attn / --plot: a context extension, " + joinNames(extensionMethodNames(), " ") +
                     " or METHOD+logn (see eval)")
      ->capture_default_str();
  addExtensionSettingOptions(cmd, req->extensionSettings);
  auto ntkHeads = std::make_shared<std::string>("all");
  cmd.add_option("--ntk-heads", *ntkHeads,
                 "ntk / dynamic-ntk of ALiBi slopes: " + joinNames(ntkHeadsNames()) + " (see eval)")
      ->capture_default_str();
  cmd.add_option("--store-dtype", *storeDtype, "float16 | float32: the type the maps are stored in")
      ->capture_default_str();
  cmd.add_flag("--stats-only", req->statsOnly, "statistics only, no maps");
  cmd.add_flag("--with-bias", req->withBias, "also write layer_XX/bias");
  cmd.add_option("--query-block", req->queryBlock, "query rows per block")->capture_default_str();
  cmd.add_option("--threads", *threads, "intra-op threads (0 = all cores)")->capture_default_str();
  cmd.add_option("--device", *device, std::string(kDeviceNames) + " (auto: CUDA when present)")->capture_default_str();
  cmd.add_option("--dtype", *dtype,
                 std::string(kDtypeNames) +
                     " compute precision of --dump-attn / --plot (bfloat16: autocast; the maps' type is --store-dtype)")
      ->capture_default_str();

  return [=, &cmd] {
    // --dtype named the stored maps' type before it named the compute precision.
    if (*dtype == "float16")
      throw std::invalid_argument(
          "--dtype float16: the stored maps' type is now --store-dtype float16|float32; --dtype is the compute "
          "precision (" +
          std::string(kDtypeNames) + ")");
    bool bias = !biasFile->empty(), attn = !attnFile->empty(), plot = !plotFile->empty();
    if (!bias && !attn && !plot)
      throw std::invalid_argument("probe needs --dump-bias FILE.h5, --dump-attn FILE.h5 or --plot FILE.png");
    bool freshSpec = archOpt->count() + posOpt->count() > 0;
    // An option that does not apply to what was asked for is an error, not silently ignored.
    rejectUnless(cmd, {"--arch", "--pos"}, bias && !attn && !plot, "makes a fresh spec for --dump-bias only");
    rejectUnless(cmd, {"runs"}, !freshSpec, "and a fresh spec (--arch/--pos) exclude each other");
    rejectUnless(cmd, {"--len", "--print"}, bias, "applies to --dump-bias only");
    rejectUnless(cmd, {"--train-length"}, !freshSpec, "applies to a pretrained model's directory, not a fresh spec");
    if (cmd.count("--train-length") && *trainLength < 1) throw std::invalid_argument("--train-length must be >= 1");
    rejectUnless(cmd, {"--Lvalid", "--offset", "--split", "--query-block", "--text", "--data"}, attn || plot,
                 "applies to --dump-attn and --plot only");
    if (!textFile->empty() && !dataDir->empty())
      throw std::invalid_argument("--text and --data name the text two ways; give one");
    rejectUnless(cmd, {"--split"}, textFile->empty(), "selects a split of --data or of a run's data, not of --text");
    rejectUnless(cmd, {"--stats-only"}, attn, "applies to --dump-attn only");
    rejectUnless(cmd, {"--store-dtype", "--with-bias"}, attn && !req->statsOnly,
                 "applies to --dump-attn maps (not with --stats-only)");
    rejectUnless(cmd, {"--dtype"}, attn || plot,
                 "applies to --dump-attn and --plot only (a bias dump runs no forward)");
    if (cmd.count("--dtype") && attn && !req->statsOnly && cmd.count("--store-dtype") == 0)
      std::fprintf(stderr, "note: --dtype %s is the compute precision; the maps are stored as %s (--store-dtype)\n",
                   dtype->c_str(), storeDtype->c_str());
    rejectUnless(cmd, {"--layers"}, (attn && !req->statsOnly) || plot, "selects --dump-attn maps or --plot layers");
    rejectUnless(cmd, {"--cells"}, plot, "applies to --plot only");
    rejectUnless(cmd, {"--heads"}, freshSpec || (attn && !req->statsOnly) || plot,
                 "is a fresh spec's head count or the --dump-attn / --plot heads");
    Interp interpolation = parseInterp(*interp);
    rejectUnless(cmd, {"--scale"}, usesFixedScale(interpolation), "applies to --interp linear, ntk and yarn only");
    if (cmd.count("--scale") && req->scale < 1) throw std::invalid_argument("--scale must be >= 1");
    rejectUnless(cmd, {"--ntk-heads"}, interpolation == Interp::Ntk || interpolation == Interp::DynamicNtk,
                 "applies to --interp ntk and dynamic-ntk only");
    req->ntkHeads = parseNtkHeads(*ntkHeads);
    std::vector<std::string> extendOptions = kExtensionSettingOptions;
    extendOptions.push_back("--extend");
    rejectUnless(cmd, extendOptions, attn || plot, "applies to --dump-attn and --plot");
    rejectUnless(cmd, {"--with-bias"}, req->extend == "none",
                 "writes the position method's bias at the true positions; with --extend the far pairs differ");
    checkExtensionSettingsUsed({req->extend}, req->extensionSettings);
    if (runs->size() > 1 && (!biasFile->empty() || !attnFile->empty()))
      throw std::invalid_argument("--dump-bias and --dump-attn take one run; only --plot takes several");
    for (const auto& file : {*biasFile, *attnFile, *plotFile})
      if (!file.empty()) requireWritableDirectoryFor(file);
    if (!plotFile->empty()) {
      if (std::filesystem::path(*plotFile).extension() != ".png")
        throw std::invalid_argument("--plot must end in .png: " + *plotFile);
      // A requested picture that cannot be drawn fails before any work, not after it.
      if (!gnuplotAvailable()) throw std::runtime_error(plotterMissingMessage(*plotFile));
      if (*cells < 2 || *cells > 1024) throw std::invalid_argument("--cells must be in 2..1024");
    }
    std::vector<std::filesystem::path> runDirs;
    for (const auto& r : *runs) runDirs.emplace_back(r);
    bool needsRun = !freshSpec || attn || plot;  // a fresh spec's bias needs none
    if (runDirs.empty() && needsRun) runDirs.push_back(latestRunDir(kRunsRoot));
    configureRuntime(*threads);
    ExecutionContext ctx = makeExecutionContext(*device, *dtype, distEnvFromEnvironment().localRank);
    if (bias) {
      Transformer model{nullptr};
      double a = 1;
      if (freshSpec) {
        ModelConfig c = *fresh;
        if (*heads == "all") throw std::invalid_argument("--dump-bias with a fresh spec needs --heads N");
        try {
          c.heads = std::stoll(*heads);
        } catch (const std::exception&) {
          throw std::invalid_argument("--heads: expected a number, got '" + *heads + "'");
        }
        if (c.heads < 1 || c.heads > 1024) throw std::invalid_argument("--heads must be in 1..1024");
        if (isDynamic(interpolation))
          throw std::invalid_argument("--interp " + *interp + " needs a run's L_train; a fresh spec has none");
        if (interpolation != Interp::None && !cmd.count("--scale"))
          throw std::invalid_argument("--interp with a fresh spec needs --scale A (there is no L_train)");
        c.dModel = 2 * c.heads;  // only the position method matters here
        c.vocabSize = 4;
        c.layers = 1;
        c.alibiInit = "standard";
        model = Transformer(c);
        model->place(ctx);
        a = interpolation == Interp::None ? 1.0 : req->scale;
      } else {
        RunInfo info = readRunInfo(runDirs.front());
        setTrainLength(info, *trainLength);
        model = loadTrainedModel(info, ctx);
        a = interpolationPlan(interpolation, *len, model->config.contextLength, req->scale, 1.0).scaleFor(*len);
      }
      if (*len < 1 || *len > 8192) throw std::invalid_argument("--len must be in 1..8192");
      if (interpolation != Interp::None && !model->linearBias())
        throw std::invalid_argument("--interp with --dump-bias applies to ALiBi-family methods, not --pos " +
                                    model->config.pos);
      std::string used = applyInterpolation(model, interpolation, a, req->ntkHeads);
      dumpBias(model, *len, *biasFile, {interpLabel(interpolation, req->ntkHeads), a, used});
      if (*print) std::fputs(formatBiasMatrix(attentionBiasMatrix(model, std::min<int64_t>(*len, 16))).c_str(), stdout);
      if (interpolation != Interp::None)
        std::fprintf(stderr, "interp %s, a = %g: %s\n", interp->c_str(), a, used.c_str());
      std::fprintf(stderr, "bias: %s\n", biasFile->c_str());
    }
    if (attn || plot) {
      AttentionDumpRequest r = *req;
      r.out = *attnFile;
      r.layers = parseIndexList(*layers, "--layers");
      r.heads = parseIndexList(*heads, "--heads");
      r.interp = interpolation;
      if (*storeDtype != "float16" && *storeDtype != "float32")
        throw std::invalid_argument("--store-dtype must be float16 or float32");
      r.dtype = *storeDtype == "float16" ? StoredFloat::Float16 : StoredFloat::Float32;
      if (r.Lvalid < 1 || r.Lvalid > 1 << 20) throw std::invalid_argument("--Lvalid must be in 1..1048576");
      if (r.queryBlock < 1) throw std::invalid_argument("--query-block must be >= 1");
      std::vector<RunPicture> pictures;
      for (const auto& dir : runDirs) {
        RunInfo info = readRunInfo(dir);
        setTrainLength(info, *trainLength);
        ProbeText text = loadProbeText(info, *textFile, *dataDir, r.split);
        // Each loads its own model: both apply the interpolation to the slopes they are given.
        if (!attnFile->empty()) {
          Transformer model = loadTrainedModel(info, ctx);
          dumpAttention(info, model, text, r);
          std::fprintf(stderr, "attention: %s\n", attnFile->c_str());
        }
        if (!plotFile->empty()) {
          Transformer model = loadTrainedModel(info, ctx);
          pictures.push_back(attentionPicture(info, model, text, r, *cells));
        }
      }
      if (!plotFile->empty()) {
        plotAttention(*plotFile, pictures);
        std::fprintf(stderr, "plot: %s and %s\n", plotFile->c_str(), distancePlotPath(*plotFile).c_str());
      }
    }
  };
}

}  // namespace xtrap
