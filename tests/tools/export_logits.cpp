// export_logits RUN TOKENS OUT [INTERP A [NTK-HEADS [DTYPE]]]: xtrap's side of the export test and
// of the pretrained-model test (RUN may be a Hugging Face directory). Reads whitespace-separated
// token ids from TOKENS, runs the model on them as one window (eval mode, on the CPU, computing in
// DTYPE: float32 or bfloat16), with interpolation INTERP at factor A when given, and writes the
// head's scores, (T, V) float32 little-endian, to OUT: logits, or log-probabilities for the
// adaptive softmax (whose head has no logits). Prints "NAME DTYPE" for every parameter.
#include <torch/torch.h>

#include <cstdio>
#include <exception>
#include <fstream>

#include "eval/model_interpolation.h"
#include "run/checkpoint.h"
#include "run/run_directory.h"

int main(int argc, char** argv) {
  if (argc != 4 && argc != 6 && argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: export_logits RUN TOKENS OUT [INTERP A [NTK-HEADS [DTYPE]]]\n");
    return 2;
  }
  try {
    torch::set_num_threads(1);
    auto ctx = xtrap::makeExecutionContext("cpu", argc == 8 ? argv[7] : "float32");
    xtrap::Transformer model = xtrap::loadTrainedModel(xtrap::readRunInfo(argv[1]), ctx);
    for (const auto& p : model->named_parameters(true))
      std::printf("%s %s\n", p.key().c_str(), c10::toString(p.value().scalar_type()));
    if (argc >= 6)
      xtrap::applyInterpolation(model, xtrap::parseInterp(argv[4]), std::stod(argv[5]),
                                argc >= 7 ? xtrap::parseNtkHeads(argv[6]) : xtrap::NtkHeads::All);
    std::ifstream in(argv[2]);
    std::vector<int64_t> ids;
    for (int64_t id; in >> id;) ids.push_back(id);
    torch::NoGradGuard noGrad;
    auto tokens = torch::tensor(ids, torch::kLong).unsqueeze(0);                                       // (1, T)
    auto scores = model->logits(model->features(tokens).squeeze(0)).to(torch::kFloat32).contiguous();  // (T, V)
    std::ofstream out(argv[3], std::ios::binary);
    out.write(static_cast<const char*>(scores.data_ptr()), static_cast<std::streamsize>(scores.nbytes()));
    return out ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "export_logits: %s\n", e.what());
    return 1;
  }
}
