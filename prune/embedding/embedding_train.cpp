// A sentence-embedding model trained towards the teacher's embeddings (see prune/embedding/embedding_train.h).
#include "prune/embedding/embedding_train.h"

#include <filesystem>

#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "core/io/checkpoint.h"
#include "prune/data/distill_data.h"
#include "prune/embedding/embedding_finish.h"  // log_step
#include "prune/export/slim.h"
#include "prune/stages/best_step.h"
#include "prune/stages/stages.h"  // recovery_config

namespace hp::prune {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The gates' config: the budget on heads, FFN neurons and sublayers (the export keeps every layer and the hidden
// width), the fixed phase as long as the recovery at that budget.
core::Config gates_config(const core::Config& cfg, double fraction) {
  core::Config c = cfg;
  c.gates.target_flops = fraction, c.gates.target_params = 0, c.gates.target_heads = 0;
  c.gates.layer_gates = false, c.gates.hidden_gates = false;
  c.gates.finetune_after = cfg.prune.recover_steps > 0;
  return c;
}

// `student` (trained in place) trained by `c` towards the teacher in `dir` (finetune_steps: the gates' fixed phase)
// through the embedding objective; false when stopped.
bool train_towards_teacher(const EmbedRun& r, const core::Config& c, core::Bert student, const std::string& dir,
                           long finetune_steps) {
  TrainRequest req;
  req.cfg = &c, req.run_dir = dir, req.start = &student, req.finetune_steps = finetune_steps, req.stop = r.stop;
  return r.objective->train(req);
}

}  // namespace

std::optional<core::Bert> recovered_model(const EmbedRun& r, const core::Bert& tuned, const core::PruneConfig& p,
                                          double target, const std::string& dir) {
  const long steps = budget_recover_steps(p, target, false);
  if (steps <= 0) return std::nullopt;
  if (!fs::exists(dir + "/train_result.json")) {
    log_step(4, "recovery: " + std::to_string(steps) + " steps of distillation to the teacher's embeddings" +
                    (p.distill_hidden > 0
                         ? " and, weighted " + core::format_number("%g", p.distill_hidden) + ", its layers' outputs"
                         : "") +
                    ", in " + dir);
    core::Config c = recovery_config(*r.cfg, static_cast<int>(steps), true);
    c.prune = p;
    // The tuned model is scored as it was: the trainer gives the copy's tensors requires_grad.
    if (!train_towards_teacher(r, c, copy_model(tuned), dir, 0)) return std::nullopt;
  }
  return core::load_bert(dir + "/best", core::LoadOptions{});
}

std::optional<GatedEmbedding> gated_embedding(const EmbedRun& r, double fraction, const std::string& dir) {
  const core::Config c = gates_config(*r.cfg, fraction);
  const std::string result_file = dir + "/train_result.json";
  if (!fs::exists(result_file)) {
    const long fixed = c.gates.finetune_after ? budget_recover_steps(c.prune, fraction, false) : 0;
    core::log_info("prune", "gates: Hard-Concrete gates on heads, FFN neurons and sublayers to " +
                                core::format_number("%.0f%%", 100 * fraction) +
                                " of the encoder's FLOPs, towards the teacher's embeddings" +
                                (c.gates.distill_hidden > 0 ? " and its layers" : "") + ", then " +
                                std::to_string(fixed) + " steps with the structure fixed, in " + dir);
    if (!train_towards_teacher(r, c, copy_model(r.teacher->model), dir, fixed)) return std::nullopt;
  }
  const json res = json::parse(core::read_file(result_file));
  const core::BertConfig& arch = r.teacher->model.config();
  const core::StructureMask keep =
      core::parse_mask(res.at("mask").get<std::string>(), arch.num_hidden_layers, arch.max_heads(),
                       arch.intermediate_size, result_file + "'s mask", arch.hidden_size);
  return GatedEmbedding{slim_model(core::load_bert(dir + "/best", core::LoadOptions{}), keep), keep,
                        res.at("budget").at("kept").get<double>(), res.value("train_seconds", 0.0), res};
}

}  // namespace hp::prune
