// Latency measurement (see eval/latency.h).
#include "eval/latency.h"

#include <algorithm>
#include <chrono>
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
