// Latency measurement (see eval/latency.h).
#include "eval/latency.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <vector>
#include <torch/utils.h>

namespace hp::eval {

core::EncoderInput synthetic_input(const core::BertConfig& cfg, long batch, long seq, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  core::EncoderInput in;
  // Ids above the special tokens (BERT vocabularies keep [PAD] [unused] [UNK] [CLS] ... below 1000).
  const long low = std::min<long>(1000, cfg.vocab_size / 2);
  in.input_ids = torch::randint(low, cfg.vocab_size, {batch, seq}, gen, torch::kLong);
  in.token_type_ids = torch::zeros({batch, seq}, torch::kLong);
  in.attention_mask = torch::ones({batch, seq}, torch::kLong);
  return in;
}

Latency measure_latency(const core::Bert& model, const core::EncoderInput& in, int warmup, int min_runs,
                        double min_seconds) {
  torch::NoGradGuard no_grad;
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) model.forward(in);
  std::vector<double> ms;
  const auto start = clock::now();
  while (static_cast<int>(ms.size()) < min_runs ||
         std::chrono::duration<double>(clock::now() - start).count() < min_seconds) {
    const auto t0 = clock::now();
    model.forward(in);
    ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  Latency r;
  r.batch = in.input_ids.size(0);
  r.seq = in.input_ids.size(1);
  r.median_ms = ms[ms.size() / 2];
  r.min_ms = ms.front();
  r.examples_per_s = r.batch / (r.median_ms / 1000.0);
  r.runs = static_cast<int>(ms.size());
  return r;
}

}  // namespace hp::eval

namespace hp::eval {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

SideBySide time_side_by_side(const std::function<double()>& base, const std::function<double()>& small,
                             double flop_bound, bool same_precision, int rounds) {
  SideBySide r;
  for (int attempt = 0; attempt <= kRetries; ++attempt) {
    std::vector<double> b, s;
    for (int round = 0; round < rounds; ++round) b.push_back(base()), s.push_back(small());
    r.base_ms = median(b), r.small_ms = median(s), r.speedup = r.base_ms / r.small_ms;
    r.measured = attempt + 1;
    if (!same_precision || !(r.speedup > kBoundSlack * flop_bound)) return r;
  }
  std::ostringstream why;
  why.precision(3);
  why << "x" << r.speedup << " is above " << kBoundSlack << " x its FLOP bound x" << flop_bound << " in all "
      << r.measured << " measurements: the machine was busy while it was timed; time it again with prune bench";
  r.suspect = why.str();
  return r;
}

}  // namespace hp::eval
