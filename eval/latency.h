// Latency and throughput of a model's forward pass (inference mode, no grad) on a fixed batch:
// warm-up runs, then the median of timed runs. Used by `prune bench` and the pruning curves.
#pragma once

#include <functional>
#include <string>

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

// Two models timed side by side: `rounds` alternating rounds of each (`base()` then `small()`, each returning one
// median in ms), the median of each model's round medians, so that a passing slowdown of the machine does not land
// on one model only. A speed-up above kBoundSlack x `flop_bound` (the ratio of their FLOPs, at one precision) is a
// timing error (a busy machine): measured again up to kRetries times, and `suspect` says so if it stays there.
constexpr double kBoundSlack = 1.5;
constexpr int kRetries = 2;
struct SideBySide {
  double base_ms = 0, small_ms = 0, speedup = 0;
  int measured = 0;  // times the pair was measured (1 + the retries taken)
  std::string suspect;  // empty, or why the speed-up is not to be believed
};
SideBySide time_side_by_side(const std::function<double()>& base, const std::function<double()>& small,
                             double flop_bound, bool same_precision, int rounds = 3);

}  // namespace hp::eval
