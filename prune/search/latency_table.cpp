// The latency table (see prune/search/latency_table.h).
#include "prune/search/latency_table.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/base/log.h"
#include "core/kernels/isa.h"  // cpu_model
#include "core/kernels/lowp_gemm.h"  // precision_name
#include "core/kernels/runtime.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "prune/export/slim.h"

namespace hp::prune {

namespace {

// The FFN widths measured: 16 evenly spaced across 1..I (the last is I).
std::vector<long> ffn_grid(long I) {
  std::vector<long> m;
  for (long k = 1; k <= 16; ++k) m.push_back(std::max(1L, I * k / 16));
  m.erase(std::unique(m.begin(), m.end()), m.end());
  return m;
}

double median_ms(const core::Bert& model, const core::EncoderInput& in) {
  return eval::measure_latency(model, in, 1, 5, 0.2).median_ms;
}

}  // namespace

core::Bert timed_model(const core::Bert& model, long n, long m, core::Precision p) {
  const core::BertConfig& c = model.config();
  core::HeadSet heads(c.num_hidden_layers, std::vector<bool>(c.num_attention_heads, false));
  core::NeuronSet neurons(c.num_hidden_layers, std::vector<bool>(c.intermediate_size, false));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    for (long h = 0; h < n; ++h) heads[l][h] = true;
    for (long i = 0; i < m; ++i) neurons[l][i] = true;
  }
  core::Bert slim = slim_model(model, heads, neurons);
  slim.set_precision(p);
  return slim;
}

std::string latency_key(const core::BertConfig& cfg, long batch, long seq, core::Precision p) {
  return "L" + std::to_string(cfg.num_hidden_layers) + " D" + std::to_string(cfg.hidden_size) + " H" +
         std::to_string(cfg.num_attention_heads) + " I" + std::to_string(cfg.intermediate_size) + " batch " +
         std::to_string(batch) + " seq " + std::to_string(seq) + " " + core::precision_name(p) + " | " +
         core::isa::cpu_model() + " | " + core::runtime_summary();
}

void fit_line(SublayerLatency& s) {
  const double n = static_cast<double>(s.units.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t k = 0; k < s.units.size(); ++k) {
    const double x = static_cast<double>(s.units[k]), y = s.ms[k];
    sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  s.slope = den > 0 ? (n * sxy - sx * sy) / den : 0;
  s.intercept = n > 0 ? (sy - s.slope * sx) / n : 0;
  double ss_res = 0, ss_tot = 0;
  s.max_residual_ms = 0;
  for (size_t k = 0; k < s.units.size(); ++k) {
    const double r = s.ms[k] - s.at(s.units[k]);
    ss_res += r * r, ss_tot += (s.ms[k] - sy / n) * (s.ms[k] - sy / n);
    s.max_residual_ms = std::max(s.max_residual_ms, std::abs(r));
  }
  s.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
}

long latency_configurations(const core::BertConfig& cfg) {
  return 3 + cfg.num_attention_heads + static_cast<long>(ffn_grid(cfg.intermediate_size).size());
}

LatencyTable latency_layout(const core::BertConfig& cfg, long batch, long seq, core::Precision p) {
  LatencyTable t;
  t.key = latency_key(cfg, batch, seq, p);
  t.batch = batch, t.seq = seq, t.precision = core::precision_name(p);
  for (long n = 1; n <= cfg.num_attention_heads; ++n) t.attention.units.push_back(n);
  t.ffn.units = ffn_grid(cfg.intermediate_size);
  t.attention.ms.assign(t.attention.units.size(), 0.0);
  t.ffn.ms.assign(t.ffn.units.size(), 0.0);
  return t;
}

LatencyTable measure_latency_table(const core::Bert& model, long batch, long seq, core::Precision p,
                                   const std::function<void(long, long)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const core::BertConfig& c = model.config();
  LatencyTable t = latency_layout(c, batch, seq, p);
  const core::EncoderInput whole = eval::synthetic_input(c, batch, seq);
  core::EncoderInput one = whole;
  one.end_layer = 1;  // embeddings and layer 0
  const long total = latency_configurations(c);
  long done = 0;
  auto step = [&] {
    if (progress) progress(++done, total);
  };
  core::Bert unpruned = model;  // a copy shares the weights and packs its own
  unpruned.set_precision(p);
  t.unpruned_ms = median_ms(unpruned, whole);
  step();
  const core::Bert empty = timed_model(model, 0, 0, p);
  t.fixed_ms = median_ms(empty, whole);
  step();
  const double base = median_ms(empty, one);  // layer 0 with both sublayers empty
  step();
  for (size_t k = 0; k < t.attention.units.size(); ++k, step())
    t.attention.ms[k] = std::max(0.0, median_ms(timed_model(model, t.attention.units[k], 0, p), one) - base);
  for (size_t k = 0; k < t.ffn.units.size(); ++k, step())
    t.ffn.ms[k] = std::max(0.0, median_ms(timed_model(model, 0, t.ffn.units[k], p), one) - base);
  fit_table(t, c);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

namespace {

double sublayer_sum(const LatencyTable& t, const core::BertConfig& cfg) {
  double ms = 0;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) ms += t.attention.at(cfg.heads_in_layer(l)) + t.ffn.at(cfg.ffn_width(l));
  return ms;
}

}  // namespace

void fit_table(LatencyTable& t, const core::BertConfig& cfg) {
  fit_line(t.attention);
  fit_line(t.ffn);
  double sum = sublayer_sum(t, cfg);
  if (sum <= 0 && t.unpruned_ms > t.fixed_ms) {
    // The sublayers' times are lost in the noise (a tiny model): the lines fall back to a head's and a
    // neuron's FLOPs (eval/flops.h) through the origin, scaled below to the whole model's measured time.
    const long seq = std::max(1L, t.seq);
    t.attention.intercept = 0, t.attention.slope = eval::head_flops(cfg, seq), t.attention.r2 = 0;
    t.ffn.intercept = 0, t.ffn.slope = eval::neuron_flops(cfg, seq), t.ffn.r2 = 0;
    core::log_warn("prune", "latency table " + t.key +
                                ": the sublayers' measured times fit to nothing above the noise; their costs "
                                "fall back to FLOPs, scaled to the whole model's measured time");
    sum = sublayer_sum(t, cfg);
  }
  t.scale = sum > 0 && t.unpruned_ms > t.fixed_ms ? (t.unpruned_ms - t.fixed_ms) / sum : 1.0;
}

double predicted_latency(const LatencyTable& t, const core::BertConfig& cfg) {
  return t.fixed_ms + t.scale * sublayer_sum(t, cfg);
}

}  // namespace hp::prune
