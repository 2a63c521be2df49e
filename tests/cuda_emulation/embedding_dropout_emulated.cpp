// The kernels of src/model/embedding_dropout.cu compiled as plain C++ against cuda_emulation.h, for
// tests/test_embedding_dropout_emulated.cpp. They use no shared memory.
#include "cuda_emulation.h"
#include "model/embedding_dropout.cu"
