// prune/search/latency_table.h: the line fit against hand-computed least squares, the prediction against a hand sum
// over a slimmed model's layers, and the measured table's shape on the tiny model (what was timed, not how
// fast: timings are for bench/, not for unit tests).
#include <catch2/catch.hpp>

#include "core/io/checkpoint.h"
#include "fixtures.h"
#include "prune/search/latency_table.h"
#include "prune/export/slim.h"

using namespace hp;

TEST_CASE("latency table: the least-squares line and its R² as computed by hand", "[prune][latency]") {
  // x = 1..4, y = 2, 4, 5, 4: x̄ = 2.5, ȳ = 3.75, Sxy = 3.5, Sxx = 5 → slope 0.7, intercept 2.0; fitted 2.7, 3.4,
  // 4.1, 4.8, residuals −0.7, 0.6, 0.9, −0.8 → SSres 2.3, SStot 4.75, R² = 1 − 2.3 / 4.75.
  prune::SublayerLatency s;
  s.units = {1, 2, 3, 4};
  s.ms = {2, 4, 5, 4};
  prune::fit_line(s);
  CHECK(s.slope == Approx(0.7).epsilon(1e-12));
  CHECK(s.intercept == Approx(2.0).epsilon(1e-12));
  CHECK(s.r2 == Approx(1 - 2.3 / 4.75).epsilon(1e-12));
  CHECK(s.max_residual_ms == Approx(0.9).epsilon(1e-12));
  CHECK(s.at(0) == 0.0);  // an empty sublayer costs nothing
  CHECK(s.at(10) == Approx(9.0).epsilon(1e-12));
  // An exact line comes back exactly, with R² = 1.
  s.units = {3, 5, 9};
  s.ms = {1.5 + 0.25 * 3, 1.5 + 0.25 * 5, 1.5 + 0.25 * 9};
  prune::fit_line(s);
  CHECK(s.slope == Approx(0.25).epsilon(1e-12));
  CHECK(s.intercept == Approx(1.5).epsilon(1e-12));
  CHECK(s.r2 == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("latency table: the prediction of a slimmed model is the fixed part plus its non-empty sublayers",
          "[prune][latency]") {
  const auto model = core::load_bert(test::kTinyBert);
  const auto& c = model.config();
  REQUIRE(c.num_hidden_layers == 2);
  prune::LatencyTable t;
  t.fixed_ms = 1.0;
  t.attention.intercept = 0.5, t.attention.slope = 0.25;
  t.ffn.intercept = 0.2, t.ffn.slope = 0.01;
  // Layer 0: 3 heads, 10 neurons; layer 1: no heads, every neuron.
  core::HeadSet heads(2, std::vector<bool>(c.num_attention_heads, false));
  core::NeuronSet neurons(2, std::vector<bool>(c.intermediate_size, false));
  for (int h = 0; h < 3; ++h) heads[0][h] = true;
  for (int i = 0; i < 10; ++i) neurons[0][i] = true;
  neurons[1].assign(c.intermediate_size, true);
  const auto slim = prune::slim_model(model, heads, neurons);
  const double by_hand = 1.0 + (0.5 + 0.25 * 3) + (0.2 + 0.01 * 10) + 0 + (0.2 + 0.01 * c.intermediate_size);
  CHECK(prune::predicted_latency(t, slim.config()) == Approx(by_hand).epsilon(1e-12));
  t.scale = 2;  // the calibration scales the sublayers, not the fixed part
  CHECK(prune::predicted_latency(t, slim.config()) == Approx(1.0 + 2 * (by_hand - 1.0)).epsilon(1e-12));
}

TEST_CASE("latency table: sublayer times lost in the noise fall back to multiply-adds, still exact on the whole",
          "[prune][latency]") {
  // What CI met on a noisy machine: the tiny model's sublayer times all measured 0 (or fitted below 0), so the
  // sum at the unpruned shape was 0 and the prediction missed the measured whole model by half.
  const auto model = core::load_bert(test::kTinyBert);
  const auto& c = model.config();
  prune::LatencyTable t = prune::latency_layout(c, 2, 8, core::Precision::kFp32);
  t.fixed_ms = 0.1, t.unpruned_ms = 0.3;
  prune::fit_table(t, c);
  CHECK(prune::predicted_latency(t, c) == Approx(0.3).epsilon(1e-12));
  const double D = c.hidden_size, dh = c.head_dim();
  CHECK(t.attention.slope / t.ffn.slope == Approx((4 * D * dh + 2 * 8 * dh) / (2 * D)).epsilon(1e-12));
  CHECK(t.attention.intercept == 0);
  CHECK(t.ffn.intercept == 0);
  // A line that fits below 0 at the unpruned width (one head's noise, the rest 0) falls back the same way.
  REQUIRE(t.attention.ms.size() >= 3);
  t.attention.ms.assign(t.attention.ms.size(), 0.0);
  t.attention.ms[0] = 1.0;
  prune::fit_table(t, c);
  CHECK(t.attention.intercept == 0);
  CHECK(prune::predicted_latency(t, c) == Approx(0.3).epsilon(1e-12));
  // The whole model no slower than the emptied one (noise again): there is no time to share out, so no fallback:
  // the lines stay as fitted and the prediction is the fixed part's, never multiply-adds read as milliseconds.
  prune::LatencyTable flat = prune::latency_layout(c, 2, 8, core::Precision::kFp32);
  flat.fixed_ms = 0.3, flat.unpruned_ms = 0.25;
  prune::fit_table(flat, c);
  CHECK(flat.attention.slope == 0);
  CHECK(flat.ffn.slope == 0);
  CHECK(flat.scale == 1);
  CHECK(prune::predicted_latency(flat, c) == Approx(0.3).epsilon(1e-12));
}

TEST_CASE("latency table: every head count and 16 FFN widths timed, keyed by shape and machine", "[prune][latency]") {
  const auto model = core::load_bert(test::kTinyBert);
  const auto& c = model.config();
  long calls = 0, last_total = 0;
  const auto t = prune::measure_latency_table(model, 2, 8, core::Precision::kFp32, [&](long done, long total) {
    CHECK(done == ++calls);
    last_total = total;
  });
  CHECK(calls == prune::latency_configurations(c));
  CHECK(last_total == calls);
  CHECK(t.batch == 2);
  CHECK(t.seq == 8);
  CHECK(t.key == prune::latency_key(c, 2, 8, core::Precision::kFp32));
  CHECK(t.key != prune::latency_key(c, 2, 16, core::Precision::kFp32));  // another shape is another table
  CHECK(t.key != prune::latency_key(c, 2, 8, core::Precision::kInt8));  // and another precision
  CHECK(t.precision == "fp32");
  std::vector<long> heads;
  for (long h = 1; h <= c.num_attention_heads; ++h) heads.push_back(h);
  CHECK(t.attention.units == heads);
  REQUIRE(t.ffn.units.size() == std::min<size_t>(16, static_cast<size_t>(c.intermediate_size)));
  CHECK(t.ffn.units.back() == c.intermediate_size);
  for (size_t k = 1; k < t.ffn.units.size(); ++k) CHECK(t.ffn.units[k] > t.ffn.units[k - 1]);
  CHECK(t.attention.ms.size() == t.attention.units.size());
  CHECK(t.ffn.ms.size() == t.ffn.units.size());
  for (double ms : t.attention.ms) CHECK(ms >= 0);
  CHECK(t.fixed_ms > 0);
  CHECK(t.unpruned_ms > 0);
  // Calibrated to the whole model: exact for the unpruned model and for one with every sublayer empty.
  CHECK(t.scale > 0);
  if (t.unpruned_ms > t.fixed_ms) CHECK(prune::predicted_latency(t, c) == Approx(t.unpruned_ms).epsilon(1e-9));
  const core::HeadSet none(c.num_hidden_layers, std::vector<bool>(c.num_attention_heads, false));
  const core::NeuronSet no_neurons(c.num_hidden_layers, std::vector<bool>(c.intermediate_size, false));
  CHECK(prune::predicted_latency(t, prune::slim_model(model, none, no_neurons).config()) == t.fixed_ms);
  // The JSON round trip keeps everything.
  const auto back = nlohmann::json(t).get<prune::LatencyTable>();
  CHECK(back.key == t.key);
  CHECK(back.ffn.ms == t.ffn.ms);
  CHECK(back.attention.slope == t.attention.slope);
}

TEST_CASE("latency table: each model timed is slimmed to its counts at the run's precision", "[prune][latency]") {
  const auto model = core::load_bert(test::kTinyBert);
  const auto& c = model.config();
  for (auto p : {core::Precision::kFp32, core::Precision::kBf16, core::Precision::kInt8}) {
    const core::Bert m = prune::timed_model(model, 1, 3, p);
    CHECK(m.precision() == p);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      CHECK(m.config().heads_in_layer(l) == 1);
      CHECK(m.config().ffn_width(l) == 3);
    }
  }
  CHECK(model.precision() == core::Precision::kFp32);  // the model given is left as it was
  // A table read back from before the key named the precision is fp32's.
  auto j = nlohmann::json(prune::latency_layout(c, 2, 8, core::Precision::kFp32));
  j.erase("precision");
  CHECK(j.get<prune::LatencyTable>().precision == "fp32");
}
