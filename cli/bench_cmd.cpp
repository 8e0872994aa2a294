// `prune bench --model DIR [--compare DIR]`: latency and throughput at each batch size, parameters and
// FLOPs, and with --compare the measured speedup against the FLOP-theoretical bound (FLOPs ratio).
#include <cstdio>
#include <iostream>
#include <optional>

#include "core/io/checkpoint.h"
#include "core/kernels/lowp_gemm.h"
#include "core/base/errors.h"
#include "core/base/log.h"
#include "eval/evaluator.h"  // calibrate_int8
#include "eval/flops.h"
#include "eval/latency.h"
#include "cli/commands.h"

namespace hp::cli {

int run_bench(const core::Config& cfg) {
  const auto& b = cfg.bench;
  if (b.seq < 1) throw ConfigError("bench.seq = " + std::to_string(b.seq) + "; use a positive length");
  for (int batch : b.batches)
    if (batch < 1) throw ConfigError("bench.batches holds " + std::to_string(batch) + "; use positive batch sizes");
  const core::Precision precision = core::precision_setting(cfg.run.precision);
  const core::Precision compare_precision =
      b.compare_precision.empty() ? precision : core::precision_setting(b.compare_precision, "bench.compare_precision");
  core::Bert model = core::load_bert(cfg.model.path);
  model.set_precision(precision);
  std::optional<core::Bert> other;
  if (!b.compare.empty()) {
    other.emplace(core::load_bert(b.compare));
    other->set_precision(compare_precision);
  }
  // As eval and infer run them: int8 calibrated on data.task's train split (run.calibrate).
  if (model.precision() == core::Precision::kInt8)
    eval::calibrate_int8(model, cfg, core::Tokenizer::from_model_dir(cfg.model.path));
  if (other && other->precision() == core::Precision::kInt8)
    eval::calibrate_int8(*other, cfg, core::Tokenizer::from_model_dir(b.compare));
  // bench's own flag, not data.max_seq_len: named as such, for the model and the compared one.
  for (const core::Bert* m : std::initializer_list<const core::Bert*>{&model, other ? &*other : nullptr}) {
    const int positions = m ? m->config().max_position_embeddings : b.seq;
    if (b.seq > positions)
      throw ConfigError("bench.seq = " + std::to_string(b.seq) + " exceeds the max_position_embeddings " +
                        std::to_string(positions) + " of " + (m == &model ? cfg.model.path : b.compare) +
                        "; use --seq " + std::to_string(positions) + " or less");
  }
  auto describe = [&](const std::string& name, const core::Bert& m) {
    std::printf("%-10s %s (%s): %d heads, %ld parameters, %.3f GFLOP per sequence of %d\n", name.c_str(),
                name == "model" ? cfg.model.path.c_str() : b.compare.c_str(),
                core::precision_backend(m.precision()).c_str(), m.config().total_heads(),
                eval::parameter_count(m.config()), eval::forward_flops(m.config(), 1, b.seq) / 1e9, b.seq);
  };
  describe("model", model);
  if (other) describe("compare", *other);
  for (int batch : b.batches) {
    auto in = eval::synthetic_input(model.config(), batch, b.seq);
    const auto t = eval::measure_latency(model, in, 2, 5, b.min_seconds);
    std::printf("batch %3d x %d: model   %9.2f ms  %8.1f seq/s  (%d runs)\n", batch, b.seq, t.median_ms,
                t.examples_per_s, t.runs);
    if (!other) continue;
    const auto c = eval::measure_latency(*other, in, 2, 5, b.min_seconds);
    const double speedup = c.median_ms / t.median_ms;
    const double bound =
        eval::forward_flops(other->config(), batch, b.seq) / eval::forward_flops(model.config(), batch, b.seq);
    std::printf("batch %3d x %d: compare %9.2f ms  %8.1f seq/s  speedup x%.3f, FLOP bound x%.3f (%.0f%% of bound)\n",
                batch, b.seq, c.median_ms, c.examples_per_s, speedup, bound, 100 * speedup / bound);
  }
  return 0;
}

}  // namespace hp::cli
