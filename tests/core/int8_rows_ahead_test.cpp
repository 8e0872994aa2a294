// int8 inputs quantised ahead (core/kernels/lowp_gemm.h: Int8Rows): by blocks of rows, as an epilogue's threads
// quantise them, they give the product the separate pass gives, bit for bit; the model's forward with its FFN inputs
// quantised in the epilogues equals the forward that quantises each linear's input on its own.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <vector>

#include "core/io/checkpoint.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "fixtures.h"

namespace {

namespace isa = hp::core::isa;
using hp::core::Int8Rows;
using hp::core::PackedLinear;
using hp::core::Precision;

// The int8 paths on this CPU as caps: scalar (emulated), AVX2, and the newest where it is another.
std::vector<isa::Level> caps() {
  std::vector<isa::Level> v = {isa::Level::kScalar};
  if (isa::cpu_has(isa::Level::kAvx2)) v.push_back(isa::Level::kAvx2);
  if (isa::cpu_level() != isa::Level::kAvx2 && isa::cpu_has(isa::Level::kAvx2)) v.push_back(isa::cpu_level());
  return v;
}

// Restores the forward's default however the case ends.
struct RowsAheadOff {
  RowsAheadOff() { hp::core::set_int8_rows_ahead(false); }
  ~RowsAheadOff() { hp::core::set_int8_rows_ahead(true); }
};

}  // namespace

TEST_CASE("int8 rows quantised ahead in blocks give the product bit for bit, smoothed or not, on every path",
          "[core][lowp]") {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const int64_t M = 37, K = 19, N = 23;
  const auto wide = torch::randn({M, K + 5});
  const auto x = wide.narrow(1, 2, K);  // row stride K + 5, as an epilogue's rows inside a wider buffer
  x[4].zero_();
  x[9][3] = 90.0f;
  const auto w = torch::randn({N, K}) * 0.1;
  const auto smooth = torch::rand({K}) + 0.5;
  for (isa::Level path : caps()) {
    isa::ScopedCap cap(path);
    for (const bool smoothed : {false, true}) {
      INFO(isa::name(path) << (smoothed ? ", smoothed" : ""));
      const auto packed = PackedLinear::pack(w, Precision::kInt8, smoothed ? smooth : torch::Tensor());
      auto separate = torch::full({M, N}, std::nanf(""));
      packed.apply(separate, x, false);
      Int8Rows rows;
      REQUIRE(packed.prepare_rows(rows, M));
      for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 14}, {14, 36}, {36, 37}})
        packed.quantize_rows(x.data_ptr<float>(), x.stride(0), begin, end, rows);
      auto ahead = torch::full({M, N}, std::nanf(""));
      packed.apply(ahead, x, false, {}, &rows);
      CHECK(torch::equal(ahead, separate));
      // Accumulating reads them the same way.
      auto init = torch::randn({M, N});
      auto acc_separate = init.clone(), acc_ahead = init.clone();
      packed.apply(acc_separate, x, true);
      packed.apply(acc_ahead, x, true, {}, &rows);
      CHECK(torch::equal(acc_ahead, acc_separate));
      // Rows quantised for another pack (here: other smoothing) are not taken: it quantises its own.
      const auto other = PackedLinear::pack(w, Precision::kInt8, smoothed ? torch::Tensor() : smooth);
      auto own = torch::empty({M, N}), given = torch::empty({M, N});
      other.apply(own, x, false);
      other.apply(given, x, false, {}, &rows);
      CHECK(torch::equal(given, own));
    }
  }
  // Only int8 quantises ahead.
  Int8Rows rows;
  CHECK_FALSE(PackedLinear::pack(w, Precision::kFp32).prepare_rows(rows, M));
  CHECK(rows.pack == nullptr);
}

TEST_CASE("the int8 forward with its FFN inputs quantised in the epilogues equals the separate passes bit for bit",
          "[core][lowp]") {
  torch::NoGradGuard no_grad;
  hp::core::EncoderInput in;
  torch::manual_seed(3);
  const auto reference = hp::core::load_bert(hp::test::kTinyBert);
  in.input_ids = torch::randint(5, reference.config().vocab_size, {3, 11});
  in.attention_mask = torch::ones({3, 11}, torch::kLong);
  in.attention_mask[2].narrow(0, 6, 5).zero_();
  const auto& cfg = reference.config();
  auto neurons = torch::ones({cfg.num_hidden_layers, cfg.intermediate_size});
  neurons[0].narrow(0, 3, 7).zero_();
  for (isa::Level path : caps()) {
    isa::ScopedCap cap(path);
    for (const bool calibrated : {false, true}) {
      INFO(isa::name(path) << (calibrated ? ", calibrated" : ", dynamic"));
      auto model = hp::core::load_bert(hp::test::kTinyBert);
      model.set_precision(Precision::kInt8);
      if (calibrated) model.calibrate_int8([&] { model.forward(in); });
      const auto fused = model.forward(in);
      hp::core::EncoderInput masked = in;
      masked.neuron_mask = neurons;  // the FFN output's input changes after its epilogue: quantised on its own
      const auto fused_masked = model.forward(masked).logits;
      RowsAheadOff off;
      const auto separate = model.forward(in);
      CHECK(torch::equal(fused.logits, separate.logits));
      CHECK(torch::equal(fused.last_hidden, separate.last_hidden));
      CHECK(torch::equal(fused_masked, model.forward(masked).logits));
    }
  }
}
