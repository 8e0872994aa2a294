// The latency table of a latency budget (prune.target_latency; Kwon et al. 2022's lookup table): on this
// machine, with headprune's own kernels, the forward time of one layer's attention sublayer with 1..H heads
// and of its FFN sublayer at widths across 1..I, at prune.latency_batch × prune.latency_seq tokens.
//
// Measured on the model itself, slimmed: every layer given n heads and no FFN (or m neurons and no heads),
// the input run through embeddings and layer 0 only (EncoderInput::end_layer = 1); the sublayer's time is
// that minus the time with nothing in the layer. Every model is timed at the run's precision (run.precision: the
// one stage 8 times the slimmed model at), since int8 and bf16 shift the costs between heads and neurons. The parts no budget removes (embeddings, every layer's
// LayerNorms, pooler, classifier) are the whole model with every sublayer empty.
//
// Fit: per sublayer, least squares intercept + slope × units over the units ≥ 1 measured (the table keeps
// the measurements, the fit and its R² so that a reader sees whether a line is the right model); an empty
// sublayer costs 0. One layer timed alone comes out faster than its share of the whole model (on MiniLM the
// sum of six predicted 7% under the measured whole), so the sublayer times are scaled so that the prediction
// is exact at both ends measured on the whole model, every sublayer empty and none pruned:
// predicted(model) = fixed + scale × Σ over non-empty sublayers (intercept + slope × units).
// The file (RUN_DIR/latency_table.json) is reused while its key (shape, batch, seq, CPU, runtime) matches.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model/bert.h"

namespace hp::prune {

struct SublayerLatency {
  std::vector<long> units;  // heads or neurons measured
  std::vector<double> ms;  // median forward time of one such sublayer
  double intercept = 0, slope = 0, r2 = 0;  // the least-squares line over `units`
  double max_residual_ms = 0;  // the largest |measured − fitted|
  double at(long n) const { return n > 0 ? intercept + slope * static_cast<double>(n) : 0.0; }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SublayerLatency, units, ms, intercept, slope, r2, max_residual_ms)

struct LatencyTable {
  std::string key;  // shape, batch, seq, precision, CPU and runtime the table was measured for
  long batch = 0, seq = 0;
  std::string precision = "fp32";  // of every model timed
  double fixed_ms = 0;  // embeddings, LayerNorms, pooler, classifier: every sublayer empty
  double unpruned_ms = 0;  // the whole unpruned model, measured
  SublayerLatency attention, ffn;
  double scale = 1;  // (unpruned − fixed) / the unscaled sublayer sum of the unpruned model
  double seconds = 0;  // time the measurement took
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LatencyTable, key, batch, seq, precision, fixed_ms, unpruned_ms,
                                                attention, ffn, scale, seconds)

// The key of a table for `cfg` at batch × seq and precision `p` on this machine.
std::string latency_key(const core::BertConfig& cfg, long batch, long seq, core::Precision p);

// Fits intercept and slope of `s.ms` against `s.units` (least squares; R², largest residual).
void fit_line(SublayerLatency& s);
// Both lines fitted and `scale` set from the whole-model times, for the unpruned model `cfg`.
void fit_table(LatencyTable& t, const core::BertConfig& cfg);

// A table for `cfg` at batch × seq with its key and the units to measure, every time 0 (what
// measure_latency_table fills; ranks that do not measure receive the times of the one that does).
LatencyTable latency_layout(const core::BertConfig& cfg, long batch, long seq, core::Precision p);

// What measure_latency_table times: `model` with every layer keeping its first `n` heads and first `m` neurons,
// slimmed, at precision `p`.
core::Bert timed_model(const core::Bert& model, long n, long m, core::Precision p);

// The configurations measure_latency_table times (its progress total).
long latency_configurations(const core::BertConfig& cfg);

// Measures the table for `model` (unpruned), every model timed at precision `p`. `progress(done, total)` after each
// configuration.
LatencyTable measure_latency_table(const core::Bert& model, long batch, long seq, core::Precision p,
                                   const std::function<void(long, long)>& progress = {});

// The table's prediction for a model of `cfg`'s shape (its heads and FFN widths per layer).
double predicted_latency(const LatencyTable& t, const core::BertConfig& cfg);

}  // namespace hp::prune
