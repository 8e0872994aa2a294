// The parallel attention cores against whole-tensor reference ops (softmax(q kᵀ/√Dh + ext) v): values
// and gradients, with padded keys and with fewer queries than keys ([CLS] only).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/model/attention.h"
#include "core/kernels/attention_kernel.h"
#include "core/model/bert.h"  // extended_attention_mask

namespace {

constexpr int64_t B = 3, H = 4, S = 9, Dh = 8, D = H * Dh;

torch::Tensor leaf(const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); }
torch::Tensor heads(const torch::Tensor& t) { return t.view({B, t.size(1), H, Dh}).transpose(1, 2); }
double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Checks the two outputs agree, then backpropagates the same random upstream gradient through both.
void compare_and_backward(const torch::Tensor& out, const torch::Tensor& expect) {
  REQUIRE(out.sizes() == expect.sizes());
  CHECK(max_diff(out, expect) < 1e-6);
  auto upstream = torch::randn_like(expect);
  (out * upstream).sum().backward();
  (expect * upstream).sum().backward();
}

// Example b has its last b keys padded.
torch::Tensor padded_ext() {
  auto mask = torch::ones({B, S}, torch::kLong);
  for (int64_t b = 1; b < B; ++b) mask[b].narrow(0, S - b, b).zero_();
  return hp::core::extended_attention_mask(mask);
}

void check_attention(int64_t Sq) {
  torch::manual_seed(7);
  const auto q0 = torch::randn({B, Sq, D}), kv0 = torch::randn({B, S, 2 * D}), ext = padded_ext();
  auto q = leaf(q0), kv = leaf(kv0), q_ref = leaf(q0), kv_ref = leaf(kv0);
  auto out = hp::core::attention_autograd(q, kv, ext, H);
  auto k = heads(kv_ref.narrow(2, 0, D)), v = heads(kv_ref.narrow(2, D, D));
  auto probs = torch::softmax(torch::matmul(heads(q_ref), k.transpose(-1, -2)) / std::sqrt(double(Dh)) + ext, -1);
  auto expect = torch::matmul(probs, v).transpose(1, 2).reshape({B, Sq, D});
  compare_and_backward(out, expect);
  CHECK(max_diff(q.grad(), q_ref.grad()) < 1e-5);
  CHECK(max_diff(kv.grad(), kv_ref.grad()) < 1e-5);
  // Padded keys get no gradient: example 2's last two keys and values.
  CHECK(kv.grad()[2].narrow(0, S - 2, 2).abs().max().item<double>() == 0.0);
  // The inference core gives the same context and probabilities.
  torch::NoGradGuard no_grad;
  auto [p, ctx] =
      hp::core::attention_no_grad(heads(q0), heads(kv0.narrow(2, 0, D)), heads(kv0.narrow(2, D, D)), ext, true);
  CHECK(max_diff(ctx.reshape({B, Sq, D}), expect.detach()) < 1e-6);
  CHECK(max_diff(p, probs.detach()) < 1e-6);
}

}  // namespace

TEST_CASE("attention core: values and q/kv gradients equal whole-tensor ops", "[core][attention]") {
  check_attention(S);
}

TEST_CASE("attention core: one query row ([CLS] only) equals whole-tensor ops", "[core][attention]") {
  check_attention(1);
}

TEST_CASE("given probabilities times values: values and both gradients equal matmul", "[core][attention]") {
  torch::manual_seed(8);
  const auto p0 = torch::softmax(torch::randn({B, H, S, S}), -1), v0 = torch::randn({B, S, D});
  for (int64_t Sq : {S, int64_t{1}}) {  // all rows, and the [CLS] row as a strided view
    auto p = leaf(p0), v = leaf(v0), p_ref = leaf(p0), v_ref = leaf(v0);
    auto out = hp::core::probs_times_values(p.narrow(2, 0, Sq), v);
    auto expect = torch::matmul(p_ref.narrow(2, 0, Sq), heads(v_ref)).transpose(1, 2).reshape({B, Sq, D});
    compare_and_backward(out, expect);
    CHECK(max_diff(p.grad(), p_ref.grad()) < 1e-5);
    CHECK(max_diff(v.grad(), v_ref.grad()) < 1e-5);
  }
}

// Odd sizes exercise every edge of the AVX-512 kernel: 16×16 transposes with partial blocks (S = 37,
// Dh = 40), score tiles narrower than 32 columns, row blocks shorter than 12; with and without the
// probabilities written out. The BLAS loop (kernel off) must agree too.
TEST_CASE("attention kernel and BLAS loop equal whole-tensor ops at odd sizes", "[core][attention]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(9);
  constexpr int64_t b = 2, h = 3, s = 37, dh = 40;
  auto split = [&](const torch::Tensor& t) { return t.view({b, t.size(1), h, dh}).transpose(1, 2); };
  auto mask = torch::ones({b, s}, torch::kLong);
  mask[1].narrow(0, s - 5, 5).zero_();
  const auto ext = hp::core::extended_attention_mask(mask);
  const auto qkv = torch::randn({b, s, 3 * h * dh}) * 2;
  const auto k = split(qkv.narrow(2, h * dh, h * dh)), v = split(qkv.narrow(2, 2 * h * dh, h * dh));
  const bool kernel = hp::core::attention_kernel_available();
  if (!kernel) WARN("this CPU has no AVX-512F: only the BLAS loop is tested");
  for (int64_t sq : {s, int64_t{1}, int64_t{13}}) {
    const auto q = split(qkv.narrow(1, 0, sq).narrow(2, 0, h * dh));
    auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(dh)) + ext, -1);
    auto expect = torch::matmul(probs, v).transpose(1, 2);  // [b, sq, h, dh]
    for (bool use_kernel : {true, false}) {
      if (use_kernel && !kernel) continue;
      hp::core::set_attention_kernel_enabled(use_kernel);
      for (bool want_probs : {true, false}) {
        auto [p, ctx] = hp::core::attention_no_grad(q, k, v, ext, want_probs);
        INFO("Sq " << sq << ", kernel " << use_kernel << ", probabilities " << want_probs);
        CHECK(max_diff(ctx, expect) < 1e-5);
        CHECK(p.defined() == want_probs);
        if (want_probs) {
          CHECK(max_diff(p, probs) < 1e-6);
          CHECK(p[1].narrow(2, s - 5, 5).abs().max().item<double>() == 0.0);  // padded keys: exactly 0
        }
      }
    }
    hp::core::set_attention_kernel_enabled(true);
  }
}
