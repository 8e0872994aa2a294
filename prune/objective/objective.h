// What a pruning run prunes for: the one interface its stages read to score a model, bootstrap a curve and rank
// heads. Two implementations, one file each: task.cpp (a task's classifier, regressor or tagger, scored by the task's
// metric on encoded examples) and embedding.cpp (a sentence-transformers folder, scored by the cosine Spearman of its
// embeddings of sentence pairs). A new objective is one file here and one row of core::Objective.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/model/bert.h"
#include "core/model/head_mask.h"
#include "eval/embedding.h"
#include "eval/evaluator.h"
#include "train/embedding_objective.h"  // Pooling

namespace hp::prune {

// A training run of the pruning run (fine-tuning, recovery, gates, the control): as `cfg` says, in `run_dir`
// (resumed when its state is there), RUN_DIR/train_result.json and RUN_DIR/best when done.
struct TrainRequest {
  const core::Config* cfg = nullptr;
  std::string run_dir;
  std::string from;  // the model folder it starts from
  core::HeadSet fixed_keep;  // heads fixed (recovery under a head mask); empty: none
  // A task's distillation teacher when it is not `from` (a slimmed model's recovery from the unpruned one).
  std::string teacher_dir;
  long finetune_steps = 0;  // > 0: the gates' fixed-structure phase lasts this many steps
  const std::atomic<bool>* stop = nullptr;
};

// The scalar of batch `index` whose mask gradients the search takes (prune/search/mask_search.h), from the model's
// output on it. Empty: the batch's mean task loss on the logits, computed at [CLS] alone; otherwise every position is
// computed (a sentence embedding pools them all: train/embedding_objective.h's probe).
using MaskLoss = std::function<torch::Tensor(const core::EncoderOutput&, const core::Batch&, long index)>;

// The rows a model is scored on: the evaluation split (reported) or the selection slice (where choices are made).
enum class Split { kEval, kSelect };

// The folder a run exports (RUN_DIR/model): what its users load it with.
enum class ExportKind {
  kTransformers,  // a Hugging Face folder, checked by the run in transformers and ONNX Runtime
  kSentenceTransformers,  // a sentence-transformers folder (modules.json, pooling, Normalize)
};

class Objective {
 public:
  virtual ~Objective() = default;
  // summary.json's "objective": sequence_classification, regression, token_classification or embedding.
  virtual std::string name() const = 0;
  // The task as curves, reports and bootstraps read it: its name, and as primary_metric the metric every curve and
  // choice reads (a task's own; cosine_spearman for embeddings).
  virtual const core::TaskSpec& task() const = 0;
  // `model` (at its precision and on its device; `masks` applied) on `split`: its metrics (fractions, as
  // eval::compute_metrics gives them) and one prediction per row of gold(split).
  virtual eval::EvalResult evaluate(const core::Bert& model, Split split, const eval::Masks& masks = {}) const = 0;
  // The split's examples (a task's) or pairs (an embedding's).
  virtual long size(Split split) const = 0;
  // The split's gold values in evaluate's row order.
  virtual std::vector<float> gold(Split split) const = 0;
  // The primary metric of `predictions` against `gold`: rows a bootstrap resampled from evaluate and gold.
  virtual double metric_of(const std::vector<float>& predictions, const std::vector<float>& gold) const = 0;
  // The evaluation split's mean length in tokens: FLOPs are counted at it.
  virtual double mean_length() const = 0;
  // What the criteria read in place of logits: the pooled embedding (prune/heads/criteria.h); null for a task.
  virtual const train::Pooling* pooling() const { return nullptr; }
  // What the search's mask gradients differentiate (empty: the task's loss).
  virtual MaskLoss mask_loss() const { return {}; }
  // The model's output is read at the first token alone (a classifier's [CLS], a CLS-pooled embedding): the search
  // fits the last layer there.
  virtual bool reads_first_token() const { return true; }
  // The metric a budget's steps are chosen by on the selection slice (a model's fraction, evaluate's key).
  virtual std::string choice_metric() const { return task().primary_metric; }
  // What save writes.
  virtual ExportKind export_kind() const { return ExportKind::kTransformers; }
  // `model` written into the folder `dir` as its users load it, with the tokenizer of the run's model.
  virtual void save(const core::Bert& model, const std::string& dir, const core::Config& cfg) const = 0;
  // The model of a folder save wrote, read as its users read it.
  virtual core::Bert load(const std::string& dir, const core::LoadOptions& options) const = 0;
  // What ONNX Runtime's reference rows of the frontier run (prune/export/onnx.h ort_reference), `model_dir` being the
  // run's unpruned model: the folder exported to ONNX, the evaluation split's rows as ONNX Runtime reads them, and
  // whether the folder is a sentence-transformers chain (its outputs embeddings, not logits).
  struct OrtSource {
    std::string folder;
    core::EncodedDataset rows;
    bool sentence = false;
  };
  virtual OrtSource ort_source(const std::string& model_dir) const = 0;
  // The primary metric (a fraction) of outputs made elsewhere (ONNX Runtime's) on ort_source's rows, in their order.
  virtual double metric_of_outputs(const torch::Tensor& outputs) const = 0;
  // Whether the unpruned model trained as long as a candidate (prune.control) is a reference: not where every
  // candidate trains towards the unpruned model itself (an embedding's teacher).
  virtual bool has_control() const { return true; }
  // The training of `r` by the one trainer (train/trainer.h) on the objective's loss: a task's labels (distilled as
  // cfg.gates says), or the teacher's embeddings of unlabelled sentences. False when stopped.
  virtual bool train(const TrainRequest& r) const = 0;
};

// A task's objective on `eval` and `select` (encoded, with their batches; `select` may be empty), training on the
// task's train split under `data_root` (and `distill_rows` for the teacher to label: prune.distill_tasks'; may be
// null). The caller keeps all alive.
struct TaskData {
  const core::TaskSpec* task = nullptr;
  const core::EncodedDataset *eval = nullptr, *select = nullptr;
  const std::vector<core::Batch>*eval_batches = nullptr, *select_batches = nullptr;
  std::string data_root;
  const std::vector<core::Example>* distill_rows = nullptr;
};
std::unique_ptr<Objective> make_task_objective(const TaskData& data);

// A sentence-embedding model's objective: `encoder` (the unpruned model, the teacher) embeds the labelled pairs of
// `eval` and `select` (STS-B's); the teacher's embeddings of their sentences, made once, give mean_cosine_to_teacher;
// `batch` sentences a forward. It trains towards the teacher's embeddings of `sentences`
// (unlabelled), the checkpoint kept the closest to the teacher on the selection pairs' sentences (mean cosine);
// `eval_sentences` (the evaluation pairs' distinct sentences) give the mean length FLOPs are counted at. The
// caller keeps all alive.
struct EmbeddingData {
  const core::TaskSpec* task = nullptr;  // whose pairs (data.task's)
  const eval::SentenceEncoder* encoder = nullptr;
  train::Pooling pooling;
  const std::vector<core::Example>*eval = nullptr, *select = nullptr;
  int batch = 32;
  uint64_t seed = 0;  // the mask gradients' probe
  const core::EncodedDataset *sentences = nullptr, *eval_sentences = nullptr;
  std::string tokenizer_dir;  // copied into a training run's best/
};
std::unique_ptr<Objective> make_embedding_objective(const EmbeddingData& data);

}  // namespace hp::prune
