// What a pruning run prunes for: the one interface its stages read to score a model, bootstrap a curve and rank
// heads. Two implementations, one file each: task.cpp (a task's classifier, regressor or tagger, scored by the task's
// metric on encoded examples) and embedding.cpp (a sentence-transformers folder, scored by the cosine Spearman of its
// embeddings of sentence pairs). A new objective is one file here and one row of core::Objective.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/model/bert.h"
#include "eval/embedding.h"
#include "eval/evaluator.h"
#include "train/embedding_objective.h"  // Pooling

namespace hp::prune {

// The rows a model is scored on: the evaluation split (reported) or the selection slice (where choices are made).
enum class Split { kEval, kSelect };

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
  // The split's gold values in evaluate's row order.
  virtual std::vector<float> gold(Split split) const = 0;
  // The primary metric of `predictions` against `gold`: rows a bootstrap resampled from evaluate and gold.
  virtual double metric_of(const std::vector<float>& predictions, const std::vector<float>& gold) const = 0;
  // The evaluation split's mean length in tokens: FLOPs are counted at it.
  virtual double mean_length() const = 0;
  // What the criteria read in place of logits: the pooled embedding (prune/heads/criteria.h); null for a task.
  virtual const train::Pooling* pooling() const { return nullptr; }
};

// A task's objective on `eval` and `select` (encoded, with their batches; `select` may be empty), which the
// caller keeps alive.
std::unique_ptr<Objective> make_task_objective(const core::TaskSpec& task, const core::EncodedDataset& eval,
                                               const std::vector<core::Batch>& eval_batches,
                                               const core::EncodedDataset& select,
                                               const std::vector<core::Batch>& select_batches);

// A sentence-embedding model's objective: `encoder`'s layout and tokenizer embed the labelled pairs of `eval` and
// `select` (STS-B's), `teacher` (the unpruned model's embeddings of eval's sentences, eval::sts_texts' order) gives
// mean_cosine_to_teacher; `batch` sentences a forward; `mean_length`: the evaluation sentences' mean in tokens. The
// caller keeps all alive.
struct EmbeddingData {
  const core::TaskSpec* task = nullptr;  // whose pairs (data.task's)
  const eval::SentenceEncoder* encoder = nullptr;
  train::Pooling pooling;
  const std::vector<core::Example>*eval = nullptr, *select = nullptr;
  torch::Tensor teacher_eval, teacher_select;
  int batch = 32;
  double mean_length = 0;
};
std::unique_ptr<Objective> make_embedding_objective(const EmbeddingData& data);

}  // namespace hp::prune
