// `prune train`: fine-tune a model folder on a GLUE task, optionally learning head gates (plain L0 or
// exactly N heads), keeping the best checkpoint in RUN_DIR/best. The loop itself: train/trainer.h.
#include <atomic>
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/batching.h"
#include "core/checkpoint.h"
#include "core/errors.h"  // ConfigError
#include "core/files.h"   // write_file_atomic
#include "core/log.h"
#include "prune/cli/commands.h"
#include "train/trainer.h"

namespace hp::cli {

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

}  // namespace

int run_train(const core::Config& cfg) {
  const core::TaskSpec& task = core::find_task(cfg.data.task);
  const std::string run_dir = cfg.train.resume.empty() ? cfg.run.out_dir : cfg.train.resume;
  // Validate before reading data: the head count comes from config.json alone.
  const core::BertConfig arch = core::read_bert_config(cfg.model.path + "/config.json");
  train::validate_train_config(cfg.train, cfg.gates, arch.num_hidden_layers * arch.max_heads());
  core::check_max_seq_len(arch, cfg.data.max_seq_len);

  const std::string root = core::resolve_data_root(cfg.data.root);
  auto train_examples = core::read_task(task, root, cfg.train.train_split);
  if (cfg.train.max_train_examples > 0 && static_cast<size_t>(cfg.train.max_train_examples) < train_examples.size())
    train_examples.resize(cfg.train.max_train_examples);
  auto eval_examples = core::read_task(task, root, cfg.train.eval_split);
  core::log_info("train", task.name + ": " + std::to_string(train_examples.size()) + " train / " +
                              std::to_string(eval_examples.size()) + " " + cfg.train.eval_split + " examples from " + root);

  core::LoadOptions load;
  load.num_labels = task.num_labels();
  load.seed = cfg.run.seed;
  core::LoadReport report;
  core::Bert model = core::load_bert(cfg.model.path, load, &report);
  if (report.classifier_initialized)
    core::log_info("train", cfg.model.path + " has no classifier for " + task.name +
                                ": starting from a fresh one (normal for a pretrained encoder)");
  const bool use_teacher = cfg.gates.distill && cfg.gates.target_heads > 0 && cfg.gates.finetune_after;
  if (cfg.gates.distill && !use_teacher)
    core::log_warn("train", "gates.distill is on but only the fixed-heads fine-tuning of target mode distils; "
                            "set gates.target_heads and gates.finetune_after to use it");
  std::optional<core::Bert> teacher;
  if (use_teacher) {
    teacher.emplace(core::load_bert(cfg.model.path, load));  // the unpruned model as the run starts
    if (report.classifier_initialized)
      core::log_warn("train", "the distillation teacher has a fresh (untrained) classifier; distil from a model "
                              "fine-tuned on " + task.name + " instead");
  }

  auto tok = core::WordPieceTokenizer::from_model_dir(cfg.model.path);
  auto train_data = core::encode_examples(tok, train_examples, cfg.data.max_seq_len);
  auto eval_data = core::encode_examples(tok, eval_examples, cfg.data.max_seq_len);

  // The config a resume must repeat: everything but where the run lives and the resume flag itself.
  core::Config fixed = cfg;
  fixed.train.resume.clear();
  fixed.run.out_dir.clear();
  core::write_file_atomic(run_dir + "/config.resolved.yaml", core::dump_yaml(cfg));

  train::TrainData data;
  data.task = &task;
  data.train = &train_data;
  data.eval = &eval_data;
  data.pad_id = tok.pad_id();
  data.eval_batch_size = cfg.eval.batch_size;
  train::TrainOptions opts;
  opts.run_dir = run_dir;
  opts.config_yaml = core::dump_yaml(fixed);
  opts.tokenizer_dir = cfg.model.path;
  opts.resume = !cfg.train.resume.empty();
  opts.teacher = teacher ? &*teacher : nullptr;
  opts.stop = &g_stop;
  auto previous_int = std::signal(SIGINT, on_signal);
  auto previous_term = std::signal(SIGTERM, on_signal);
  train::TrainResult r = train::train_model(cfg.train, cfg.gates, cfg.run, model, data, opts);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  if (r.interrupted) {
    std::cerr << "interrupted at step " << r.steps << "; state saved in " << run_dir
              << "/state; continue with: prune train --config <same> --resume " << run_dir << "\n";
    return 130;  // 128 + SIGINT
  }

  nlohmann::json j;
  j["task"] = task.name;
  j["split"] = cfg.train.eval_split;
  j["metric"] = r.metric;
  j["best_metric"] = r.best_metric;
  j["best_step"] = r.best_step;
  j["final_metrics"] = r.final_metrics;
  j["steps"] = r.steps;
  j["heads_kept"] = r.heads_kept;
  j["heads_total"] = r.heads_total;
  j["mask"] = core::format_head_mask(r.final_keep);
  j["train_seconds"] = r.train_seconds;
  j["steps_per_s"] = r.steps_per_s;
  j["examples_per_s"] = r.examples_per_s;
  core::write_file_atomic(run_dir + "/train_result.json", j.dump(2) + "\n");

  std::cout << task.name << " " << cfg.train.eval_split << ": best " << r.metric << " " << r.best_metric << " at step "
            << r.best_step << "; best/ re-evaluated with " << r.heads_kept << "/" << r.heads_total << " heads:";
  for (const auto& [name, value] : r.final_metrics) std::cout << "  " << name << " " << value;
  std::cout << "  |  " << r.steps << " steps, " << r.steps_per_s << " steps/s, " << r.examples_per_s
            << " examples/s\n";
  core::log_info("train", "wrote " + run_dir + "/{best/, metrics.csv, run.h5, config.resolved.yaml, train_result.json" +
                              (cfg.gates.enabled || cfg.gates.target_heads > 0 ? ", head_mask.txt}" : "}"));
  return 0;
}

}  // namespace hp::cli
