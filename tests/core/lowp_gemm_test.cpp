// bf16 and int8 inference linears (core/kernels/lowp_gemm.h, core/kernels/quantize.h): the quantisation
// against hand computations, the products against float32 within the documented bounds, every path the CPU has
// (AVX-512, AVX2, scalar through core/kernels/isa.h's cap) against float32 and against each other within those
// bounds (never bit for bit), and the model at each precision.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/base/errors.h"
#include "core/io/checkpoint.h"
#include "core/kernels/lowp_gemm.h"
#include "core/kernels/quantize.h"
#include "core/kernels/isa.h"
#include "fixtures.h"
#include "skip.h"

namespace {

namespace quant = hp::core::quant;
namespace isa = hp::core::isa;
using hp::core::PackedLinear;
using hp::core::Precision;

// The int8 product's paths on this CPU, as caps: the newest (VNNI where the CPU has it: weights ±127), AVX2
// (weights ±63) and scalar (emulated through the float32 GEMM). Each is run under its cap.
std::vector<isa::Level> int8_caps() {
  std::vector<isa::Level> caps = {isa::Level::kScalar};
  if (isa::cpu_has(isa::Level::kAvx2)) caps.push_back(isa::Level::kAvx2);
  if (isa::cpu_level() != isa::Level::kAvx2 && isa::cpu_has(isa::Level::kAvx2)) caps.push_back(isa::cpu_level());
  if (!isa::cpu_has(isa::Level::kAvx512Vnni) && !isa::cpu_has(isa::Level::kAvxVnni))
    WARN("this CPU has no VNNI: the int8 path with weights in ±127 is not run here");
  return caps;
}

struct RowQuant {
  std::vector<uint8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> zero;
};
RowQuant quantize_rows(const torch::Tensor& x) {
  const auto M = x.size(0), K = x.size(1);
  RowQuant r{std::vector<uint8_t>(M * K), std::vector<float>(M), std::vector<int32_t>(M)};
  quant::quantize_activation_rows(x.data_ptr<float>(), x.stride(0), M, K, r.q.data(), r.scale.data(), r.zero.data());
  return r;
}

torch::Tensor product(const PackedLinear& w, const torch::Tensor& x) {
  auto out = torch::full({x.size(0), w.weight().size(0)}, std::nanf(""));  // apply must overwrite
  w.apply(out, x, false);
  return out;
}

// The documented int8 bound of core/kernels/quantize.h, per output, in double; plus float32 slack.
torch::Tensor int8_bound(const torch::Tensor& x, const torch::Tensor& w, const PackedLinear& p) {
  const auto xd = x.to(torch::kDouble), wd = w.to(torch::kDouble);
  const auto lo = torch::clamp_max(std::get<0>(xd.min(1)), 0.0), hi = torch::clamp_min(std::get<0>(xd.max(1)), 0.0);
  const auto sm = ((hi - lo) / 255.0).unsqueeze(1);  // [M, 1]
  const auto sn = p.scales().to(torch::kDouble).unsqueeze(0);  // [1, N]
  const auto K = static_cast<double>(x.size(1));
  const auto exact = xd.abs().matmul(wd.abs().t());
  return sm / 2 * wd.abs().sum(1).unsqueeze(0) + sn / 2 * xd.abs().sum(1).unsqueeze(1) + K * sm * sn / 4 +
         1e-5 * exact + 1e-6;
}

}  // namespace

TEST_CASE("int8 weights: one scale per output channel, round half to even, against a hand computation",
          "[core][lowp]") {
  // Row 0: max |w| = 31.75, so s = 0.25: 0.375 / 0.25 = 1.5 → 2, 0.625 / 0.25 = 2.5 → 2, −0.125 / 0.25 = −0.5 → 0.
  // Row 1 is all zero (scale 1, zeros). Row 2: s = 0.5, −63.5 / 0.5 = −127, 0.75 / 0.5 = 1.5 → 2, 1.25 → 2.5 → 2.
  const std::vector<float> w = {31.75f, 0.375f, 0.625f, -0.125f, 0, 0, 0, 0, -63.5f, 0.75f, 1.25f, 0.0f};
  std::vector<int8_t> q(12);
  std::vector<float> scale(3);
  std::vector<int32_t> colsum(3);
  quant::quantize_weight_rows(w.data(), 3, 4, q.data(), scale.data(), colsum.data());
  CHECK(q == std::vector<int8_t>{127, 2, 2, 0, 0, 0, 0, 0, -127, 2, 2, 0});
  CHECK(scale == std::vector<float>{0.25f, 1.0f, 0.5f});
  CHECK(colsum == std::vector<int32_t>{131, 0, -123});
  // In ±63 (7 bits): row 0 31.5 / 0.5 = 63, 0.75 / 0.5 = 1.5 → 2, 1.25 / 0.5 = 2.5 → 2, −0.25 / 0.5 = −0.5 → 0.
  const std::vector<float> w7 = {31.5f, 0.75f, 1.25f, -0.25f, -63.0f, 0.0f, 0.5f, 1.0f};
  std::vector<int8_t> q7(8);
  quant::quantize_weight_rows(w7.data(), 2, 4, q7.data(), scale.data(), colsum.data(), 63);
  CHECK(q7 == std::vector<int8_t>{63, 2, 2, 0, -63, 0, 0, 1});  // row 1: s = 1, 0.5 → 0 (even), 1 → 1
  CHECK(scale[0] == 0.5f);
  CHECK(scale[1] == 1.0f);
  CHECK(colsum[0] == 67);
  CHECK(colsum[1] == -62);
}

TEST_CASE("int8 activations: per-row range with zero inside it, against a hand computation", "[core][lowp]") {
  // Row 0: lo −1, hi 4.1: s = 5.1 / 255 = 0.02, z = 50; −1 → 0, 0 → 50, 0.5 → 75, 4.1 → 255.
  // Row 1 all zero: s = 1, z = 0. Row 2 positive only: lo = 0, s = 3 / 255, z = 0: 1, 2, 3 → 85, 170, 255, 0 → 0.
  // Row 3 holds NaN: scale NaN (its outputs are NaN), bytes zero.
  const auto x = torch::tensor(std::vector<float>{-1, 0, 0.5f, 4.1f, 0, 0, 0, 0, 1, 2, 3, 0, 1, std::nanf(""), 2, 3})
                     .view({4, 4});
  for (isa::Level path : isa::vector_paths()) {
    isa::ScopedCap cap(path);
    const RowQuant r = quantize_rows(x);
    INFO("path " << isa::name(path));
    CHECK(std::vector<uint8_t>(r.q.begin(), r.q.begin() + 12) ==
          std::vector<uint8_t>{0, 50, 75, 255, 0, 0, 0, 0, 85, 170, 255, 0});
    CHECK(r.scale[0] == Approx(0.02f).epsilon(1e-6));
    CHECK(r.zero == std::vector<int32_t>{50, 0, 0, 0});
    CHECK(r.scale[1] == 1.0f);
    CHECK(r.scale[2] == Approx(3.0f / 255).epsilon(1e-6));
    CHECK(std::isnan(r.scale[3]));
  }
}

TEST_CASE("int8 activations: the zero point rounds half to even, on every path", "[core][lowp]") {
  // Each row spans 15.9375 = 255/16, so s = 1/16 exactly and −lo/s is exact: 2.5 (a tie: 2, not 3), 3.5 (a tie:
  // 4, not 3) and 37.7 (38, not 37). Truncation, floor or adding 0.5 before the cast each change a code.
  const auto x = torch::tensor(std::vector<float>{-0.15625f, 15.78125f, -0.21875f, 15.71875f, -2.35625f, 13.58125f})
                     .view({3, 2});
  for (isa::Level path : isa::vector_paths()) {
    isa::ScopedCap cap(path);
    INFO("path " << isa::name(path));
    const RowQuant r = quantize_rows(x);
    CHECK(r.zero == std::vector<int32_t>{2, 4, 38});
    CHECK(r.q == std::vector<uint8_t>{0, 254, 0, 255, 0, 255});  // 252.5 → 252 + 2; 251.5 → 252 + 4, clamped
    for (float sc : r.scale) CHECK(sc == 0.0625f);
  }
}

TEST_CASE("every quantisation path agrees with the portable one: codes within one step, scales and outputs",
          "[core][lowp]") {
  torch::manual_seed(3);
  // Odd widths (tails), a strided row view, an outlier row and a row of one sign.
  auto storage = torch::randn({9, 101});
  storage[4][7] = 900.0f;
  storage[5] = storage[5].abs();
  const auto x = storage.narrow(1, 0, 77);
  const auto [ref, ref_bf16] = [&] {
    isa::ScopedCap cap(isa::Level::kScalar);
    std::vector<uint16_t> b(9 * 77);
    quant::to_bf16_rows(x.data_ptr<float>(), x.stride(0), 9, 77, b.data());
    return std::make_pair(quantize_rows(x), b);
  }();
  // Dequantisation of one int32 product, with and without accumulation, against the formula.
  const std::vector<int32_t> c = {1000, -20000, 7, 123456, 0, -1, 55, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  const std::vector<float> col_scale(17, 0.013f), row_scale = {0.02f};
  const std::vector<int32_t> colsum(17, -301), zero = {37};
  for (isa::Level path : isa::vector_paths()) {
    isa::ScopedCap cap(path);
    INFO("path " << isa::name(path));
    const RowQuant a = quantize_rows(x);
    std::vector<uint16_t> ba(9 * 77);
    quant::to_bf16_rows(x.data_ptr<float>(), x.stride(0), 9, 77, ba.data());
    int most = 0, differ = 0;
    for (size_t i = 0; i < a.q.size(); ++i) {
      most = std::max(most, std::abs(int(a.q[i]) - int(ref.q[i])));
      differ += a.q[i] != ref.q[i];
    }
    CHECK(most <= 1);  // a value on a rounding boundary may go either way, nothing more
    CHECK(differ <= static_cast<int>(a.q.size() / 100));
    CHECK(a.zero == ref.zero);
    for (size_t m = 0; m < a.scale.size(); ++m) CHECK(a.scale[m] == Approx(ref.scale[m]).epsilon(1e-6));
    CHECK(ba == ref_bf16);  // one rounding rule, exact in any order
    std::vector<float> y(17, 1.5f);
    for (bool acc : {false, true}) {
      quant::dequantize_rows(c.data(), 17, y.data(), 17, 1, 17, row_scale.data(), zero.data(), col_scale.data(),
                             colsum.data(), acc);
      for (size_t n = 0; n < 17; ++n) {
        const double v = 0.02 * 0.013 * (c[n] + 37.0 * 301);
        CHECK(y[n] == Approx(acc ? 2 * v : v).epsilon(1e-6).margin(1e-6));
      }
    }
  }
}

TEST_CASE("bf16 rounding: to nearest, ties to even, NaN kept", "[core][lowp]") {
  CHECK(quant::to_bf16(1.0f) == 0x3F80);
  CHECK(quant::to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);  // a tie: down to the even 1.0
  CHECK(quant::to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // a tie: up to the even 1 + 2^-6
  CHECK(quant::to_bf16(1.0f + 3 * std::ldexp(1.0f, -9)) == 0x3F81);  // nearest
  CHECK(quant::to_bf16(-2.0f) == 0xC000);
  CHECK(std::isnan(quant::bf16_to_float(quant::to_bf16(std::nanf("")))));
  CHECK(std::isinf(quant::bf16_to_float(quant::to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(quant::bf16_to_float(quant::to_bf16(3.4e38f)) == std::numeric_limits<float>::infinity());  // past bf16's max, 3.39e38
}

TEST_CASE("int8 linears stay within the documented bound of float32 on every path the CPU has", "[core][lowp]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  auto x = torch::randn({37, 70});
  x[3].zero_();  // an all-zero row: exactly zero out
  x[5][11] = 250.0f;  // an outlier row: a coarse scale, still within its bound
  x[6] = torch::gelu(x[6]);  // GELU-like: mostly positive, a small negative tail
  const auto w = torch::randn({29, 70}) * 0.05;
  const auto expect = x.matmul(w.t());
  std::vector<torch::Tensor> at63;  // each path's product with weights in ±63: the same operands everywhere
  for (isa::Level path : int8_caps()) {
    isa::ScopedCap cap(path);
    const auto packed = PackedLinear::pack(w, Precision::kInt8);
    INFO(isa::name(path) << ": " << hp::core::precision_backend(Precision::kInt8));
    CHECK(packed.weight_max() == hp::core::int8_weight_max());
    CHECK(packed.int8_weights().abs().max().item<int>() == packed.weight_max());
    const auto bound = int8_bound(x, w, packed);
    const auto native = product(packed, x);
    const auto err = (native.to(torch::kDouble) - expect.to(torch::kDouble)).abs();
    CHECK((err <= bound).all().item<bool>());
    CHECK(err.max().item<double>() > 0);  // quantised, not the float32 product
    CHECK(native[3].eq(0).all().item<bool>());
    // A quarter of the bound is the typical error; well inside it for most outputs.
    CHECK((err <= bound / 4).to(torch::kDouble).mean().item<double>() > 0.9);
    at63.push_back(product(PackedLinear::pack(w, Precision::kInt8, {}, hp::core::kPortableInt8WeightMax), x));
    // Accumulation adds to what the output holds; a NaN row gives NaN outputs and leaves the others alone.
    auto init = torch::randn({37, 29});
    auto acc = init.clone();
    packed.apply(acc, x, true);
    CHECK((acc - init - native).abs().max().item<double>() < 1e-5);
    auto with_nan = x.clone();
    with_nan[2][0] = std::nanf("");
    const auto y = product(packed, with_nan);
    CHECK(y[2].isnan().all().item<bool>());
    CHECK(torch::allclose(y.narrow(0, 3, 34), native.narrow(0, 3, 34)));
    // The dequantised weight is what the bound assumed: within half a step of each channel's scale.
    CHECK(((packed.dequantized() - w).abs() <= packed.scales().unsqueeze(1) / 2 + 1e-7).all().item<bool>());
  }
  // The paths against each other: the same rounded operands, float32 summation order aside.
  for (size_t i = 1; i < at63.size(); ++i)
    CHECK((at63[i] - at63[0]).abs().max().item<double>() <= 1e-5 * expect.abs().max().item<double>());
  // Scalar is the emulation, and says so.
  isa::ScopedCap scalar(isa::Level::kScalar);
  CHECK_THAT(hp::core::precision_backend(Precision::kInt8), Catch::Contains("emulated"));
}

// The GEMM multiplies the weights padded to a multiple of 8 rows (an odd width ran up to a third slower): the shape
// it receives, checked where it is called; outputs alone cannot tell (the padding's columns are never read).
TEST_CASE("int8: the GEMM receives the weight padded to a multiple of 8 output rows, only N of them read",
          "[core][lowp]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(9);
  const auto x = torch::randn({5, 40});
  for (const int64_t n : {13, 16, 1}) {
    const auto w = torch::randn({n, 40}) * 0.05;
    for (isa::Level path : int8_caps()) {
      if (path == isa::Level::kScalar) continue;  // the emulation runs no GEMM
      isa::ScopedCap cap(path);
      INFO(isa::name(path) << ", N " << n);
      const auto packed = PackedLinear::pack(w, Precision::kInt8);
      std::vector<std::array<int64_t, 3>> seen;
      hp::core::set_int8_gemm_observer([&](int64_t m, int64_t np, int64_t k) { seen.push_back({m, np, k}); });
      const auto y = product(packed, x);
      auto acc = torch::zeros({5, n});
      packed.apply(acc, x, true);
      hp::core::set_int8_gemm_observer({});
      REQUIRE(seen.size() == 2);
      const int64_t padded = (n + 7) / 8 * 8;
      for (const auto& s : seen) CHECK(s == std::array<int64_t, 3>{5, padded, 40});
      CHECK(y.sizes() == torch::IntArrayRef({5, n}));
      CHECK(torch::equal(acc, y));
    }
  }
}

TEST_CASE("int8 products sum u8·s8 pairs exactly: no int16 saturation on any path", "[core][lowp]") {
  // Every activation quantises to 255 (x = 1: lo 0, hi 1) and every weight to ±Q, so that each pair of
  // products needs 255 · Q · 2 (64770 at Q = 127, past int16): the exact result is x · w = ±K.
  torch::NoGradGuard no_grad;
  const int64_t K = 96;
  const auto x = torch::ones({5, K});
  auto w = torch::ones({6, K});
  w.narrow(0, 3, 3).mul_(-1.0);
  w[5].narrow(0, 0, K / 2).mul_(-1.0);  // a row of mixed signs sums to 0
  const auto expect = x.matmul(w.t());
  for (isa::Level path : int8_caps()) {
    isa::ScopedCap cap(path);
    INFO(isa::name(path) << ": " << hp::core::precision_backend(Precision::kInt8));
    const auto packed = PackedLinear::pack(w, Precision::kInt8);
    CHECK(product(packed, x).sub(expect).abs().max().item<double>() <= 1e-4 * K);
    // The path's range is the one its GEMM sums exactly.
    if (hp::core::int8_weight_max() == 127 && hp::core::lowp_native(Precision::kInt8))
      CHECK(hp::core::int8_gemm_exact_at_8_bits());
    // A pack in ±127 made before the cap came down is still multiplied right (emulated where it would saturate).
    const auto wide = PackedLinear::pack(w, Precision::kInt8, {}, 127);
    CHECK(product(wide, x).sub(expect).abs().max().item<double>() <= 1e-4 * K);
  }
  CHECK_THROWS(PackedLinear::pack(w, Precision::kInt8, {}, 100));
}

TEST_CASE("bf16 linears: within bf16's rounding bound where native, float32 itself elsewhere", "[core][lowp]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(8);
  const auto x = torch::randn({33, 96}), w = torch::randn({40, 96});
  const auto expect = x.to(torch::kDouble).matmul(w.to(torch::kDouble).t());
  const auto fp32 = product(PackedLinear::pack(w, Precision::kFp32), x);
  // Each operand rounded with unit roundoff u = 2^-8: |error| ≤ (2u + u²) Σ|x||w|, plus float32 accumulation.
  const double u = std::ldexp(1.0, -8);
  const auto bound = (2 * u + u * u + 1e-5) * x.abs().to(torch::kDouble).matmul(w.abs().to(torch::kDouble).t());
  std::vector<isa::Level> caps = {isa::Level::kScalar, isa::Level::kAvx2, isa::cpu_level()};
  if (!isa::cpu_has(isa::Level::kAvx512Bf16)) WARN("this CPU has no AVX512_BF16: native bf16 is not run here");
  for (isa::Level path : caps) {
    isa::ScopedCap cap(path);
    INFO(isa::name(path) << ": " << hp::core::precision_backend(Precision::kBf16));
    const auto packed = PackedLinear::pack(w, Precision::kBf16);
    const auto y = product(packed, x);
    if (hp::core::lowp_native(Precision::kBf16)) {
      const auto err = (y.to(torch::kDouble) - expect).abs();
      CHECK((err <= bound).all().item<bool>());
      CHECK(err.max().item<double>() > 1e-4);  // bf16, not the float32 product
    } else {
      CHECK_THAT(hp::core::precision_backend(Precision::kBf16), Catch::Contains("runs as fp32"));
      // float32 itself: the same product up to float32 summation order (K · u ≈ 6e-6 of Σ|x||w|).
      const auto abs_product = x.abs().to(torch::kDouble).matmul(w.abs().to(torch::kDouble).t());
      CHECK(((y - fp32).abs().to(torch::kDouble) <= 1e-5 * abs_product).all().item<bool>());
    }
    auto init = torch::randn({33, 40});
    auto acc = init.clone();
    packed.apply(acc, x, true);
    CHECK((acc - init - y).abs().max().item<double>() < 1e-5);
  }
}

TEST_CASE("the model at bf16 and int8: logits near float32, float32 again bit for bit", "[core][lowp]") {
  torch::NoGradGuard no_grad;
  auto model = hp::core::load_bert(hp::test::kTinyBert);
  hp::core::EncoderInput in;
  torch::manual_seed(1);
  in.input_ids = torch::randint(5, model.config().vocab_size, {3, 13});
  in.attention_mask = torch::ones({3, 13}, torch::kLong);
  in.attention_mask[1].narrow(0, 9, 4).zero_();
  const auto fp32 = model.forward(in).logits;
  for (Precision p : {Precision::kBf16, Precision::kInt8}) {
    model.set_precision(p);
    INFO(hp::core::precision_name(p));
    CHECK(model.precision() == p);
    const auto logits = model.forward(in).logits;
    const double diff = (logits - fp32).abs().max().item<double>();
    if (hp::core::lowp_native(p)) CHECK(diff > 0);  // bf16 without its instructions runs as float32
    else CHECK(diff < 1e-6 * fp32.abs().max().item<double>());
    CHECK(diff < 0.05 * fp32.abs().max().item<double>());
    // Autograd forwards (criteria, training) stay float32.
    torch::AutoGradMode grad(true);
    CHECK(torch::equal(model.forward(in).logits.detach(), [&] {
      auto m = model;
      m.set_precision(Precision::kFp32);
      return m.forward(in).logits.detach();
    }()));
  }
  model.set_precision(Precision::kFp32);
  CHECK(torch::equal(model.forward(in).logits, fp32));
  // A weight changed in place (an optimizer step) is seen by the next inference forward at every precision:
  // the fused query-key-value product and the int8 packs are made again.
  for (Precision p : {Precision::kFp32, Precision::kInt8}) {
    INFO(hp::core::precision_name(p));
    auto m = hp::core::load_bert(hp::test::kTinyBert);
    m.set_precision(p);
    const auto before = m.forward(in).logits;
    m.mutable_parameters().at("encoder.layer.0.attention.self.key.weight").mul_(3.0);
    m.mutable_parameters().at("encoder.layer.1.intermediate.dense.weight").mul_(-1.0);
    const auto after = m.forward(in).logits;
    auto fresh = hp::core::load_bert(hp::test::kTinyBert);
    for (const auto& [k, v] : m.parameters()) fresh.mutable_parameters().at(k).copy_(v);
    fresh.set_precision(p);
    CHECK_FALSE(torch::allclose(before, after));
    CHECK(torch::equal(after, fresh.forward(in).logits));
  }
}

TEST_CASE("smoothed int8: activations quantised as x / s and weights as w · s, against a hand computation",
          "[core][lowp]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  // Channel 3 of the activations carries outliers (as LayerNorm outputs and GELU outputs of BERT do).
  auto x = torch::randn({33, 48});
  x.select(1, 3).mul_(60.0);
  const auto w = torch::randn({20, 48}) * 0.05;
  const auto s = (x.abs().amax(0) / w.abs().amax(0)).sqrt();  // SmoothQuant, α = 0.5
  const auto inv = (1.0f / s).contiguous();
  // The kernel's col_mul path is the hand product x_mk · (1 / s_k) quantised as before, both code paths alike.
  const auto hand = quantize_rows((x * inv).contiguous());
  for (isa::Level path : isa::vector_paths()) {
    isa::ScopedCap cap(path);
    INFO("path " << isa::name(path));
    RowQuant r{std::vector<uint8_t>(33 * 48), std::vector<float>(33), std::vector<int32_t>(33)};
    quant::quantize_activation_rows(x.data_ptr<float>(), 48, 33, 48, r.q.data(), r.scale.data(), r.zero.data(),
                                    inv.data_ptr<float>());
    int most = 0;
    for (size_t i = 0; i < r.q.size(); ++i) most = std::max(most, std::abs(int(r.q[i]) - int(hand.q[i])));
    CHECK(most <= 1);  // x_mk · c_k rounds once, as the hand product does; a boundary value may go either way
    for (size_t m = 0; m < 33; ++m) CHECK(r.scale[m] == Approx(hand.scale[m]).epsilon(1e-6));
    CHECK(r.zero == hand.zero);
  }
  const auto smoothed = PackedLinear::pack(w, Precision::kInt8, s);
  const auto plain = PackedLinear::pack(w, Precision::kInt8);
  CHECK(smoothed.smoothed());
  CHECK_FALSE(plain.smoothed());
  // The weight is quantised as w · s per output channel; dequantized() gives it back in x's space.
  const auto ws = w * s.unsqueeze(0);
  const auto scales = ws.abs().amax(1) / smoothed.weight_max();
  CHECK(torch::allclose(smoothed.scales(), scales, 1e-6, 0));
  CHECK(torch::equal(smoothed.int8_weights(), torch::round(ws / scales.unsqueeze(1)).to(torch::kInt8)));
  CHECK(torch::allclose(smoothed.dequantized(), smoothed.int8_weights().to(torch::kFloat) *
                                                    smoothed.scales().unsqueeze(1) / s.unsqueeze(0), 1e-5, 1e-7));
  // The product is within the documented bound of its smoothed operands, and the outlier channel no longer
  // sets every row's scale: the error against float32 falls several-fold.
  const auto expect = x.matmul(w.t());
  const auto y = product(smoothed, x);
  const auto bound = int8_bound((x * inv).contiguous(), ws, smoothed);
  CHECK(((y - expect).abs().to(torch::kDouble) <= bound).all().item<bool>());
  const double err_smoothed = (y - expect).pow(2).mean().sqrt().item<double>();
  const double err_plain = (product(plain, x) - expect).pow(2).mean().sqrt().item<double>();
  // Several-fold at weights in ±127; at ±63 (AVX2) the weights' own rounding, twice as coarse, is a larger part
  // of what is left (measured 2.95×).
  CHECK(err_smoothed < err_plain / (smoothed.weight_max() == 127 ? 3.0 : 2.5));
  // The emulation multiplies the same smoothed operands.
  {
    isa::ScopedCap scalar(isa::Level::kScalar);
    CHECK((product(smoothed, x) - y).abs().max().item<double>() <= 1e-5 * expect.abs().max().item<double>());
  }
  // Factors must be positive and finite.
  CHECK_THROWS(PackedLinear::pack(w, Precision::kInt8, torch::zeros({48})));
  CHECK_THROWS(PackedLinear::pack(w, Precision::kInt8, torch::ones({47})));
}

TEST_CASE("int8 calibration: observes at float32, then smooths the outlier channels of the model", "[core][lowp]") {
  torch::NoGradGuard no_grad;
  auto model = hp::core::load_bert(hp::test::kTinyBert);
  // Outlier channels, as in BERT: two hidden dimensions scaled up in every LayerNorm.
  for (auto& [name, t] : model.mutable_parameters())
    if (name.find("LayerNorm.weight") != std::string::npos) {
      t[5].mul_(40.0);
      t[17].mul_(-25.0);
    }
  hp::core::EncoderInput in;
  torch::manual_seed(2);
  in.input_ids = torch::randint(5, model.config().vocab_size, {4, 16});
  in.attention_mask = torch::ones({4, 16}, torch::kLong);
  const auto fp32 = model.forward(in).logits;
  model.set_precision(Precision::kInt8);
  const auto dynamic = model.forward(in).logits;
  CHECK_FALSE(model.int8_calibrated());
  int calls = 0;
  model.calibrate_int8([&] {
    ++calls;
    // Recording runs at float32: the float32 logits (summed in another order where the fused passes differ).
    CHECK(torch::allclose(model.forward(in).logits, fp32, 1e-5, 1e-6));
  });
  CHECK(calls == 1);
  CHECK(model.int8_calibrated());
  CHECK(model.precision() == Precision::kInt8);
  const auto calibrated = model.forward(in).logits;
  const double err_dynamic = (dynamic - fp32).pow(2).mean().sqrt().item<double>();
  const double err_calibrated = (calibrated - fp32).pow(2).mean().sqrt().item<double>();
  INFO("RMS error: dynamic " << err_dynamic << ", calibrated " << err_calibrated);
  CHECK(err_calibrated > 0);
  CHECK(err_calibrated < err_dynamic / 2);
  // Float32 is untouched by the calibration; back at int8 the same calibrated logits.
  model.set_precision(Precision::kFp32);
  CHECK(torch::equal(model.forward(in).logits, fp32));
  model.set_precision(Precision::kInt8);
  CHECK(torch::equal(model.forward(in).logits, calibrated));
  // A feed that throws leaves the model uncalibrated and usable.
  auto other = hp::core::load_bert(hp::test::kTinyBert);
  other.set_precision(Precision::kInt8);
  CHECK_THROWS(other.calibrate_int8([&] {
    other.forward(in);
    throw std::runtime_error("stop");
  }));
  CHECK_FALSE(other.int8_calibrated());
  CHECK(torch::isfinite(other.forward(in).logits).all().item<bool>());
}

TEST_CASE("precision names: the three, and a config error naming the key otherwise", "[core][lowp]") {
  Precision p;
  CHECK(hp::core::parse_precision("int8", &p));
  CHECK(p == Precision::kInt8);
  CHECK_FALSE(hp::core::parse_precision("fp16", &p));
  CHECK_THROWS_WITH(hp::core::precision_setting("fp16"), "run.precision = 'fp16'; use fp32, bf16 or int8");
}

TEST_CASE("HEADPRUNE_MAX_ISA is a ceiling: a scoped cap lowers the path, never raises it past the variable",
          "[core][lowp]") {
  // Run plainly (no variable: the ceiling is the CPU's level) and by core.kernels_onednn_avx2 (HEADPRUNE_MAX_ISA=avx2,
  // where oneDNN was capped at avx2 when it started and creates no kernel above it).
  const isa::Level ceiling = isa::cap();
  {
    isa::ScopedCap up(isa::Level::kAmx);
    CHECK(isa::cap() == ceiling);
    CHECK((!isa::usable(isa::Level::kAmx) || ceiling == isa::Level::kAmx));
  }
  {
    isa::ScopedCap down(isa::Level::kScalar);
    CHECK(isa::cap() == isa::Level::kScalar);
  }
  CHECK(isa::cap() == ceiling);
}

TEST_CASE("int8 on AMX tiles: the VNNI GEMM's exact int32 sums, so its outputs bit for bit", "[.amx]") {
  // lowp_gemm.cpp runs the int8 product through oneDNN's matmul primitive where AMX is usable (a primitive per shape),
  // and through the u8s8s32 GEMM below the cap: both sum u8·s8 exactly in int32, so the dequantised outputs agree to
  // the bit — at odd shapes, a destination row stride past N, with and without accumulation. Hidden: core.lowp_amx
  // runs it, skipped (CTest) where AMX is not usable.
  if (!isa::usable(isa::Level::kAmx)) {
    hp::test::skip_optional("AMX is not usable here (no AMX, or capped below amx): the int8 AMX path is not run");
    return;
  }
  torch::manual_seed(3);
  for (const auto& [M, K, N] : std::vector<std::array<int64_t, 3>>{{1, 64, 16}, {37, 100, 45}, {256, 384, 1536}}) {
    INFO("M " << M << " K " << K << " N " << N);
    const auto w = torch::randn({N, K}), x = torch::randn({M, K}), start = torch::randn({M, N + 7});
    const PackedLinear pl = PackedLinear::pack(w, Precision::kInt8, {}, 127);
    for (const bool accumulate : {false, true}) {
      auto amx = start.clone(), vnni = start.clone();
      auto out = amx.narrow(1, 0, N);
      pl.apply(out, x, accumulate);
      {
        isa::ScopedCap below(isa::Level::kAvx512Bf16);
        auto out_vnni = vnni.narrow(1, 0, N);
        pl.apply(out_vnni, x, accumulate);
      }
      CHECK(torch::equal(amx, vnni));  // the 7 columns past N untouched by both
      CHECK((amx - start).abs().max().item<float>() > 0);  // something was written
    }
  }
}
