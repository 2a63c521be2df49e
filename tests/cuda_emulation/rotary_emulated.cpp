// The rotary kernel (src/model/position/rotary.cu) compiled as plain C++ against cuda_emulation.h,
// for tests/test_rotary_emulated.cpp. It uses no shared memory.
#include "cuda_emulation.h"
#include "model/position/rotary.cu"
