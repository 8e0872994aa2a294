// Latency and throughput of a model's forward pass (inference mode, no grad) on a fixed batch:
// warm-up runs, then the median of timed runs. Used by `prune bench` and the pruning curves.
#pragma once

#include "core/model/bert.h"

namespace hp::eval {

struct Latency {
  long batch = 0, seq = 0;
  double median_ms = 0;  // per forward pass of the whole batch
  double min_ms = 0;
  double examples_per_s = 0;  // batch / median
  int runs = 0;
};

// A [batch, seq] input of token ids drawn from the vocabulary with a fixed seed (no padding).
core::EncoderInput synthetic_input(const core::BertConfig& cfg, long batch, long seq, uint64_t seed = 0);

// Times model.forward(in): `warmup` untimed runs, then runs until both `min_runs` runs and
// `min_seconds` have passed.
Latency measure_latency(const core::Bert& model, const core::EncoderInput& in, int warmup = 2, int min_runs = 5,
                        double min_seconds = 1.0);

}  // namespace hp::eval
