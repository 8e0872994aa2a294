// The inference forward's linears with their epilogues fused (see core/model/bert.h: ffn_in, add_norm,
// linear_plus): one GEMM, then bias, activation, residual and LayerNorm in one pass over each thread's rows
// (core/kernels/epilogue.h), and at int8 the next linear's input quantised there too (Int8Rows).
#include "core/model/bert.h"

#include <initializer_list>

#include "core/kernels/epilogue.h"
#include "core/kernels/gemm.h"

namespace hp::core {

namespace {

// The fused epilogues (core/kernels/epilogue.h) take float32 CPU tensors; the vectors (biases, LayerNorm) are read
// through raw pointers and must be contiguous. Activations may be strided views (the [CLS] rows).
// x as 2-D rows [*, K] with unit column stride (a view where it can be), as PackedLinear::apply takes them.
torch::Tensor unit_stride_rows(const torch::Tensor& x) {
  auto rows = x.reshape({-1, x.size(-1)});
  return rows.stride(1) == 1 ? rows : rows.contiguous();
}

bool epilogue_ready(std::initializer_list<const torch::Tensor*> tensors) {
  if (!epilogue_kernels_available()) return false;
  for (const auto* t : tensors)
    if (t->scalar_type() != torch::kFloat || !t->device().is_cpu() || (t->dim() == 1 && !t->is_contiguous()))
      return false;
  return true;
}

}  // namespace

torch::Tensor Bert::ffn_in(const torch::Tensor& x, const PackedLinear& pw, const torch::Tensor& b, bool inference,
                           bool lrp, const RowsAhead& q) const {
  if (q.out) q.out->pack = nullptr;
  const std::string& act = cfg_.hidden_act;
  const torch::Tensor& w = pw.weight();
  if (!inference || (act != "gelu" && act != "relu") || !epilogue_ready({&x, &w, &b}))
    return activation(inference ? pw.linear(x, b) : linear_frozen(x, w, b), lrp, inference);
  // The GEMM writes x·wᵀ; one pass then adds the bias and applies the activation.
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  auto out = torch::empty(sizes, x.options());
  auto rows = out.view({-1, w.size(0)});
  float* y = rows.data_ptr<float>();
  const float* bias = b.data_ptr<float>();
  const int64_t n = rows.size(1), ldy = rows.stride(0);
  const auto kind = act == "gelu" ? EpilogueActivation::kGeluErf : EpilogueActivation::kRelu;
  const bool ahead = q.next && q.out && q.next->prepare_rows(*q.out, rows.size(0));
  pw.apply(
      rows, unit_stride_rows(x), false,
      [=](int64_t begin, int64_t end) {
        bias_activation_rows(y + begin * ldy, end - begin, n, ldy, bias, kind);
        if (ahead) q.next->quantize_rows(y, ldy, begin, end, *q.out);
      },
      q.in);
  return out;
}

torch::Tensor Bert::add_norm(const torch::Tensor& x, const PackedLinear& pw, const torch::Tensor& b,
                             const torch::Tensor& residual, const torch::Tensor& ln_w, const torch::Tensor& ln_b,
                             bool inference, bool lrp, double dropout, const Masks& masks, const RowsAhead& q) const {
  if (q.out) q.out->pack = nullptr;
  const torch::Tensor& w = pw.weight();
  if (masks.hidden.defined()) {
    auto y = inference ? pw.linear(x, b) : torch::dropout(linear_frozen(x, w, b), dropout, training_);
    return norm(y * masks.hidden + residual, ln_w, ln_b, lrp, &masks);
  }
  if (!inference || !epilogue_ready({&x, &residual, &w, &b, &ln_w, &ln_b}))
    return norm(linear_plus(x, pw, b, residual, inference, dropout), ln_w, ln_b, lrp);
  // The GEMM writes x·wᵀ; one pass then adds bias and residual and normalises each row.
  const auto D = w.size(0);
  auto res = residual.reshape({-1, D});  // a view, also for the [CLS] rows of a cls_only last layer
  if (res.stride(1) != 1) res = res.contiguous();
  auto out = torch::empty(residual.sizes(), residual.options());
  auto rows = out.view({-1, D});
  float* y = rows.data_ptr<float>();
  const float *r = res.data_ptr<float>(), *bias = b.data_ptr<float>(), *gamma = ln_w.data_ptr<float>(),
              *beta = ln_b.data_ptr<float>();
  const int64_t ldr = res.stride(0);
  const auto eps = static_cast<float>(cfg_.layer_norm_eps);
  const bool ahead = q.next && q.out && q.next->prepare_rows(*q.out, rows.size(0));
  pw.apply(
      rows, unit_stride_rows(x), false,
      [=](int64_t begin, int64_t end) {
        bias_residual_layer_norm_rows(y + begin * D, D, r + begin * ldr, ldr, bias, gamma, beta, end - begin, D, eps);
        if (ahead) q.next->quantize_rows(y, D, begin, end, *q.out);
      },
      q.in);
  return out;
}

torch::Tensor Bert::linear_plus(const torch::Tensor& x, const PackedLinear& pw, const torch::Tensor& b,
                                const torch::Tensor& residual, bool inference, double dropout) const {
  const torch::Tensor& w = pw.weight();
  if (!inference) return torch::dropout(linear_frozen(x, w, b), dropout, training_) + residual;
  // One pass writes residual + bias; the GEMM then accumulates into it (beta = 1). torch::linear would
  // first broadcast the bias into a fresh output and the sum would take another pass.
  auto out = residual + b;
  auto rows = out.view({-1, w.size(0)});
  pw.apply(rows, unit_stride_rows(x), true);
  return out;
}

}  // namespace hp::core
