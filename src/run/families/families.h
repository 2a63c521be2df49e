#pragma once
// The families of run/families/, one function each (pretrained_family.cpp lists them).
#include "run/pretrained_family.h"

namespace xtrap {

const PretrainedFamily& bloomFamily();
const PretrainedFamily& mptFamily();
const PretrainedFamily& gptNeoxFamily();
const PretrainedFamily& llamaFamily();
const PretrainedFamily& mistralFamily();
const PretrainedFamily& qwen2Family();
const PretrainedFamily& qwen3Family();
const PretrainedFamily& phi3Family();
const PretrainedFamily& gemmaFamily();
const PretrainedFamily& gemma2Family();
const PretrainedFamily& gemma3Family();
const PretrainedFamily& mosaicBertFamily();
const PretrainedFamily& jinaBertFamily();
const PretrainedFamily& bertFamily();
const PretrainedFamily& robertaFamily();

}  // namespace xtrap
