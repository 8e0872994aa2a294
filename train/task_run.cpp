// A training run from a Config (see train/task_run.h).
#include "train/task_run.h"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <filesystem>
#include <limits>
#include <optional>

#include "core/data/batching.h"
#include "core/data/file_task.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/kernels/device.h"  // parse_device
#include "core/base/files.h"  // write_file_atomic, read_file
#include "core/base/log.h"

namespace hp::train {

namespace {

// The train and eval splits of the task, as read.
struct TaskExamples {
  std::vector<core::Example> train, eval;
};

TaskExamples read_examples(const core::Config& cfg, const TaskRun& run, const core::TaskSpec& task) {
  const std::string root = run.data_root.empty() ? core::data_root_for(cfg.data) : run.data_root;
  auto train_examples = core::read_task(task, root, cfg.train.train_split);
  if (cfg.train.max_train_examples > 0 && static_cast<size_t>(cfg.train.max_train_examples) < train_examples.size())
    train_examples.resize(cfg.train.max_train_examples);
  auto eval_examples = core::read_task(task, root, cfg.train.eval_split);
  core::log_info("train", task.name + ": " + std::to_string(train_examples.size()) + " train / " +
                              std::to_string(eval_examples.size()) + " " + cfg.train.eval_split + " examples from " +
                              core::read_from(task, root, cfg.train.train_split));
  return {std::move(train_examples), std::move(eval_examples)};
}

// The distillation teacher (the unpruned model), when gates.distill applies to this run.
std::optional<core::Bert> load_teacher(const core::Config& cfg, const TaskRun& run, const core::TaskSpec& task,
                                       const core::LoadOptions& load) {
  const bool recovery = !run.fixed_keep.empty() || !run.teacher_dir.empty();  // a pruned model's fine-tuning
  const bool budget = cfg.gates.target_flops > 0 || cfg.gates.target_params > 0;  // distils in both phases
  const bool use_teacher =
      cfg.gates.distill && (recovery || budget || (cfg.gates.target_heads > 0 && cfg.gates.finetune_after));
  if (cfg.gates.distill && !use_teacher)
    core::log_warn("train",
                   "gates.distill is on but only the fixed-heads fine-tuning of target mode (and a FLOPs or parameter "
                   "target) distils; set gates.target_heads and gates.finetune_after, or gates.target_flops, to use it");
  if (!use_teacher) return std::nullopt;
  core::LoadReport teacher_report;
  const std::string& from = run.teacher_dir.empty() ? run.model_dir : run.teacher_dir;
  std::optional<core::Bert> teacher(core::load_bert(from, load, &teacher_report));  // the unpruned model
  if (teacher_report.classifier_initialized)
    core::log_warn("train",
                   "the distillation teacher has a fresh (untrained) classifier; distil from a model "
                   "fine-tuned on " +
                       task.name + " instead");
  return teacher;
}

void write_result(const core::Config& cfg, const TaskRun& run, const core::TaskSpec& task, const TrainResult& r) {
  nlohmann::json j = result_json(r);
  j["task"] = task.name;
  j["split"] = cfg.train.eval_split;
  core::write_file_atomic(run.run_dir + "/train_result.json", j.dump(2) + "\n");
}

}  // namespace

TrainResult train_task(const core::Config& cfg, const TaskRun& run) {
  const core::TaskSpec& task = run.task ? *run.task : core::task_of(cfg.data, cfg.model.path);
  // Validate before reading data: the head count comes from config.json alone.
  const core::BertConfig arch = core::read_bert_config(run.model_dir + "/config.json");
  validate_train_config(cfg.train, cfg.gates, arch.num_hidden_layers * arch.max_heads());
  check_bf16_training(cfg.train.precision, core::parse_device(cfg.run.device));
  core::check_max_seq_len(arch, cfg.data.max_seq_len);
  if (cfg.gates.target_flops > 0 || cfg.gates.target_params > 0) check_budget_model(cfg.gates, arch);
  const TaskExamples examples = read_examples(cfg, run, task);

  core::LoadOptions load = core::task_load_options(task, cfg.run.seed);
  core::LoadReport report;
  core::Bert model = core::load_bert(run.model_dir, load, &report);
  if (report.classifier_initialized)
    core::log_info("train", run.model_dir + " has no classifier for " + task.name +
                                ": starting from a fresh one (normal for a pretrained encoder)");
  std::optional<core::Bert> teacher = load_teacher(cfg, run, task, load);

  auto tok = core::Tokenizer::from_model_dir(run.model_dir);
  auto train_data = core::encode_examples(tok, examples.train, cfg.data.max_seq_len);
  auto eval_data = core::encode_examples(tok, examples.eval, cfg.data.max_seq_len);
  core::EncodedDataset distill_rows;
  if (run.distill_rows && teacher) {
    distill_rows = core::encode_examples(tok, *run.distill_rows, cfg.data.max_seq_len);
    std::fill(distill_rows.labels.begin(), distill_rows.labels.end(), std::numeric_limits<float>::quiet_NaN());
    distill_rows.has_labels = false;
  }

  core::write_file_atomic(run.run_dir + "/config.resolved.yaml", core::dump_yaml(cfg));

  TrainData data;
  data.task = &task;
  data.train = &train_data;
  data.eval = &eval_data;
  data.pad_id = tok.pad_id();
  data.eval_batch_size = cfg.eval.batch_size;
  data.distill_rows = &distill_rows;
  TrainOptions opts;
  opts.run_dir = run.run_dir;
  opts.config_yaml = core::resume_yaml(cfg);
  opts.tokenizer_dir = run.model_dir;
  opts.resume = run.resume;
  opts.teacher = teacher ? &*teacher : nullptr;
  opts.fixed_keep = run.fixed_keep;
  opts.finetune_steps = run.finetune_steps;
  opts.stop = run.stop;
  TrainResult r = train_model(cfg.train, cfg.gates, cfg.run, model, data, opts);
  if (!r.interrupted) write_result(cfg, run, task, r);
  return r;
}

nlohmann::json result_json(const TrainResult& r) {
  nlohmann::json j;
  j["metric"] = r.metric;
  j["best_metric"] = r.best_metric;
  j["best_step"] = r.best_step;
  j["final_metrics"] = r.final_metrics;
  j["steps"] = r.steps;
  j["steps_per_epoch"] = r.steps_per_epoch;
  j["heads_kept"] = r.heads_kept;
  j["heads_total"] = r.heads_total;
  j["mask"] = core::format_mask({r.final_keep, r.final_neurons, r.final_layers, r.final_hidden});
  if (!r.budget_unit.empty()) {
    int neurons = 0;
    for (const auto& row : r.final_neurons) neurons += static_cast<int>(std::count(row.begin(), row.end(), true));
    j["neurons_kept"] = neurons;
    j["budget"] = {{"unit", r.budget_unit},
                   {"target", r.budget_target},
                   {"kept", r.budget_kept},
                   {"head_cost", r.unit_costs.head},
                   {"neuron_cost", r.unit_costs.neuron}};
  }
  j["train_seconds"] = r.train_seconds;
  j["steps_per_s"] = r.steps_per_s;
  j["examples_per_s"] = r.examples_per_s;
  return j;
}

namespace {

// A field of RUN_DIR/train_result.json, `none` when the run has no result.
template <class T>
T result_field(const std::string& run_dir, const char* key, T none) {
  const std::string file = run_dir + "/train_result.json";
  if (!std::filesystem::exists(file)) return none;
  return nlohmann::json::parse(core::read_file(file)).value(key, none);
}

}  // namespace

double train_seconds(const std::string& run_dir) { return result_field(run_dir, "train_seconds", 0.0); }

long train_steps(const std::string& run_dir) { return result_field(run_dir, "steps", 0L); }

}  // namespace hp::train
