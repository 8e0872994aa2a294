// The stages of the pruning run (prune/run/pipeline.h lists them) and the context they share: stage 1
// resolves the config, task, data, architecture and run folder once; stage 2 adds the fine-tuned model
// and the encoded data; later stages read them and return what the summary needs.
// prune/stages/stages_curves.cpp: stages 1-4; prune/stages/stages_final.cpp: stages 5-8; prune/stages/summary.h: stage 9.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/model/bert.h"
#include "core/model/bert_config.h"
#include "core/model/head_mask.h"
#include "core/text/tokenizer.h"
#include "prune/heads/criteria.h"
#include "prune/heads/curves.h"
#include "prune/objective/objective.h"
#include "prune/search/latency_table.h"
#include "prune/record/run_store.h"
#include "prune/stages/summary.h"

namespace hp::prune {

inline constexpr int kStages = 9;
// Where `--method gates` trains its gates, under the run folder.
inline constexpr const char* kGatesDir = "gates";

// Logs "stage N/9 NAME: what" under the prune tag.
void log_stage(int number, const std::string& name, const std::string& what);

struct RunContext;
// A training run of the pruning run in RUN_DIR/<sub> (resumed when its state is there), starting from the
// model in `from`, on the task and data resolved in stage 1; `fixed_keep` fixes the heads (recovery), or
// `teacher_dir` names the unpruned model a slimmed one distils from (recovery_config's gates.distill). False when
// stopped.
bool train_in(const RunContext& ctx, const core::Config& cfg, const std::string& sub, const std::string& from,
              const core::HeadSet& fixed_keep = {}, long finetune_steps = 0, const std::string& teacher_dir = "");
// Budget gates (`gates_cfg`: gates_budget_config's) trained in RUN_DIR/<sub> unless its train_result.json is there,
// logged under stage `stage` `name`: their fixed-structure fine-tuning is the recovery every budget candidate gets
// (budget_recover_steps at the gates' target), not gates.finetune_epochs. False when stopped.
bool train_budget_gates(const RunContext& ctx, const core::Config& gates_cfg, const std::string& sub, int stage,
                        const std::string& name);
// Where the frontier trains the gates at `percent` of the FLOPs, under the run folder.
std::string frontier_gates_dir(long percent);

// The sequence length models are timed at (curve points, the latency budget, the frontier, stage 8):
// prune.latency_seq, or data.max_seq_len when that is 0.
long latency_seq(const core::Config& cfg);

// The first `n` (0 = all) of a seeded shuffle of `all`: the ranking examples of a seed, the search sample.
std::vector<core::Example> sample_examples(std::vector<core::Example> all, int n, int seed);

struct RunContext {
  RunContext() = default;
  RunContext(const RunContext&) = delete;  // the curve inputs point into it
  RunContext& operator=(const RunContext&) = delete;

  // Stage 1, prepare: resolved once, read by every stage.
  const core::Config* cfg = nullptr;  // validated: `resolved`, or after the frontier its choice's config
  core::Config resolved;  // the user's config with the selection slice applied (prune/data/selection.h)
  std::string select_split;  // where choices are made, e.g. "train[-1000:]"
  std::vector<core::Example> select_examples;  // its rows (empty when the task has no such split)
  const core::TaskSpec* task = nullptr;
  core::BertConfig arch;  // model.path's config.json
  int total_heads = 0;
  std::string data_root;  // data.root resolved
  std::vector<core::Example> eval_examples;  // prune.eval_split
  std::vector<core::Example> rank_examples;  // prune.rank_split, all rows
  // prune.distill_tasks' rows, which every distilled training of the run adds for the teacher to label
  // (prune/data/distill_data.h distill_rows); empty: none.
  std::vector<core::Example> distill_rows;
  core::LoadOptions load;  // the task's labels, run.seed
  std::shared_ptr<RunStore> store;  // the claimed run folder
  std::optional<LatencyTable> latency_table;  // with a latency budget (prune/stages/budget.h)
  const std::atomic<bool>* stop = nullptr;  // Ctrl-C or a rank's stop: return kInterruptedExit after the current unit
  // A --max-drop run's choice: stage 7 also writes model.onnx, and model.int8.onnx when int8 was chosen.
  bool export_onnx = false;
  // Stage 8 times the unpruned model at this precision (unset: run.precision, as the slimmed one): after the
  // frontier, fp32, its baseline, so that the speedup printed is the one the frontier chose by.
  std::optional<core::Precision> speed_baseline;

  // Stage 2, fine-tune: the model every later stage starts from, and the data encoded for it.
  std::string model_dir;
  std::optional<core::Bert> model;
  std::optional<core::Bert> device_model;  // model on run.device (a GPU) for the criteria; unset on the CPU
  std::optional<core::Tokenizer> tok;
  core::EncodedDataset eval_data;
  std::vector<core::Batch> eval_batches;
  core::EncodedDataset select_data;  // select_examples encoded, and batched as the evaluation split is
  std::vector<core::Batch> select_batches;
  // The task's (prune/objective/objective.h), made in stage 1: it trains from then on and scores eval_data and
  // select_data once stage 2 encoded them.
  std::shared_ptr<Objective> objective;
  std::vector<core::EncodedDataset> rank_sets;  // one per seed
  std::vector<RankData> ranks;  // batches of rank_sets
  CurveInputs curves;  // model, data, schedule for prune/heads/curves.h
  // With a FLOPs or parameter budget (prune/stages/budget.h): the search sample of the rank split.
  core::EncodedDataset search_set;
  RankData search;
};

// The unpruned model at fp32: the reference the final model and every frontier speedup are read against.
inline core::Bert fp32_base(const RunContext& ctx) {
  core::Bert base = *ctx.model;
  base.set_precision(core::Precision::kFp32);
  return base;
}

// Hard-Concrete gates on heads, FFN neurons and sublayers (CoFi) to a FLOPs or parameter budget: `cfg` with the
// gates' targets set, distilling from the unpruned model when recovery would (in place of stage 6's recovery);
// with prune.recover_steps 0 no fine-tuning follows the gates (as no recovery follows the search).
core::Config gates_budget_config(const core::Config& cfg, double target_flops, double target_params);
// A gated run's kept heads and FFN neurons, from its train_result.json.
core::StructureMask gated_mask(const RunContext& ctx, const nlohmann::json& train_result);

// Stage 1, after run_pruning validated the config (prune/run/validate.h): reads both splits (a task without data
// fails with nothing written), then claims the run folder.
void prepare(RunContext& ctx, const core::Config& cfg, const std::atomic<bool>* stop);

// Stage 2. Fine-tunes when model.path has no classifier for the task (or reuses RUN_DIR/finetune),
// then loads that model and encodes the data. False when stopped.
bool fine_tune(RunContext& ctx);

// Stage 3. Each criterion's importance [L, H] on the unpruned model, first seed (all seeds are scored
// and kept in the store). Empty when stopped.
std::optional<std::map<std::string, torch::Tensor>> score(RunContext& ctx);

// Stage 4. The curves of every criterion and seed, their aggregates and report files. Empty when stopped.
std::optional<CurvesSummary> curves(RunContext& ctx, const std::map<std::string, torch::Tensor>& importance);

// prune.method "best": the criterion with the highest mean metric over the schedule, random excluded beside
// others; when random is the only criterion scored, random itself, and `why` says so.
std::string best_criterion(const CurvesSummary& curves, std::string* why);

// Stage 5. The N heads kept, and the model they are kept in (the gated run's for gates). Empty when stopped.
std::optional<FinalChoice> choose_heads(RunContext& ctx, const CurvesSummary& curves);

// The training config of a recovery of `steps` fine-tuning steps (stage 6, and the budget curves' recovered
// line): no gates, evaluated twice, on the whole training split (the selection slice held out):
// train.max_train_examples and train.epochs, which shape fine-tuning and the gates, leave it alone. A recovery
// under a fixed head mask distils as prune.recover_distill says; a `slimmed` one trains on the labels alone
// (docs/budgets.md stage 6 gives the measurement that kept it so) unless prune.distill_hidden > 0: then it distils
// too, the logits (gates.distill_weight) and each layer's output at that weight. Either adds the layer term
// (gates.distill_hidden = prune.distill_hidden, matched at the same depth).
core::Config recovery_config(const core::Config& cfg, int steps, bool slimmed);

// Stage 6. Fine-tunes `choice.model_dir` with the heads fixed (prune.recover_steps; not after gates).
// False when stopped.
bool recover(RunContext& ctx, FinalChoice& choice);

// The masked model (recovered, all heads present, the pruned ones masked) and its slimmed export.
struct FinalModels {
  std::optional<core::Bert> masked, slim;
};

// Stage 7. Writes RUN_DIR/model as the objective exports it and checks it against the masked model (<= 1e-5) and, a
// Hugging Face folder, in transformers (<= 1e-4, when the Python reference is there); fills the export part of
// `final`.
FinalModels export_and_verify(RunContext& ctx, const FinalChoice& choice, FinalSummary& final);

// The slimmed against the unpruned model, each at the precision it is set to, side by side at batch 1 and 32 with
// `seq` tokens ("batch1", "batch32"): the one speed measurement of stage 8 and of the embedding run.
std::map<std::string, LatencySummary> time_against(const core::Bert& unpruned, const core::Bert& slim, long seq);

// Stage 8. Median latency of the unpruned and the slimmed model at batch 1 and 32 with the curves' latency_seq tokens
// (rank 0 alone).
std::map<std::string, LatencySummary> measure_speed(const RunContext& ctx, const FinalModels& models);

}  // namespace hp::prune
