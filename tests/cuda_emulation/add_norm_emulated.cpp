// The kernels of src/model/add_norm.cu compiled as plain C++ against cuda_emulation.h, for
// tests/test_add_norm_emulated.cpp. They use no shared memory.
#include "cuda_emulation.h"
#include "model/add_norm.cu"
