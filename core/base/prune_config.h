// The configuration section of the pruning run (`prune --config X.yaml`): one struct as in core/base/config.h, which
// includes this file and gathers every section into Config.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// What the run prunes for (prune.objective): a classifier's loss and metric on data.task, or a sentence-embedding
// model's cosine to its unpruned self.
enum class Objective { kTask, kEmbedding };

// How the run picks what to keep (prune.method): the criterion whose curve keeps the highest mean metric, one named
// criterion, Kwon et al.'s retraining-free search, or Hard-Concrete gates.
enum class MethodKind { kBest, kCriterion, kKwon, kGates };
struct Method {
  MethodKind kind = MethodKind::kBest;
  std::string criterion;  // kCriterion: its name (prune/heads/criteria.h checks it)
  bool operator==(MethodKind k) const { return kind == k; }
  bool operator!=(MethodKind k) const { return kind != k; }
};

// The text of each choice as YAML, --set and the summaries write it, and its parse (ConfigError naming `where`).
std::string choice_text(Objective o);
void parse_choice(const std::string& text, const std::string& where, Objective& out);
std::string choice_text(const Method& m);
void parse_choice(const std::string& text, const std::string& where, Method& out);

// The pruning run (`prune --config X.yaml`): importance criteria, iterative masking curves, reaching
// exactly target_heads heads, recovery fine-tuning, slimmed export. Criteria: prune/heads/criteria.h.
struct PruneConfig {
  std::vector<std::string> criteria = {"confidence", "lrp", "taylor", "attattr", "random", "loo"};
  std::string rank_split = "train";  // ranking data; kept apart from the evaluation split
  int rank_examples = 512;
  int rank_batch_size = 32;
  std::string eval_split = "dev";
  std::string select_split;  // "": held out of train.train_split (select_examples rows)
  int select_examples = 1000;
  std::vector<int> schedule = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  std::string schedule_unit = "percent";
  bool per_layer = false;
  int min_heads_per_layer = 0;
  bool iterative = false;
  int seeds = 1;
  int bootstrap = 1000;
  bool normalize_layers = true;
  bool taylor_token_level = false;
  int attattr_steps = 20;
  std::string attattr_riemann = "right";
  std::string attattr_target = "gold";
  int target_heads = 0;
  int target_layers = 0;
  std::string layer_choice = "fisher";
  double target_flops = 0;
  double target_params = 0;
  double target_latency = 0;
  double max_drop = 0;
  std::vector<std::string> frontier_precisions = {"fp32", "bf16", "int8"};
  std::vector<std::string> frontier_criteria = {"taylor"};
  std::vector<std::string> frontier_gates = {"auto"};
  std::vector<std::string> frontier_models = {};
  int frontier_refine = 1;
  bool control = true;
  double frontier_time = 0.3;
  int latency_batch = 32;
  int latency_seq = 0;
  std::vector<std::string> structures = {"heads", "neurons"};
  int search_examples = 2048;
  std::vector<int> budget_schedule = {100, 90, 80, 70, 60, 50, 40, 30};
  std::vector<int> hidden_widths = {};
  std::vector<int> layer_counts = {};
  bool rearrange = true;
  bool mask_tuning = true;
  double tuning_damping = 1e-2;
  int curve_recover_steps = -1;
  Method method;
  std::string gates_run;
  int recover_steps = 300;
  std::string recover_scale = "removed";
  Objective objective = Objective::kTask;
  std::vector<std::string> distill_tasks;
  double distill_hidden = 0;
  bool recover_distill = true;
  bool finetune = true;
  bool new_classifier = false;
  bool latency = true;
  bool verify = true;
  template <class V>
  void visit_fields(V& v) {  // in the order `prune config --doc` lists them
    visit_curve_fields(v);
    visit_budget_fields(v);
    visit_final_fields(v);
  }
  // The head criteria's curves and the exactly-N and whole-layer targets.
  template <class V>
  void visit_curve_fields(V& v) {
    v("criteria", criteria,
      "importance criteria to score and plot: confidence, lrp, taylor, attattr, random, loo, gates");
    v("rank_split", rank_split, "split the criteria score heads on (kept apart from eval_split)");
    v("rank_examples", rank_examples, "examples of rank_split used for scoring (first N of a seeded shuffle); 0 = all");
    v("rank_batch_size", rank_batch_size, "batch size while scoring");
    v("eval_split", eval_split, "split the masking curves and the final model are evaluated on");
    v("select_examples", select_examples,
      "rows held out of train.train_split (its last N whole rows in file order, at most a tenth of it, with every "
      "row that shares their text: train[holdout:N]) on which the run's choices are made: the best checkpoint of fine-tuning, recovery and gates, the best of a budget candidate's "
      "steps, the frontier's choice within max_drop; never trained or ranked on, never reported; 0 = off (choices "
      "on train.eval_split, as prune train makes them)");
    v("select_split", select_split,
      "a split (or slice, e.g. dev[:400]) to make those choices on instead of the held-out rows; never eval_split "
      "(choices made on the reported split are optimistic by construction); empty = the held-out rows");
    v("schedule", schedule, "heads pruned at each curve point, increasing: percentages of all heads, or counts");
    v("schedule_unit", schedule_unit, "unit of schedule: percent or count");
    v("per_layer", per_layer, "rank heads within each layer (prune evenly across layers) instead of globally");
    v("min_heads_per_layer", min_heads_per_layer, "never prune a layer below this many heads");
    v("iterative", iterative,
      "re-score the remaining heads after every curve step (Michel et al.); false = score once");
    v("seeds", seeds, "curves per criterion with seeds run.seed, run.seed+1, ... (mean and bootstrap 95% interval)");
    v("bootstrap", bootstrap, "bootstrap resamples of the evaluation examples for the 95% interval; 0 = off");
    v("normalize_layers", normalize_layers, "Taylor: divide each layer's importances by their L2 norm (Michel et al.)");
    v("taylor_token_level", taylor_token_level,
      "Taylor: |gradient| per token instead of per example (Michel's code variant)");
    v("attattr_steps", attattr_steps, "attention attribution: Riemann steps m of the integrated gradients");
    v("attattr_riemann", attattr_riemann, "attention attribution: right (Hao et al.'s formula), left or midpoint");
    v("attattr_target", attattr_target, "attention attribution: output attributed, gold label or predicted class");
    v("target_heads", target_heads, "--target-heads N: end with a slimmed model of exactly N heads; 0 = curves only");
    v("target_layers", target_layers,
      "--target-layers N: end with a slimmed model of exactly N whole layers, the others dropped (both sublayers) "
      "and the rest recovered by recover_steps of distillation (oBERT's and FastFormers' first step); 0 = off");
    v("layer_choice", layer_choice,
      "--target-layers: which layers stay: fisher (the smallest block-Fisher loss of removing a layer's heads and "
      "FFN neurons, Kwon et al.'s mask gradients, dropped first), top (drop the last layers) or alternate (drop "
      "every other layer from the top); all three are evaluated and reported, this one is exported");
  }
  // Budgets, the frontier and the retraining-free search.
  template <class V>
  void visit_budget_fields(V& v) {
    v("target_flops", target_flops,
      "--target-flops F: keep this fraction of the unpruned encoder's FLOPs (the structures of prune.structures, "
      "searched retraining-free as Kwon et al. 2022); 0 = off");
    v("target_params", target_params,
      "--target-params F: the same budget in encoder parameters (a fraction of the unpruned encoder's); 0 = off");
    v("target_latency", target_latency,
      "--target-latency MS: the whole model's forward time at latency_batch x latency_seq and run.precision on this "
      "machine, as the latency table measured into the run folder predicts it (heads and FFN neurons searched as for "
      "FLOPs); 0 = off");
    v("max_drop", max_drop,
      "--max-drop D: measure the compression frontier (the best head criterion at each schedule count, the budget "
      "search recovered at each budget_schedule point, each at every precision this CPU runs natively) and export "
      "the fastest candidate whose metric is within D points of the unpruned fp32 model's, timed at latency_batch "
      "x latency_seq; 0 = off");
    v("frontier_precisions", frontier_precisions,
      "--max-drop: the precisions each candidate is measured at, those of them this CPU runs natively; the unpruned "
      "model is measured at fp32 in any case (the baseline)");
    v("frontier_criteria", frontier_criteria,
      "--max-drop: the head criteria scored and curved, whose best ranking gives the heads-only candidates, in "
      "place of prune.criteria (the budget search, not a head ranking, makes the candidates that are chosen; "
      "scoring all six cost 6-20 min a run); [] = prune.criteria");
    v("frontier_gates", frontier_gates,
      "--max-drop: the FLOPs budgets (percent) at which Hard-Concrete gates on heads, FFN neurons and sublayers "
      "(CoFi) are trained as candidates, each fine-tuned with its structure fixed for the search's recovery "
      "(recover_steps, scaled as recover_scale says); [auto] = the cheapest budget_schedule point whose search "
      "candidate scored within 2 x max_drop of the unpruned model on the selection slice; [] = none");
    v("frontier_models", frontier_models,
      "--max-drop: model folders exported elsewhere (a prune run's model/, a GPU-trained export) measured as "
      "candidates beside the run's own, on the same splits and timings; [] = none");
    v("frontier_refine", frontier_refine,
      "--max-drop: rounds of refinement of the budget search where the choice is made: each searches, recovers and "
      "measures the midpoint (whole percent) between the deepest budget_schedule point with a candidate within "
      "max_drop on the selection slice and the next deeper one, until they are 2 percent apart; 0 = the schedule "
      "alone");
    v("control", control,
      "also train the unpruned model for as many steps as the longest-trained candidate (--max-drop) or the final "
      "model's own recovery or gates run (a target of its own), with the same recovery, and measure it beside them: "
      "the choice and every difference are taken against the better of it and the unpruned model on the selection "
      "slice, so a model is not credited for training longer; false = the unpruned model alone (said in the result "
      "line)");
    v("frontier_time", frontier_time,
      "--max-drop: seconds each model is timed for (3 runs at least) in each of the 3 rounds that alternate a "
      "candidate with the unpruned model, per timing; longer gives steadier speedups, shorter a faster frontier");
    v("latency_batch", latency_batch, "batch size of the latency table and of the curves' latency measurements");
    v("latency_seq", latency_seq,
      "tokens per sequence of the latency table and of the curves' latency measurements; 0 = data.max_seq_len");
    v("structures", structures,
      "what a FLOPs, parameter or latency budget may remove: heads, neurons (FFN), hidden (channels of the hidden "
      "size, shared by every layer), layers (whole layers)");
    v("search_examples", search_examples,
      "examples of rank_split whose mask gradients the budget search uses (Kwon et al.: 2048); 0 = all");
    v("budget_schedule", budget_schedule,
      "percent of the budget unit (FLOPs or parameters) kept at each point of the budget curves, decreasing");
    v("hidden_widths", hidden_widths,
      "budget search with hidden in structures: the hidden widths (channels kept) tried, the one whose choice keeps "
      "the most Fisher importance over heads, neurons and channels wins; [] = every multiple of hidden_size/32 from "
      "hidden_size down to a quarter");
    v("layer_counts", layer_counts,
      "budget search with layers in structures: the numbers of layers kept tried (the layers of least Fisher of "
      "their gates leave), the one whose choice keeps the most Fisher importance wins; [] = every count");
    v("rearrange", rearrange, "budget search: rearrange each layer's mask by its block Fisher (Kwon et al. step 3)");
    v("mask_tuning", mask_tuning,
      "budget search: fit a scale per kept head and neuron by layer-wise least squares (Kwon et al. step 4)");
    v("tuning_damping", tuning_damping, "mask tuning: ridge toward scale 1, as a fraction of the mean diagonal of AᵀA");
    v("curve_recover_steps", curve_recover_steps,
      "budget curves: each point's tuned choice also slimmed and recovered by this many fine-tuning steps (the "
      "kwon-recovered line); -1 = recover_steps, 0 = no such line");
  }
  // How the final structure is chosen, recovered and checked.
  template <class V>
  void visit_final_fields(V& v) {
    v("method", method,
      "how the kept structure is chosen: best (criterion with the best curve), a criterion name, gates, or kwon "
      "(the budget search; the default with a FLOPs or parameter budget)");
    v("gates_run", gates_run, "run directory of a gated `prune train` run whose log alpha is the gates criterion");
    v("recover_steps", recover_steps,
      "fine-tuning steps with the N heads fixed after pruning, on the whole training split (train.max_train_examples "
      "and train.epochs shape fine-tuning and the gates, not this); 0 = none");
    v("recover_scale", recover_scale,
      "budget choices (the search's curve points, --target-flops F, the frontier's candidates): removed = recover "
      "for recover_steps x (fraction removed) / 0.5 steps, at least a fifth of them (at the default 150: 150 at 50% of "
      "the FLOPs, 210 at 30%, 30 at 90%: a deeper cut has more to rebuild, a shallow one less to lose), or fixed = "
      "recover_steps at "
      "every budget; --target-heads and --target-layers recover for recover_steps");
    v("objective", objective,
      "task = prune a classifier or regressor for data.task (a model without one is fine-tuned first); embedding = "
      "prune a sentence-transformers folder as it is used, for its embeddings (docs/models.md): the search's "
      "Fisher is that of the teacher's embedding (E_v (v . de/dm)^2, v ~ N(0, I)), the recovery distils the unpruned "
      "model's embeddings of data.task's train sentences, the metric is eval_split's cosine Spearman (STS-B, as MTEB "
      "scores it); with --target-flops or --target-params only");
    v("distill_tasks", distill_tasks,
      "tasks whose train rows (unlabelled, never an evaluation split) a distillation reads besides data.task's. "
      "Objective embedding: their sentences, each task at most as many as data.task gives (a seeded sample), so that "
      "the embedding holds on other text too, e.g. [sst2]. Objective task: wherever a run distils (the recoveries, "
      "which it makes distil, and the gates) each step adds as many of their rows (pairs for a pair task), drawn "
      "from (seed, step), as it has labelled ones, for the teacher alone to label (the KL and layer terms; "
      "train/augment.h), e.g. [stsb, rte] for MRPC; a row sharing a text with any split of data.task is left "
      "out. [] = data.task's alone");
    v("distill_hidden", distill_hidden,
      "weight of a layer-wise term in the recovery: each layer's output against the unpruned model's at the same "
      "depth (squared distance per token / width, averaged over tokens and layers; TinyBERT's, no map: a recovered "
      "model keeps the layers and the width). Objective embedding: beside the embeddings' distance. Objective task: "
      "beside the logits' distillation, and > 0 makes a slimmed model's recovery (budgets, the frontier) distil, "
      "which otherwise trains on the labels alone; 0 = off");
    v("recover_distill", recover_distill,
      "distil from the unpruned model during the recovery fine-tuning of a fixed head mask (--target-heads), and of "
      "a slimmed model (budgets, the frontier) with prune.distill_hidden > 0; without it a slimmed model's recovery "
      "trains on the labels alone (docs/budgets.md, stage 6)");
    v("finetune", finetune, "fine-tune first (train section) when the model has no classifier for the task");
    v("new_classifier", new_classifier,
      "a model whose classifier has other labels than the task's: replace it by a new one and fine-tune it first "
      "(false: refused, naming both)");
    v("latency", latency,
      "measure the latency of the slimmed model at every curve step (needed by a latency budget's curves)");
    v("verify", verify, "check the slimmed export: its logits equal the masked model's on eval_split");
  }
};

}  // namespace hp::core
