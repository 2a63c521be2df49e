#pragma once
// Stands in for the CUDA toolkit's <cuda_runtime_api.h> in the CPU emulation (cuda_emulation.h).
#include "../cuda_emulation.h"
