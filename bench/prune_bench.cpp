// Pruning benchmarks (numbers in bench/README.md):
//   1. Taylor importance + 11-point masking curve on SST-2 — the product path (prune/heads/curves.h:
//      dynamic padding, no weight gradients, slimmed models per point). Compare with
//      bench/taylor_curve_bench.py (HF run_bertology-style loop) on the same model and data.
//   2. Attention attribution, m steps, on the first SST-2 dev examples as Hao et al.'s script takes them,
//      batched with reuse of lower layers vs full forward passes.
//      Compare with bench/attattr_bench.py (per-example, per-layer loop as in Hao et al.'s code).
//   3. Leave-one-out over all heads with and without reuse of lower-layer activations.
#include <CLI/CLI.hpp>

#include <chrono>
#include <optional>
#include <cstdio>
#include <filesystem>

#include "core/kernels/blas.h"
#include "core/kernels/runtime.h"
#include "core/io/checkpoint.h"
#include "core/base/errors.h"  // HP_CHECK
#include "core/base/log.h"
#include "core/text/tokenizer.h"
#include "eval/evaluator.h"
#include "prune/heads/criteria.h"
#include "prune/heads/curves.h"
#include "prune/heads/schedule.h"

using namespace hp;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What every part of the benchmark reads: the options, the model and the SST-2 data.
struct Bench {
  int rank_n = 512, attattr_n = 32, steps = 20, max_len = 128;
  std::string attattr_split = "dev", data_root;
  const core::TaskSpec* task = nullptr;
  std::optional<core::Bert> model;
  std::optional<core::Tokenizer> tok;
  std::vector<core::Example> train;
  core::EncodedDataset dev;
  core::PruneConfig opts;
  torch::Tensor keep;  // all heads

  // The first n examples of `split`, encoded.
  core::EncodedDataset first(const std::vector<core::Example>& split, int n) const {
    HP_CHECK(n <= static_cast<int>(split.size()), "only " << split.size() << " examples in the split");
    return core::encode_examples(*tok, std::vector<core::Example>(split.begin(), split.begin() + n), max_len);
  }
};

// Taylor importance on rank_n train examples and the 11-point curve on dev.
void bench_taylor(const Bench& b) {
  auto data = b.first(b.train, b.rank_n);
  auto rank = prune::make_rank_data(*b.task, data, 32, b.tok->pad_id());
  prune::CurveInputs ci;
  ci.model = &*b.model;
  core::BatchOptions bo;
  bo.batch_size = 64;
  const auto batches = core::make_batches(b.dev, bo);
  const auto objective = prune::make_task_objective({b.task, &b.dev, &b.dev, &batches, &batches, "", nullptr});
  ci.objective = objective.get();
  ci.opts = &b.opts;
  ci.counts = prune::schedule_counts(b.opts.schedule, "percent", b.model->config().total_heads());
  const auto dir = std::filesystem::temp_directory_path() / "hp_prune_bench";
  std::filesystem::remove_all(dir);
  prune::RunStore store(dir.string(), "bench\n");
  const auto t0 = std::chrono::steady_clock::now();
  auto points = prune::run_curve(ci, prune::find_criterion("taylor"), 42, rank, store);
  const double total = seconds_since(t0);
  for (const auto& p : points)
    std::printf("taylor curve: %2d heads pruned: dev accuracy %.4f\n", p.pruned, p.metrics.at("accuracy"));
  std::printf("taylor (%d examples) + 11-point curve (872 dev): %.2f s\n", b.rank_n, total);
}

// Attention attribution with the lower layers reused and with full forward passes.
void bench_attattr(const Bench& b) {
  auto data = b.first(core::read_task(*b.task, b.data_root, b.attattr_split), b.attattr_n);
  long tokens = 0;
  for (const auto& ids : data.ids) tokens += static_cast<long>(ids.size());
  auto rank = prune::make_rank_data(*b.task, data, 32, b.tok->pad_id());
  prune::CriterionContext c;
  c.model = &*b.model, c.rank = &rank, c.keep = b.keep, c.opts = &b.opts;
  for (bool reuse : {true, false}) {
    c.reuse_lower_layers = reuse;
    const auto t0 = std::chrono::steady_clock::now();
    auto imp = prune::attattr_importance(c);
    const double s = seconds_since(t0);
    std::printf(
        "attattr %s: %d %s examples (%.1f tokens on average) x %d layers x %d steps: %.2f s (%.3f "
        "s/example), mean importance %.5f\n",
        reuse ? "batched, lower layers reused" : "batched, full forward passes", b.attattr_n, b.attattr_split.c_str(),
        static_cast<double>(tokens) / b.attattr_n, b.model->config().num_hidden_layers, b.steps, s, s / b.attattr_n,
        imp.mean().item<double>());
  }
}

// Leave-one-out with the lower layers reused and with full forward passes, and the speedup.
void bench_loo(const Bench& b) {
  auto data = b.first(b.train, b.rank_n);
  auto rank = prune::make_rank_data(*b.task, data, 64, b.tok->pad_id());
  prune::CriterionContext c;
  c.model = &*b.model, c.rank = &rank, c.keep = b.keep, c.opts = &b.opts;
  double times[2];
  for (bool reuse : {true, false}) {
    c.reuse_lower_layers = reuse;
    const auto t0 = std::chrono::steady_clock::now();
    prune::loo_importance(c);
    times[reuse ? 0 : 1] = seconds_since(t0);
    std::printf("leave-one-out over %d heads, %d examples, %s: %.2f s\n", b.model->config().total_heads(), b.rank_n,
                reuse ? "lower layers reused" : "full forward passes", times[reuse ? 0 : 1]);
  }
  std::printf("leave-one-out reuse speedup: %.2fx\n", times[1] / times[0]);
}

}  // namespace

int main(int argc, char** argv) {
  core::init_logging();
  core::ensure_fast_blas(argc, argv);
  CLI::App app{"pruning benchmarks: Taylor + curve, attention attribution, leave-one-out"};
  Bench b;
  std::string model_dir = "runs/sst2/finetune/best", root, only;
  int threads = 0;
  app.add_option("--model", model_dir, "fine-tuned SST-2 model folder");
  app.add_option("--data-root", root, "data root (default ../shared/data)");
  app.add_option("--rank-examples", b.rank_n, "first N SST-2 train examples for Taylor and leave-one-out");
  app.add_option("--attattr-examples", b.attattr_n, "first N examples of --attattr-split for attention attribution");
  app.add_option("--attattr-split", b.attattr_split, "SST-2 split for attention attribution (Hao's script: dev)");
  app.add_option("--steps", b.steps, "attention attribution Riemann steps");
  app.add_option("--max-seq-len", b.max_len, "truncation length");
  app.add_option("--threads", threads, "threads; 0 = all cores");
  app.add_option("--only", only, "run one part: taylor, attattr or loo");
  CLI11_PARSE(app, argc, argv);
  core::set_threads(threads);
  std::printf("%s\n", core::runtime_summary().c_str());

  b.task = &core::find_task("sst2");
  core::LoadOptions lo;
  lo.num_labels = 2;
  b.model.emplace(core::load_bert(model_dir, lo));
  b.tok.emplace(core::Tokenizer::from_model_dir(model_dir));
  b.data_root = core::resolve_data_root(root);
  b.train = core::read_task(*b.task, b.data_root, "train");
  b.dev = core::encode_examples(*b.tok, core::read_task(*b.task, b.data_root, "dev"), b.max_len);
  b.opts.latency = false;
  b.opts.attattr_steps = b.steps;
  b.keep = torch::ones({b.model->config().num_hidden_layers, b.model->config().max_heads()});
  if (only.empty() || only == "taylor") bench_taylor(b);
  if (only.empty() || only == "attattr") bench_attattr(b);
  if (only.empty() || only == "loo") bench_loo(b);
  return 0;
}
