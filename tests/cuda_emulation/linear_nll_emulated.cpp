// linearNll's CUDA passes (src/model/linear_nll.cu) compiled as plain C++ against
// cuda_emulation.h, for tests/test_linear_nll_emulated.cpp. They use no shared memory.
#include "cuda_emulation.h"
#include "model/linear_nll.cu"
