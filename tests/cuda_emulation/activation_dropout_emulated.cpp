// The kernels of src/model/activation_dropout.cu compiled as plain C++ against cuda_emulation.h, for
// tests/test_activation_dropout_emulated.cpp. They use no shared memory.
#include "cuda_emulation.h"
#include "model/activation_dropout.cu"
