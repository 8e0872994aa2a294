// `prune export`: re-writes a model folder as a Hugging Face BertForSequenceClassification checkpoint
// (config.json, model.safetensors, tokenizer files) plus model.h5 holding the same tensors.
// Slimmed exports after pruning reuse the same writer (core/io/checkpoint.h save_bert). --dense writes a
// slimmed model at its original shapes with the removed heads zeroed (prune/slim.h dense_model).
#include "core/io/checkpoint.h"
#include "core/base/errors.h"
#include "core/base/log.h"
#include "prune/onnx.h"
#include "prune/slim.h"
#include "cli/commands.h"

namespace hp::cli {

int run_export(const core::Config& cfg) {
  if (cfg.export_.out.empty()) throw ConfigError("export.out is empty; pass --to DIR");
  core::LoadReport report;
  core::LoadOptions load;
  load.seed = cfg.run.seed;
  core::Bert model = core::load_bert(cfg.model.path, load, &report);
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
  if (cfg.export_.onnx) prune::export_onnx(model, cfg.export_.out);
  core::log_info("export", "wrote " + cfg.export_.out + (cfg.export_.hdf5 ? " (with model.h5)" : ""));
  return 0;
}

}  // namespace hp::cli
