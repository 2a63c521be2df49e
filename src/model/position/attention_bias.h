#pragma once
// A position method that adds a bias to the attention logits (x-transformers' "bias provider").
// block() returns the bias for queries [q0, q1) and keys [k0, k1) as (H, q1-q0, k1-k0) float32 on
// the device of the provider's parameters, so the attention can ask for one query block at a
// time and never hold a T x T bias per head.
#include <torch/torch.h>

#include <stdexcept>

namespace xtrap {

struct AttentionBias : torch::nn::Module {
  virtual torch::Tensor block(int64_t q0, int64_t q1, int64_t k0, int64_t k1) = 0;
  // The bias of queries at `queryPositions` (Tq) against keys at `keyPositions` (Tk), any real
  // positions (context extension's re-assigned ones, context_extension.h): (H, Tq, Tk) float32.
  // block() is this at integer positions (with firstTokenBias() where there is one). Providers for which re-assigned
  // positions have no defined meaning leave it undefined (std::invalid_argument, one line).
  virtual torch::Tensor atPositions(const torch::Tensor& queryPositions, const torch::Tensor& keyPositions) {
    (void)queryPositions, (void)keyPositions;
    throw std::invalid_argument("this position method's bias is not defined at re-assigned positions");
  }
  // (H): a learned bias that replaces the distance term of every pair with the first token
  // (BiALiBi's global token); undefined = none. block() applies it; atPositions, whose positions
  // need not be token indices, leaves it to the caller.
  virtual torch::Tensor firstTokenBias() const { return {}; }
  // True when block() depends on trainable parameters (then it must not be cached in training).
  virtual bool trainable() const = 0;
  // True when block() already gives every future key (j > i) -inf in every head (causal ALiBi),
  // so the causal mask need not be added again.
  virtual bool blocksFuture() const { return false; }
  // Puts constrained parameters back into their domain after an optimizer step (projected
  // gradient descent, KERPLE's r1, r2 > 0); nothing for unconstrained ones.
  virtual void constrainParameters() {}
};

}  // namespace xtrap
