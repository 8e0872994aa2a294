// The parallel attention cores against whole-tensor reference ops (softmax(q kᵀ/√Dh + ext) v): values
// and gradients, with padded keys and with fewer queries than keys ([CLS] only). Every float32 path this CPU
// has (isa::vector_paths(): the BLAS loop on the scalar path, the AVX2 or AVX-512 kernel above it) is run
// under isa::ScopedCap and compared with the reference and with the other paths, within float32 tolerances,
// never bit for bit: the paths sum in different orders.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>
#include <torch/utils.h>

#include "core/model/attention.h"
#include "core/kernels/attention_kernel.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "core/model/bert.h"  // extended_attention_mask

namespace {

namespace isa = hp::core::isa;

constexpr int64_t B = 3, H = 4, S = 9, Dh = 8, D = H * Dh;

torch::Tensor leaf(const torch::Tensor& t) { return t.detach().clone().requires_grad_(true); }
torch::Tensor heads(const torch::Tensor& t) { return t.view({B, t.size(1), H, Dh}).transpose(1, 2); }
double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// isa::vector_paths(), with a warning naming each kernel path this CPU lacks, so a run shows what it skipped.
std::vector<isa::Level> paths_to_test() {
  const auto paths = isa::vector_paths();
  for (isa::Level l : {isa::Level::kAvx2, isa::Level::kAvx512})
    if (std::find(paths.begin(), paths.end(), l) == paths.end())
      WARN("this CPU has no " << isa::name(l) << ": its attention kernel is not tested here");
  return paths;
}

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
  for (isa::Level path : paths_to_test()) {
    isa::ScopedCap cap(path);
    INFO("float32 path " << isa::name(path));
    check_attention(S);
  }
}

TEST_CASE("attention core: one query row ([CLS] only) equals whole-tensor ops", "[core][attention]") {
  for (isa::Level path : paths_to_test()) {
    isa::ScopedCap cap(path);
    INFO("float32 path " << isa::name(path));
    check_attention(1);
  }
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

// Tolerances of the kernels against ATen's float32 ops and against each other: the context sums S products
// of values |v| ≲ 8 in a different order on each path (≤ 4.5e-6 apart here on AVX2). The probabilities are exps
// (relative error ≤ 1.2e-7 on the SIMD paths, simd_avx2.h) divided by sums of S of them in another order: a
// probability p ≤ 1 is off by at most p · (2 · 1.2e-7 + S · 2^-24), the bound below (0.48e-6 apart on LibTorch
// 1.13's randn data, 1.01e-6 on 2.11's, whose vectorised randn draws other scores at S = 37).
constexpr double kContextTol = 1e-5;
double prob_tol(int64_t s) { return 2.4e-7 + static_cast<double>(s) * 5.97e-8; }

// Odd sizes exercise every edge of both kernels: partial 16×16 (AVX-512) and 8×8 (AVX2) transposes, score
// tiles narrower than the tile (S = 37: 32 + 5, 16 + 16 + 5; S = 19), value tiles of 8 and 12 columns
// (Dh = 40, 12), row blocks shorter than 12 and 6 (Sq = 13, 1); whole tiles only (S = Dh = 64); with and
// without the probabilities written out. The BLAS loop (the scalar path, or the kernel off) must agree too.
TEST_CASE("attention kernel on every float32 path and the BLAS loop equal whole-tensor ops at odd sizes",
          "[core][attention]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(9);
  const auto paths = paths_to_test();
  struct Shape {
    int64_t b, h, s, dh;
  };
  for (const Shape& shape : {Shape{2, 3, 37, 40}, Shape{2, 2, 19, 12}, Shape{1, 2, 64, 64}}) {
    const auto [b, h, s, dh] = shape;
    auto split = [&](const torch::Tensor& t) { return t.view({b, t.size(1), h, dh}).transpose(1, 2); };
    auto mask = torch::ones({b, s}, torch::kLong);
    mask[b - 1].narrow(0, s - 5, 5).zero_();
    const auto ext = hp::core::extended_attention_mask(mask);
    const auto qkv = torch::randn({b, s, 3 * h * dh}) * 2;
    const auto k = split(qkv.narrow(2, h * dh, h * dh)), v = split(qkv.narrow(2, 2 * h * dh, h * dh));
    for (int64_t sq : {s, int64_t{1}, int64_t{13}}) {
      const auto q = split(qkv.narrow(1, 0, sq).narrow(2, 0, h * dh));
      auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(dh)) + ext, -1);
      auto expect = torch::matmul(probs, v).transpose(1, 2);  // [b, sq, h, dh]
      std::vector<std::pair<std::string, std::pair<torch::Tensor, torch::Tensor>>> results;  // label, (p, ctx)
      for (isa::Level path : paths) {
        isa::ScopedCap cap(path);
        // The scalar path is the BLAS loop (as with the kernel switched off), the others their kernel.
        CHECK(hp::core::attention_kernel_available() == (path != isa::Level::kScalar));
        for (bool want_probs : {true, false}) {
          auto [p, ctx] = hp::core::attention_no_grad(q, k, v, ext, want_probs);
          INFO("S " << s << ", Dh " << dh << ", Sq " << sq << ", path " << isa::name(path) << ", probabilities "
                    << want_probs);
          CHECK(max_diff(ctx, expect) < kContextTol);
          CHECK(p.defined() == want_probs);
          if (!want_probs) continue;
          CHECK(max_diff(p, probs) < prob_tol(s));
          CHECK(p[b - 1].narrow(2, s - 5, 5).abs().max().item<double>() == 0.0);  // padded keys: exactly 0
          results.push_back({isa::name(path), {p, ctx}});
        }
      }
      {  // the kernel switched off: the BLAS loop whatever the path
        hp::core::set_attention_kernel_enabled(false);
        auto [p, ctx] = hp::core::attention_no_grad(q, k, v, ext, true);
        hp::core::set_attention_kernel_enabled(true);
        CHECK(max_diff(ctx, expect) < kContextTol);
        CHECK(max_diff(p, probs) < prob_tol(s));
      }
      for (size_t i = 1; i < results.size(); ++i) {  // each path against the oldest (the BLAS loop)
        INFO("S " << s << ", Dh " << dh << ", Sq " << sq << ": " << results[i].first << " against "
                  << results[0].first);
        CHECK(max_diff(results[i].second.first, results[0].second.first) < prob_tol(s));
        CHECK(max_diff(results[i].second.second, results[0].second.second) < kContextTol);
      }
    }
  }
}

// attend_pair itself on strided rows whose gaps hold a sentinel: every kernel writes the Sq × S
// probabilities and the Sq × Dh context and nothing past a row's end (the tails' masks), on each path.
TEST_CASE("attention kernel writes only inside its rows, on every kernel path", "[core][attention]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(10);
  constexpr int kS = 29, kSq = 11, kDh = 20, kGap = 7;  // 29 = 16 + 13, 11 = 6 + 5, 20 = 16 + 4
  constexpr float kSentinel = 12345.0f;
  const auto q = torch::randn({kSq, kDh}), k = torch::randn({kS, kDh}), v = torch::randn({kS, kDh});
  auto ext = torch::zeros({kS});
  ext.narrow(0, kS - 3, 3).fill_(-1e4f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kDh));
  const auto probs = torch::softmax(torch::matmul(q, k.t()) * scale + ext, -1);
  const auto expect = torch::matmul(probs, v);
  for (isa::Level path : paths_to_test()) {
    if (path == isa::Level::kScalar) continue;  // no kernel
    isa::ScopedCap cap(path);
    INFO("path " << isa::name(path));
    REQUIRE(hp::core::attention_kernel_available());
    auto p = torch::full({kSq, kS + kGap}, kSentinel), c = torch::full({kSq, kDh + kGap}, kSentinel);
    std::vector<float> scratch(hp::core::attention_pair_scratch(kS, kDh));
    hp::core::AttentionPair pair{kSq, kS, kDh, scale, q.data_ptr<float>(), kDh, k.data_ptr<float>(), kDh};
    pair.v = v.data_ptr<float>();
    pair.ldv = kDh;
    pair.ext = ext.data_ptr<float>();
    pair.p = p.data_ptr<float>();
    pair.ldp = kS + kGap;
    pair.c = c.data_ptr<float>();
    pair.ldc = kDh + kGap;
    hp::core::attend_pair(pair, scratch.data());
    CHECK(max_diff(p.narrow(1, 0, kS), probs) < prob_tol(kS));
    CHECK(max_diff(c.narrow(1, 0, kDh), expect) < kContextTol);
    CHECK(p.narrow(1, kS, kGap).eq(kSentinel).all().item<bool>());
    CHECK(c.narrow(1, kDh, kGap).eq(kSentinel).all().item<bool>());
  }
}

// Whether this CPU, under HEADPRUNE_MAX_ISA, has the bf16 products; a warning names what is not tested when not.
static bool bf16_products_here() {
  if (isa::usable(isa::Level::kAvx512Bf16)) return true;
  WARN("no AVX512_BF16 on this CPU or under HEADPRUNE_MAX_ISA: the bf16 attention products are not tested here");
  return false;
}

// The bf16 products (AttentionPair::bf16, AVX512_BF16): against an emulation of their arithmetic in float64 — Q, K
// and V rounded to bf16, the softmax's numerators exp(s − max) rounded to bf16, normalised by the unrounded sum — and
// against float32 attention within what bf16's rounding allows. Odd S and Dh (the pairs' zero padding), a row
// block shorter than 12, padded keys, strided rows with sentinels in the gaps. Skipped, visibly, without
// AVX512_BF16.
TEST_CASE("bf16 attention products equal their float64 emulation and float32 attention within bf16 rounding",
          "[core][attention]") {
  torch::NoGradGuard no_grad;
  if (!bf16_products_here()) return;
  REQUIRE(hp::core::bf16_attention_available());
  torch::manual_seed(11);
  auto bf16 = [](const torch::Tensor& t) { return t.to(torch::kBFloat16).to(torch::kDouble); };
  constexpr int kGap = 5;
  constexpr float kSentinel = 12345.0f;
  struct Shape {
    int sq, s, dh;
  };
  for (const Shape& shape : {Shape{37, 37, 33}, Shape{13, 19, 12}, Shape{128, 128, 32}, Shape{1, 64, 64}}) {
    const auto [sq, s, dh] = shape;
    INFO("Sq " << sq << ", S " << s << ", Dh " << dh);
    const auto q = torch::randn({sq, dh}) * 2, k = torch::randn({s, dh}) * 2, v = torch::randn({s, dh});
    auto ext = torch::zeros({s});
    ext.narrow(0, s - 3, 3).fill_(-1e4f);  // padded keys
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    // The emulation in float64.
    const auto scores = torch::matmul(bf16(q), bf16(k).t()) * scale + ext.to(torch::kDouble);
    const auto e = torch::exp(scores - std::get<0>(scores.max(1, true)));
    const auto emulated = torch::matmul(bf16(e), bf16(v)) / e.sum(1, true);
    const auto f32 = torch::matmul(torch::softmax(torch::matmul(q, k.t()) * static_cast<float>(scale) + ext, -1), v);
    auto c = torch::full({sq, dh + kGap}, kSentinel);
    hp::core::AttentionPair pair{sq, s, dh, static_cast<float>(scale), q.data_ptr<float>(), dh, k.data_ptr<float>(),
                                 dh};
    pair.v = v.data_ptr<float>(), pair.ldv = dh, pair.ext = ext.data_ptr<float>();
    pair.c = c.data_ptr<float>(), pair.ldc = dh + kGap, pair.bf16 = true;
    std::vector<float> scratch(hp::core::attention_pair_scratch(s, dh));
    hp::core::attend_pair(pair, scratch.data());
    const auto ctx = c.narrow(1, 0, dh).clone();
    // A numerator near a bf16 rounding boundary may round the other way (the float32 exp against float64's): one
    // unit in the last place (2^-8 of it) on a few of them.
    CHECK(max_diff(ctx.to(torch::kDouble), emulated) < 1e-4);
    CHECK(max_diff(ctx, f32) < 5e-2);  // scores of a few units: 2^-9 of each operand moves them by ~1e-2
    CHECK(max_diff(ctx, f32) > 1e-6);  // bf16 indeed (float32 would agree to ~1e-6)
    CHECK(c.narrow(1, dh, kGap).eq(kSentinel).all().item<bool>());
    // Changing a padded key's value changes nothing.
    v[s - 1].fill_(1e3f);
    hp::core::attend_pair(pair, scratch.data());
    CHECK(torch::equal(c.narrow(1, 0, dh), ctx));
  }
}

// A model whose linears run at int8 or bf16 takes the bf16 products unless the probabilities are asked for; fp32
// never does.
TEST_CASE("attention_no_grad takes the bf16 products only when asked and the probabilities are not wanted",
          "[core][attention]") {
  torch::NoGradGuard no_grad;
  if (!bf16_products_here()) return;
  torch::manual_seed(12);
  const auto q = torch::randn({2, 3, 17, 16}), k = torch::randn({2, 3, 17, 16}), v = torch::randn({2, 3, 17, 16});
  const auto ext = torch::zeros({2, 1, 1, 17});
  const auto f32 = hp::core::attention_no_grad(q, k, v, ext, false, false).second;
  const auto asked = hp::core::attention_no_grad(q, k, v, ext, false, true).second;
  const auto with_probs = hp::core::attention_no_grad(q, k, v, ext, true, true).second;
  CHECK(max_diff(asked, f32) > 1e-6);
  CHECK(max_diff(asked, f32) < 3e-2);
  CHECK(max_diff(with_probs, f32) < 1e-6);
  // --version says so, for the precisions that take them.
  CHECK_THAT(hp::core::precision_backend(hp::core::Precision::kInt8), Catch::Contains("attention products in bf16"));
  if (hp::core::lowp_native(hp::core::Precision::kBf16))  // not with LibTorch 2.x, where bf16 runs as fp32
    CHECK_THAT(hp::core::precision_backend(hp::core::Precision::kBf16), Catch::Contains("attention products in bf16"));
  else CHECK_THAT(hp::core::precision_backend(hp::core::Precision::kBf16), !Catch::Contains("attention products"));
  {  // below AVX512_BF16 the float32 kernel
    isa::ScopedCap cap(isa::Level::kAvx512Vnni);
    CHECK(!hp::core::bf16_attention_available());
    CHECK_THAT(hp::core::precision_backend(hp::core::Precision::kInt8), !Catch::Contains("attention products"));
    CHECK(max_diff(hp::core::attention_no_grad(q, k, v, ext, false, true).second, f32) < 1e-6);
  }
  {  // the int8 export's check: float32 while the guard lives
    const hp::core::ScopedFloat32Attention float32_attention;
    CHECK(max_diff(hp::core::attention_no_grad(q, k, v, ext, false, true).second, f32) < 1e-6);
  }
  CHECK(max_diff(hp::core::attention_no_grad(q, k, v, ext, false, true).second, asked) == 0.0);
}
