// `prune export`: re-writes a model folder as a Hugging Face BertForSequenceClassification checkpoint
// (config.json, model.safetensors, tokenizer files) plus model.h5 holding the same tensors.
// Slimmed exports after pruning reuse the same writer (core/io/checkpoint.h save_bert). --dense writes a
// slimmed model at its original shapes with the removed heads zeroed (prune/slim.h dense_model).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/base/files.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/data/task_options.h"
#include "core/io/checkpoint.h"
#include "core/model/head_mask.h"  // parse_mask
#include "core/base/errors.h"
#include "core/base/log.h"
#include "prune/onnx.h"
#include "prune/slim.h"
#include "cli/commands.h"

namespace hp::cli {

namespace {

// One metric map as "accuracy 0.8842, f1 0.8901".
std::string format_metrics(const std::map<std::string, double>& m) {
  std::string s;
  for (const auto& [name, value] : m) s += (s.empty() ? "" : ", ") + name + " " + std::to_string(value).substr(0, 6);
  return s.empty() ? "(no labels)" : s;
}

// model.int8.onnx checked on the task's evaluation split; its accuracy into int8.json and the model card.
void export_int8(const core::Config& cfg, const core::Bert& model) {
  const core::TaskSpec& task = core::find_task(cfg.data.task);
  const std::string root = core::resolve_data_root(cfg.data.root);
  auto examples = core::read_task(task, root, cfg.eval.split);
  if (cfg.eval.max_examples > 0 && static_cast<size_t>(cfg.eval.max_examples) < examples.size())
    examples.resize(cfg.eval.max_examples);
  core::check_max_seq_len(model.config(), cfg.data.max_seq_len);
  const auto tok = core::Tokenizer::from_model_dir(cfg.export_.out);
  const auto data = core::encode_examples(tok, examples, cfg.data.max_seq_len);
  core::BatchOptions bo;
  bo.batch_size = cfg.eval.batch_size;
  bo.pad_id = tok.pad_id();
  const auto check = prune::export_onnx_int8(model, cfg.export_.out, task, data, core::make_batches(data, bo));
  nlohmann::json j;
  j["task"] = task.name;
  j["split"] = cfg.eval.split;
  j["examples"] = check.examples;
  j["headprune_fp32"] = check.fp32;
  j["headprune_int8"] = check.int8;
  j["onnxruntime_int8"] = check.onnx_int8;
  j["same_predictions"] = check.agreement;
  j["max_abs_logit_diff"] = check.max_abs_logit_diff;
  j["tolerance"] = check.tolerance;
  core::write_file_atomic(cfg.export_.out + "/int8.json", j.dump(2) + "\n");
  // The model card's int8 section, replaced on a new export.
  const std::string card = cfg.export_.out + "/README.md", marker = "<!-- headprune int8 -->";
  std::string text = std::filesystem::exists(card) ? core::read_file(card) : std::string();
  if (const auto at = text.find(marker); at != std::string::npos) text.resize(at);
  text += marker + "\n## int8\n\n`model.int8.onnx` is `model.onnx` with headprune's int8 linears in standard ONNX " +
          "operators (weights int8 per output channel, activations uint8 per row, dynamic: no calibration, " +
          "MatMulInteger; the classifier float32), run by ONNX Runtime. On " + task.name + " " + cfg.eval.split +
          " (" + std::to_string(check.examples) +
          " examples):\n\n| model | metrics |\n|---|---|\n| float32 | " + format_metrics(check.fp32) +
          " |\n| headprune int8, dynamic (`--precision int8 --calibrate 0`) | " + format_metrics(check.int8) +
          " |\n| ONNX Runtime int8 (`model.int8.onnx`) | " + format_metrics(check.onnx_int8) + " |\n\n" +
          std::to_string(100 * check.agreement).substr(0, 5) +
          "% of the examples get the same prediction from both int8 models.\n";
  core::write_file_atomic(card, text);
}

}  // namespace

int run_export(const core::Config& cfg) {
  if (cfg.export_.out.empty()) throw ConfigError("export.out is empty; pass --to DIR");
  core::LoadReport report;
  core::LoadOptions load;
  load.seed = cfg.run.seed;
  core::Bert model = core::load_bert(cfg.model.path, load, &report);
  if (!cfg.export_.mask.empty()) {
    const core::BertConfig& arch = model.config();
    if (arch.slimmed())
      throw ConfigError("export.mask on " + cfg.model.path +
                        ", which is slimmed already (pruned_heads or intermediate_sizes in its config.json); pass the "
                        "unpruned model the mask was made for");
    const core::StructureMask keep = core::parse_mask(cfg.export_.mask, arch.num_hidden_layers, arch.max_heads(),
                                                      arch.intermediate_size, "export.mask");
    model = prune::slim_model(model, keep.heads, keep.neurons);
    core::log_info("export", "slimmed to " + std::to_string(model.config().total_heads()) + " heads and " +
                                 std::to_string(model.config().total_neurons()) + " FFN neurons (export.mask)");
  }
  if (cfg.export_.dense) {
    const int removed =
        model.config().num_hidden_layers * model.config().num_attention_heads - model.config().total_heads();
    if (removed == 0) core::log_warn("export", cfg.model.path + " has no removed heads; --dense writes it unchanged");
    model = prune::dense_model(model);
    core::log_info("export",
                   "dense: " + std::to_string(removed) + " removed heads written as zeros at the original shapes");
  }
  if (report.classifier_initialized)
    core::log_warn("export", cfg.model.path + " has no classifier; the export carries a fresh one (seed " +
                                 std::to_string(cfg.run.seed) + ")");
  core::save_bert(model, cfg.export_.out, cfg.model.path, cfg.export_.hdf5);
  if (cfg.export_.onnx || cfg.export_.int8) prune::export_onnx(model, cfg.export_.out);
  if (cfg.export_.int8) export_int8(cfg, model);
  core::log_info("export", "wrote " + cfg.export_.out + (cfg.export_.hdf5 ? " (with model.h5)" : ""));
  return 0;
}

}  // namespace hp::cli
