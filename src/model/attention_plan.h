#pragma once
// Which attention path computes one forward: a pure function of what the forward is (device,
// window length, training with dropout, probing, bias kind) and of what this build has (SDPA,
// a fused CPU SDPA kernel, the fused CUDA kernel of the ALiBi family). Every path computes the same attention from the
// same LinearBiasSpec / bias provider; they differ in memory and speed only (attention.h). Torch-free, so the whole
// table is a unit test.
#include <cstdint>
#include <string>

namespace xtrap {

enum class AttentionPath {
  Reference,        // the math: (B, H, T, T) logits + full bias, softmax, dropout, probabilities x values
  CausalSkip,       // causal, full bias: query blocks skip the masked upper-right blocks (CPU)
  Block,            // query blocks, each block's bias computed from the provider: O(T * block) memory
  Sdpa,             // LibTorch 2.x scaled_dot_product_attention, the bias as an additive float32 mask
  Recompute,        // training on the CPU: query blocks whose probabilities the backward pass recomputes
  FusedLinearBias,  // CUDA, ALiBi family: one flash-style kernel computing the bias per tile, O(T) memory
};

enum class BiasKind {
  None,    // no bias provider (none, sinusoidal, learned, rotary)
  Linear,  // the ALiBi family (LinearBiasSpec)
  Table,   // another provider computed per block: T5's bucket table, KERPLE, FIRE
};

struct AttentionPlanInput {
  bool cuda = false;       // the activations live on a GPU
  int64_t length = 0;      // T
  int64_t queryBlock = 0;  // > 0 and < T: the caller asks for O(T) memory (long windows, probes)
  bool dropout = false;    // training with attention dropout > 0
  bool backward = false;   // training: a backward pass will follow this forward
  bool probing = false;    // an observer reads the probabilities
  bool causal = false;
  BiasKind bias = BiasKind::None;
  // q and k below float32 (bfloat16 autocast). SDPA takes its additive mask in the query's
  // precision, so a bias would be rounded there: such forwards take a path that adds the float32
  // bias to float32 logits.
  bool reducedPrecision = false;
  bool hasSdpa = false;          // this build has at::scaled_dot_product_attention
  bool hasFusedCpuSdpa = false;  // and its CPU kernel is fused (no T x T probabilities)
  // This build has the fused CUDA kernel of the ALiBi family and it takes this forward's shape
  // and precision (bf16, head dimension 64 or 128: linear_bias_attention.cuh).
  bool fusedLinearBias = false;
  // Grouped key/value heads (fewer than the query heads) or a soft-cap on the logits: only
  // xtrap's own query-block paths (reference, causal-skip, block) compute them.
  bool groupedKv = false;
  bool softcap = false;
};

AttentionPath chooseAttentionPath(const AttentionPlanInput& in);
std::string attentionPathName(AttentionPath path);

// Whether a path reads the full (H|1, T, T) bias (causal mask included) prepared once per forward
// (else it computes the bias per block itself, or needs none).
bool pathUsesFullBias(AttentionPath path, BiasKind bias);

// Query rows per block for a window of T tokens on the Block path: at most `queryBlock`, fewer
// for long windows so that one block's logits stay near 2^20 elements per head (the attention's
// temporaries then stay flat in T; only the O(T) activations grow).
int64_t attentionBlockRows(int64_t T, int64_t queryBlock);

// Query rows per block of the CausalSkip path; 0 = too short to gain (one piece).
int64_t causalSkipBlock(int64_t T);

// Query rows per block of the Recompute path for batch * heads = batchHeads: one block's float32
// logits near 2^21 elements (8 MiB, a few of its size alive at once), at least 32 rows.
int64_t recomputeBlockRows(int64_t batchHeads, int64_t T);

}  // namespace xtrap
