#pragma once
// Stands in for the CUDA toolkit's <mma.h> in the CPU emulation (cuda_emulation.h).
#include "../cuda_emulation.h"
