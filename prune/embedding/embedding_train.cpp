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
#include "train/task_run.h"  // result_json
#include "train/trainer.h"

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

// What picks the checkpoint: the mean cosine of the masked model's embeddings of the selection pairs' sentences to
// the teacher's (as the search's steps are chosen), with their cosine Spearman beside it.
train::Objective objective(const EmbedRun& r, const TeacherEmbeddings& teacher) {
  train::Objective o;
  o.metric = "select_cosine_to_teacher";
  const train::Pooling pooling = r.pooling;
  o.loss = [pooling](const core::EncoderOutput& student, const core::EncoderOutput& t, const core::EncoderInput& in) {
    return train::embedding_distill_loss(train::pooled(student, in, pooling), train::pooled(t, in, pooling));
  };
  o.evaluate = [&r, select = teacher.select](const core::Bert& model, const eval::Masks& masks) {
    const eval::SentenceEncoder enc{r.teacher->layout, model, r.teacher->tokenizer};
    const eval::StsResult s = eval::evaluate_sts(enc, r.select_pairs, r.cfg->eval.batch_size, 0, masks);
    return std::map<std::string, double>{
        {"select_cosine_to_teacher", eval::paired_cosine(s.embeddings, select).mean().item<double>()},
        {"select_spearman", 100 * s.metrics.at("cosine_spearman")}};
  };
  return o;
}

// `student` trained by `c` towards the teacher in `dir` (finetune_steps: the gates' fixed phase), its result in
// DIR/train_result.json; false when stopped.
bool train_towards_teacher(const EmbedRun& r, const TeacherEmbeddings& teacher, const core::Config& c,
                           core::Bert student, const std::string& dir, long finetune_steps) {
  // The evaluation sentences give a budget's mean length (FLOPs are counted at it); the objective picks the step.
  const core::EncodedDataset eval_singles = eval::encode_sentences(*r.teacher, single_sentences(r.eval_pairs), 0);
  const train::Objective o = objective(r, teacher);
  train::TrainData data;
  data.task = &core::find_task(c.data.task);
  data.train = &r.sentences, data.eval = &eval_singles, data.objective = &o;
  data.pad_id = r.teacher->tokenizer.pad_id(), data.eval_batch_size = c.eval.batch_size;
  train::TrainOptions opts;
  opts.run_dir = dir, opts.config_yaml = core::resume_yaml(c), opts.resume = fs::exists(dir + "/state");
  opts.teacher = &r.teacher->model, opts.finetune_steps = finetune_steps, opts.stop = r.stop;
  opts.tokenizer_dir = r.cfg->model.path + "/" + r.teacher->layout.transformer_dir;
  const train::TrainResult t = train::train_model(c.train, c.gates, c.run, student, data, opts);
  if (t.interrupted) return false;
  core::write_file_atomic(dir + "/train_result.json", train::result_json(t).dump(2) + "\n");
  return true;
}

}  // namespace

std::optional<core::Bert> recovered_model(const EmbedRun& r, const TeacherEmbeddings& teacher, const core::Bert& tuned,
                                          const core::PruneConfig& p, double target, const std::string& dir) {
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
    if (!train_towards_teacher(r, teacher, c, copy_model(tuned), dir, 0)) return std::nullopt;
  }
  return core::load_bert(dir + "/best", core::LoadOptions{});
}

std::optional<GatedEmbedding> gated_embedding(const EmbedRun& r, const TeacherEmbeddings& teacher, double fraction,
                                              const std::string& dir) {
  const core::Config c = gates_config(*r.cfg, fraction);
  const std::string result_file = dir + "/train_result.json";
  if (!fs::exists(result_file)) {
    const long fixed = c.gates.finetune_after ? budget_recover_steps(c.prune, fraction, false) : 0;
    core::log_info("prune", "gates: Hard-Concrete gates on heads, FFN neurons and sublayers to " +
                                core::format_number("%.0f%%", 100 * fraction) +
                                " of the encoder's FLOPs, towards the teacher's embeddings" +
                                (c.gates.distill_hidden > 0 ? " and its layers" : "") + ", then " +
                                std::to_string(fixed) + " steps with the structure fixed, in " + dir);
    if (!train_towards_teacher(r, teacher, c, copy_model(r.teacher->model), dir, fixed)) return std::nullopt;
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
