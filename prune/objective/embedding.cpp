// A sentence-embedding model's objective: the cosine Spearman of its embeddings of sentence pairs (see
// prune/objective/objective.h).
#include "core/base/correlation.h"
#include "core/base/errors.h"
#include "eval/metrics.h"
#include "prune/objective/objective.h"

namespace hp::prune {

namespace {

class EmbeddingObjective final : public Objective {
 public:
  explicit EmbeddingObjective(const EmbeddingData& d) : d_(d) {
    task_ = *d.task;
    task_.primary_metric = "cosine_spearman";  // the embedding's metric in place of the task's
  }

  std::string name() const override { return core::choice_text(core::Objective::kEmbedding); }
  const core::TaskSpec& task() const override { return task_; }
  // cosine_spearman and cosine_pearson of the pairs' cosines to their gold scores, and the mean cosine of each
  // sentence's embedding to the teacher's; one cosine per pair as its prediction.
  eval::EvalResult evaluate(const core::Bert& model, Split split, const eval::Masks& masks) const override {
    const bool on_eval = split == Split::kEval;
    const eval::SentenceEncoder enc{d_.encoder->layout, model, d_.encoder->tokenizer};
    const eval::StsResult s = eval::evaluate_sts(enc, on_eval ? *d_.eval : *d_.select, d_.batch, 0, masks);
    eval::EvalResult r;
    r.metrics = s.metrics;
    const torch::Tensor& teacher = on_eval ? d_.teacher_eval : d_.teacher_select;
    r.metrics["mean_cosine_to_teacher"] =
        teacher.defined() ? eval::paired_cosine(s.embeddings, teacher).mean().item<double>() : 1.0;
    r.predictions = s.similarities;
    r.examples = s.pairs, r.seconds = s.seconds, r.examples_per_s = s.pairs_per_s;
    return r;
  }
  std::vector<float> gold(Split split) const override {
    std::vector<float> g;
    for (const auto& e : split == Split::kEval ? *d_.eval : *d_.select) g.push_back(e.label);
    return g;
  }
  double metric_of(const std::vector<float>& predictions, const std::vector<float>& gold) const override {
    return eval::spearman({predictions.begin(), predictions.end()}, {gold.begin(), gold.end()});
  }
  double mean_length() const override { return d_.mean_length; }
  const train::Pooling* pooling() const override { return &d_.pooling; }

 private:
  EmbeddingData d_;
  core::TaskSpec task_;
};

}  // namespace

std::unique_ptr<Objective> make_embedding_objective(const EmbeddingData& data) {
  return std::make_unique<EmbeddingObjective>(data);
}

}  // namespace hp::prune
