// Fine-tuning throughput of `prune train`'s loop (train/trainer.h) on SST-2 with the real model, the
// same recipe as bench/train_bench.py runs in HF transformers: batch 32, max_seq_len 64, AdamW,
// linear schedule, clipping 1.0, dropout on. Prints examples/s over the training steps only
// (evaluation excluded). --precision auto|fp32|bf16 and --group-by-length true|false as `prune train` takes them (auto: the
// dispatch probe's choice). Run the two back to back on an idle machine and compare.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "core/data/batching.h"
#include "core/kernels/blas.h"
#include "core/kernels/dispatch_probe.h"
#include "core/kernels/runtime.h"
#include "core/io/checkpoint.h"
#include "core/base/config.h"
#include "core/base/errors.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  try {
    hp::core::ensure_fast_blas(argc, argv);
    hp::core::Config cfg;
    int steps = 60;
    CLI::App app{"train_bench: fine-tuning examples/s of the real model on SST-2"};
    app.add_option("--steps", steps, "optimizer steps to time");
    app.add_option("--model", cfg.model.path, "model folder");
    app.add_option("--threads", cfg.run.threads, "threads; 0 = all cores");
    app.add_option("--precision", cfg.train.precision, "auto (the dispatch probe's choice), fp32 or bf16");
    app.add_option("--group-by-length", cfg.train.group_by_length, "true/false: length-grouped batches (train.group_by_length)");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(cfg.run.threads);
    std::printf("runtime: %s\n", hp::core::runtime_summary().c_str());
    if (cfg.train.precision == "auto") {
      std::string why;
      cfg.train.precision = hp::core::auto_training_precision(hp::core::apply_measured_dispatch(), &why);
      std::printf("train.precision auto: %s\n", why.c_str());
    }
    cfg.data.max_seq_len = 64;
    cfg.train.max_steps = steps;
    cfg.train.batch_size = 32;
    cfg.run.out_dir = (std::filesystem::temp_directory_path() / "hp_train_bench").string();
    std::filesystem::remove_all(cfg.run.out_dir);

    const auto& task = hp::core::find_task("sst2");
    std::string root = hp::core::resolve_data_root("");
    auto train_ex = hp::core::read_task(task, root, "train");
    train_ex.resize(static_cast<size_t>(steps) * cfg.train.batch_size);
    auto dev_ex = hp::core::read_task(task, root, "dev");
    dev_ex.resize(64);  // the loop always ends with an evaluation; keep it small
    hp::core::LoadOptions load;
    load.num_labels = 2;
    auto model = hp::core::load_bert(cfg.model.path, load);
    auto tok = hp::core::Tokenizer::from_model_dir(cfg.model.path);
    auto train = hp::core::encode_examples(tok, train_ex, cfg.data.max_seq_len);
    auto dev = hp::core::encode_examples(tok, dev_ex, cfg.data.max_seq_len);
    hp::train::TrainData data;
    data.task = &task;
    data.train = &train;
    data.eval = &dev;
    data.pad_id = tok.pad_id();
    hp::train::TrainOptions opts;
    opts.run_dir = cfg.run.out_dir;
    auto r = hp::train::train_model(cfg.train, cfg.gates, cfg.run, model, data, opts);
    std::printf(
        "train headprune sst2 B=%d max_seq_len=%d threads=%d %s%s: %ld steps in %.2f s, %.1f examples/s\n",
        cfg.train.batch_size, cfg.data.max_seq_len, hp::core::thread_count(), cfg.train.precision.c_str(),
        cfg.train.group_by_length ? " length-grouped" : "", r.steps, r.train_seconds, r.examples_per_s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
