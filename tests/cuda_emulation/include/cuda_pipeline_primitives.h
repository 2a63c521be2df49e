#pragma once
// Stands in for the CUDA toolkit's <cuda_pipeline_primitives.h> in the CPU emulation (cuda_emulation.h).
#include "../cuda_emulation.h"
