// SST-2 dev evaluation time with dynamic padding (length-sorted batches padded to their longest
// member, core/data/batching.h's default) vs fixed padding to max_seq_len, and a check that both give the
// same predictions (padding is masked, so they must). Exits 1 if they differ. Not a test.
#include <CLI/CLI.hpp>
#include <torch/types.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "core/data/batching.h"
#include "core/kernels/blas.h"
#include "core/kernels/runtime.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"
#include "eval/evaluator.h"

namespace {

struct Options {
  std::string model = "checkpoints/all-MiniLM-L6-v2";
  std::string task = "sst2";
  std::string split = "dev";
  std::string data_root;
  int batch = 32;
  int max_seq_len = 128;
  int reps = 3;
  int threads = 0;
};

// Runs the evaluation `reps` times and keeps the run with the median time.
hp::eval::EvalResult timed_eval(const hp::core::Bert& model, const hp::core::TaskSpec& task,
                                const hp::core::EncodedDataset& data, const std::vector<hp::core::Batch>& batches,
                                int reps) {
  std::vector<hp::eval::EvalResult> runs;
  for (int i = 0; i < reps; ++i) runs.push_back(hp::eval::evaluate(model, task, data, batches));
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.seconds < b.seconds; });
  return runs[runs.size() / 2];
}

void print(const char* label, const hp::eval::EvalResult& r, const hp::core::TaskSpec& task) {
  std::printf("eval %s %s: %.3f s, %.1f examples/s, %ld tokens computed (%ld real, %.0f%% padding)", label,
              task.name.c_str(), r.seconds, r.examples_per_s, r.padded_tokens, r.tokens,
              100.0 * (r.padded_tokens - r.tokens) / std::max(1L, r.padded_tokens));
  for (const auto& [name, value] : r.metrics) std::printf(", %s %.4f", name.c_str(), value);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    hp::core::ensure_fast_blas(argc, argv);
    Options o;
    CLI::App app{"eval_padding_bench: dynamic vs fixed padding on a GLUE split"};
    app.add_option("--model", o.model, "model folder");
    app.add_option("--task", o.task, "GLUE task name");
    app.add_option("--split", o.split, "split to evaluate");
    app.add_option("--data-root", o.data_root, "data root (default: $HEADPRUNE_DATA or ../shared/data)");
    app.add_option("--batch", o.batch, "batch size");
    app.add_option("--max-seq-len", o.max_seq_len, "truncation length and the fixed padding length");
    app.add_option("--reps", o.reps, "evaluations per setting (the median is reported)");
    app.add_option("--threads", o.threads, "intra-op threads; 0 = all cores");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(o.threads);
    std::printf("runtime: %s\n", hp::core::runtime_summary().c_str());

    const auto& task = hp::core::find_task(o.task);
    auto examples = hp::core::read_task(task, hp::core::resolve_data_root(o.data_root), o.split);
    const hp::core::LoadOptions load = hp::core::task_load_options(task, 42);
    hp::core::LoadReport report;
    auto model = hp::core::load_bert(o.model, load, &report);
    if (report.classifier_initialized)
      std::printf("note: %s has no classifier; a seeded random one is used (metrics are chance level)\n",
                  o.model.c_str());
    auto tok = hp::core::Tokenizer::from_model_dir(o.model);
    auto data = hp::core::encode_examples(tok, examples, o.max_seq_len);

    hp::core::BatchOptions dynamic_opts;
    dynamic_opts.batch_size = o.batch;
    dynamic_opts.pad_id = tok.pad_id();
    hp::core::BatchOptions fixed_opts = dynamic_opts;
    fixed_opts.pad_to = o.max_seq_len;
    fixed_opts.sort_by_length = false;
    auto dynamic_batches = hp::core::make_batches(data, dynamic_opts);
    auto fixed_batches = hp::core::make_batches(data, fixed_opts);

    // Warm-up: one batch of each shape family, so neither timing pays first-call costs.
    hp::eval::evaluate(model, task, data, {fixed_batches.front()});
    auto dyn = timed_eval(model, task, data, dynamic_batches, o.reps);
    auto fix = timed_eval(model, task, data, fixed_batches, o.reps);
    std::printf("examples %ld, batch %d, max_seq_len %d, reps %d\n", dyn.examples, o.batch, o.max_seq_len, o.reps);
    print("dynamic-padding+sort", dyn, task);
    print("fixed-padding", fix, task);
    std::printf("speedup dynamic/fixed: %.2fx time, %.2fx fewer tokens computed\n", fix.seconds / dyn.seconds,
                static_cast<double>(fix.padded_tokens) / dyn.padded_tokens);

    long differ = 0;
    for (size_t i = 0; i < dyn.predictions.size(); ++i) differ += dyn.predictions[i] != fix.predictions[i];
    double max_diff = (dyn.logits - fix.logits).abs().max().item<double>();
    std::printf("predictions identical: %s (%ld of %ld differ), max |logit difference| %.3g\n",
                differ == 0 ? "yes" : "NO", differ, dyn.examples, max_diff);
    return differ == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
