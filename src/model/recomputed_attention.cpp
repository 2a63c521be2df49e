#include "model/recomputed_attention.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include "model/fast_dropout.h"

namespace xtrap {
namespace {

// One query block [q0, q1) against keys [0, keys), and what it needs from the whole problem.
struct QueryBlock {
  int64_t q0, q1, keys;
  int64_t rows() const { return q1 - q0; }
};

std::vector<QueryBlock> queryBlocks(int64_t T, int64_t rows, bool causal) {
  std::vector<QueryBlock> blocks;
  for (int64_t q0 = 0; q0 < T; q0 += rows) {
    int64_t q1 = std::min(T, q0 + rows);
    blocks.push_back({q0, q1, causal ? q1 : T});  // causal rows never see later keys
  }
  return blocks;
}

// Softmax of the block's float32 logits plus its bias (H|1, rows, keys) or none: (B, H, rows,
// keys). The same operations in forward and backward, so both see the same probabilities bit for
// bit.
torch::Tensor blockProbabilities(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& bias,
                                 const QueryBlock& b) {
  auto scores = q.narrow(2, b.q0, b.rows()).matmul(k.narrow(2, 0, b.keys).transpose(-2, -1)).to(torch::kFloat32);
  if (bias.defined()) scores.add_(bias);
  return torch::softmax(scores, -1);
}

DroppedBlock dropBlockOf(const torch::Tensor& probs, double p, uint64_t seed, const QueryBlock& b, int64_t T) {
  // The whole tensor is (B * H, T, T): this block holds its rows [q0, q1) and keys [0, keys).
  return dropBlock(probs, p, seed, {b.q0, T, T});
}

// The block bias function, carried from the forward pass to the backward pass in the context.
struct BlockBiasHolder : torch::CustomClassHolder {
  explicit BlockBiasHolder(QueryBlockBias fn) : fn(std::move(fn)) {}
  QueryBlockBias fn;
};

struct RecomputedAttentionFunction : torch::autograd::Function<RecomputedAttentionFunction> {
  // biasParameters: inputs 3 .. 3 + n - 1, so that autograd hands their gradients on.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, at::TensorList biasParameters, const QueryBlockBias& blockBias,
                               bool causal, double p, int64_t blockRows) {
    // Explicit precisions (products in v's, logits and softmax in float32), autocast off: the
    // backward pass, also without autocast, then repeats exactly these operations.
    c10::impl::ExcludeDispatchKeyGuard noAutocast(c10::autocast_dispatch_keyset);
    auto dtype = v.scalar_type();
    auto qc = q.to(dtype), kc = k.to(dtype);
    int64_t T = q.size(2);
    uint64_t seed = p > 0 ? drawDropoutSeed() : 0;
    auto out = torch::empty_like(v, torch::MemoryFormat::Contiguous);  // (B, H, T, D)
    for (const auto& b : queryBlocks(T, blockRows, causal)) {
      auto probs = blockProbabilities(qc, kc, blockBias(b.q0, b.q1, b.keys), b);  // (B, H, rows, keys)
      if (p > 0) probs = dropBlockOf(probs, p, seed, b, T).out;
      out.narrow(2, b.q0, b.rows()).copy_(probs.to(dtype).matmul(v.narrow(2, 0, b.keys)));
    }
    std::vector<torch::Tensor> saved{qc, kc, v};
    saved.insert(saved.end(), biasParameters.begin(), biasParameters.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["block_bias"] = c10::IValue::make_capsule(c10::make_intrusive<BlockBiasHolder>(blockBias));
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = static_cast<int64_t>(seed);
    ctx->saved_data["block_rows"] = blockRows;
    ctx->saved_data["q_dtype"] = q.scalar_type();
    ctx->saved_data["k_dtype"] = k.scalar_type();
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    c10::impl::ExcludeDispatchKeyGuard noAutocast(c10::autocast_dispatch_keyset);
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    auto holder = c10::static_intrusive_pointer_cast<BlockBiasHolder>(ctx->saved_data["block_bias"].toCapsule());
    const QueryBlockBias& blockBias = holder->fn;
    bool causal = ctx->saved_data["causal"].toBool();
    double p = ctx->saved_data["p"].toDouble();
    auto seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    auto dtype = v.scalar_type();
    auto dOut = grads[0].to(dtype);  // (B, H, T, D)
    int64_t T = q.size(2), blockRows = ctx->saved_data["block_rows"].toInt();
    // The bias parameters autograd asks a gradient of, and their gradients summed over blocks.
    std::vector<size_t> wanted;
    std::vector<torch::Tensor> wantedParameters;
    for (size_t i = 3; i < saved.size(); ++i)
      if (ctx->needs_input_grad(i)) wanted.push_back(i), wantedParameters.push_back(saved[i]);
    std::vector<torch::Tensor> dWanted(wanted.size());
    // Key and value gradients gather over blocks: summed in float32.
    auto f32 = q.options().dtype(torch::kFloat32);
    auto dq = torch::empty(q.sizes(), f32), dk = torch::zeros(k.sizes(), f32), dv = torch::zeros(v.sizes(), f32);
    for (const auto& b : queryBlocks(T, blockRows, causal)) {
      torch::Tensor bias;  // (H|1, rows, keys), recorded when its parameters need a gradient
      {
        torch::AutoGradMode record(!wanted.empty());
        bias = blockBias(b.q0, b.q1, b.keys);
      }
      bool biasGrad = bias.defined() && bias.requires_grad();
      auto probs = blockProbabilities(q, k, biasGrad ? bias.detach() : bias, b);  // (B, H, rows, keys)
      auto qBlock = q.narrow(2, b.q0, b.rows()), kKeys = k.narrow(2, 0, b.keys), vKeys = v.narrow(2, 0, b.keys);
      auto dOutBlock = dOut.narrow(2, b.q0, b.rows());  // (B, H, rows, D)
      // out = dropped(probs) @ v
      DroppedBlock dropped = p > 0 ? dropBlockOf(probs, p, seed, b, T) : DroppedBlock{probs, {}, 1.0f};
      dv.narrow(2, 0, b.keys).add_(dropped.out.to(dtype).transpose(-2, -1).matmul(dOutBlock));
      auto dDropped = dOutBlock.matmul(vKeys.transpose(-2, -1)).to(torch::kFloat32);  // (B, H, rows, keys)
      auto dProbs = p > 0 ? applyMask(dDropped, dropped.mask, dropped.scale) : dDropped;
      auto dScores = torch::_softmax_backward_data(dProbs, probs, -1, torch::kFloat32);
      auto dScoresLow = dScores.to(dtype);
      dq.narrow(2, b.q0, b.rows()).copy_(dScoresLow.matmul(kKeys));
      dk.narrow(2, 0, b.keys).add_(dScoresLow.transpose(-2, -1).matmul(qBlock));
      if (biasGrad) {
        // The bias broadcasts over the batch (and over heads when it has one row of heads).
        auto dBias = bias.size(0) == 1 ? dScores.sum(std::vector<int64_t>{0, 1}).unsqueeze(0) : dScores.sum(0);
        auto g = torch::autograd::grad({bias}, wantedParameters, {dBias}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
        for (size_t i = 0; i < g.size(); ++i)
          if (g[i].defined()) dWanted[i] = dWanted[i].defined() ? dWanted[i] + g[i] : g[i];
      }
    }
    auto qType = ctx->saved_data["q_dtype"].toScalarType(), kType = ctx->saved_data["k_dtype"].toScalarType();
    // One gradient per forward input: q, k, v, each bias parameter (undefined = none), then the
    // four that are not tensors.
    torch::autograd::variable_list result(saved.size() + 4);
    result[0] = dq.to(qType);
    result[1] = dk.to(kType);
    result[2] = dv.to(dtype);
    for (size_t i = 0; i < wanted.size(); ++i) result[wanted[i]] = dWanted[i];
    return result;
  }
};

}  // namespace

torch::Tensor recomputedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const QueryBlockBias& blockBias, const std::vector<torch::Tensor>& biasParameters,
                                  bool causal, double dropout, int64_t blockRows) {
  TORCH_CHECK(dropout == 0 || q.device().is_cpu(), "recomputed attention: dropout is implemented for the CPU only");
  TORCH_CHECK(blockRows > 0, "recomputed attention: blocks of at least one row");
  // Only the parameters that take a gradient become inputs: the others need no edge.
  std::vector<torch::Tensor> trainable;
  for (const auto& t : biasParameters)
    if (t.requires_grad()) trainable.push_back(t);
  return RecomputedAttentionFunction::apply(q, k, v, at::TensorList(trainable), blockBias, causal, dropout, blockRows);
}

}  // namespace xtrap
