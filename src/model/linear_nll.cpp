#include "model/linear_nll.h"

#include "util/execution_context.h"
#include "util/torch_compat.h"

namespace xtrap {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dtype the matmul runs in: autocast's for this device when it is on, else the inputs'.
at::ScalarType matmulDtype(const torch::Tensor& x, const torch::Tensor& w) {
  auto type = x.device().type();
  if (compat::autocastEnabled(type)) return compat::autocastDtype(type);
  return at::promote_types(x.scalar_type(), w.scalar_type());
}

// (n, V) float32 logits of rows [begin, begin + n).
torch::Tensor blockLogits(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias, int64_t begin,
                          int64_t n) {
  auto logits = x.narrow(0, begin, n).matmul(w.t()).to(torch::kFloat32);
  return bias.numel() > 0 ? logits + bias.to(torch::kFloat32) : logits;
}

struct LinearNllFunction : torch::autograd::Function<LinearNllFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, const torch::Tensor& targets, int64_t blockRows) {
    auto dtype = matmulDtype(x, weight);
    // Casting once here is what autocast does per matmul; the backward needs the same operands.
    auto xc = x.to(dtype), wc = weight.to(dtype);
    int64_t N = x.size(0);
    auto nll = torch::empty({N}, x.options().dtype(torch::kFloat32));
    auto lse = torch::empty({N}, x.options().dtype(torch::kFloat32));
    {
      AutocastScope off(x.device(), torch::kFloat32);  // operands are cast already
      for (int64_t begin = 0; begin < N; begin += blockRows) {
        int64_t n = std::min(blockRows, N - begin);
        auto logits = blockLogits(xc, wc, bias, begin, n);  // (n, V)
        auto blockLse = logits.logsumexp(1);
        lse.narrow(0, begin, n).copy_(blockLse);
        nll.narrow(0, begin, n).copy_(blockLse - logits.gather(1, targets.narrow(0, begin, n).unsqueeze(1)).squeeze(1));
      }
    }
    ctx->save_for_backward({xc, wc, bias, targets, lse});
    ctx->saved_data["block_rows"] = blockRows;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weight.scalar_type());
    ctx->saved_data["has_bias"] = bias.numel() > 0;
    return nll;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto xc = saved[0], wc = saved[1], bias = saved[2], targets = saved[3], lse = saved[4];
    int64_t blockRows = ctx->saved_data["block_rows"].toInt();
    bool hasBias = ctx->saved_data["has_bias"].toBool();
    auto gradNll = grads[0].to(torch::kFloat32);  // (N)
    int64_t N = xc.size(0);
    AutocastScope off(xc.device(), torch::kFloat32);
    auto dx = torch::empty_like(xc);
    auto dw = torch::zeros(wc.sizes(), wc.options().dtype(torch::kFloat32));
    auto db = hasBias ? torch::zeros({wc.size(0)}, wc.options().dtype(torch::kFloat32)) : torch::Tensor();
    for (int64_t begin = 0; begin < N; begin += blockRows) {
      int64_t n = std::min(blockRows, N - begin);
      // d nll / d logits = softmax - onehot(target), times the incoming gradient of each row.
      auto probs = (blockLogits(xc, wc, bias, begin, n) - lse.narrow(0, begin, n).unsqueeze(1)).exp_();
      probs.scatter_add_(1, targets.narrow(0, begin, n).unsqueeze(1), torch::full({n, 1}, -1.0f, probs.options()));
      probs.mul_(gradNll.narrow(0, begin, n).unsqueeze(1));  // (n, V) float32
      if (hasBias) db += probs.sum(0);
      auto g = probs.to(xc.scalar_type());  // what autograd through `.to(float32)` hands the matmul
      dx.narrow(0, begin, n).copy_(g.matmul(wc));
      dw += g.t().matmul(xc.narrow(0, begin, n)).to(torch::kFloat32);
    }
    auto xDtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    auto wDtype = static_cast<at::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    return {dx.to(xDtype), dw.to(wDtype), hasBias ? db.to(bias.scalar_type()) : torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linearNll(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                        const torch::Tensor& targets, int64_t maxBlockLogits) {
  int64_t blockRows = std::max<int64_t>(1, maxBlockLogits / std::max<int64_t>(1, weight.size(0)));
  // LibTorch 1.13's Function::apply takes no undefined tensor: "no bias" is an empty one inside.
  auto noBias = torch::empty({0}, weight.options());
  return LinearNllFunction::apply(x, weight, bias.defined() ? bias : noBias, targets, blockRows);
}

}  // namespace xtrap
