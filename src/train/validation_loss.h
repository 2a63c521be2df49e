#pragma once
// The validation loss that training logs every evalEvery steps and at the end.
#include "data/wikitext.h"
#include "dist/dist_group.h"
#include "model/transformer.h"
#include "run/train_config.h"

namespace xtrap {

// Mean validation NLL at the training length on the first evalTokens tokens of the valid split;
// the ranks split the windows.
double validationLoss(Transformer& model, const Corpus& corpus, const TrainConfig& t, DistGroup& group);

}  // namespace xtrap
