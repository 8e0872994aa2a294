// A sentence-embedding model's objective: the cosine Spearman of its embeddings of sentence pairs (see
// prune/objective/objective.h).
#include <filesystem>
#include <utility>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/io/checkpoint.h"
#include "core/io/sentence_model.h"
#include "core/model/pooling.h"
#include "eval/metrics.h"
#include "prune/objective/objective.h"
#include "train/task_run.h"  // result_json
#include "train/trainer.h"

namespace hp::prune {

namespace {

class EmbeddingObjective final : public Objective {
 public:
  explicit EmbeddingObjective(const EmbeddingData& d) : d_(d) {
    task_ = *d.task;
    task_.primary_metric = "cosine_spearman";  // the embedding's metric in place of the task's
    teacher_eval_ = eval::evaluate_sts(*d.encoder, *d.eval, d.batch, 0).embeddings;
    teacher_select_ = eval::evaluate_sts(*d.encoder, *d.select, d.batch, 0).embeddings;
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
    const torch::Tensor& teacher = on_eval ? teacher_eval_ : teacher_select_;
    r.metrics["mean_cosine_to_teacher"] = eval::paired_cosine(s.embeddings, teacher).mean().item<double>();
    r.predictions = s.similarities;
    r.logits = s.embeddings;  // what an export is checked by
    r.examples = s.pairs, r.seconds = s.seconds, r.examples_per_s = s.pairs_per_s;
    return r;
  }
  long size(Split split) const override {
    return static_cast<long>((split == Split::kEval ? d_.eval : d_.select)->size());
  }
  std::vector<float> gold(Split split) const override {
    std::vector<float> g;
    for (const auto& e : split == Split::kEval ? *d_.eval : *d_.select) g.push_back(e.label);
    return g;
  }
  double metric_of(const std::vector<float>& predictions, const std::vector<float>& gold) const override {
    return eval::spearman({predictions.begin(), predictions.end()}, {gold.begin(), gold.end()});
  }
  double mean_length() const override { return core::mean_length(*d_.eval_sentences); }
  const train::Pooling* pooling() const override { return &d_.pooling; }
  // The probe of train/embedding_objective.h on the pooled embedding of every position.
  MaskLoss mask_loss() const override {
    return [pool = d_.pooling, seed = d_.seed](const core::EncoderOutput& out, const core::Batch& b, long i) {
      const auto e = core::pool_sentences(pool.modes, pool.normalize, out.last_hidden,
                                          b.attention_mask.to(out.last_hidden.device()));
      return train::embedding_probe(e, seed * 1000003ULL + static_cast<uint64_t>(i));
    };
  }
  bool reads_first_token() const override {
    const auto& modes = d_.pooling.modes.modes;
    return modes.size() == 1 && modes[0] == core::PoolingMode::kCls;
  }
  // The closest to the teacher on the selection pairs' sentences: what the model is pruned for, on held-out data
  // (the Spearman of a few hundred pairs scatters by a point or two).
  std::string choice_metric() const override { return "mean_cosine_to_teacher"; }
  ExportKind export_kind() const override { return ExportKind::kSentenceTransformers; }
  // The teacher's modules around the pruned encoder, whose weights leave the classifier out.
  void save(const core::Bert& model, const std::string& dir, const core::Config& cfg) const override {
    core::StagedFolder(dir).write([&](const std::string& staged) {
      core::write_bert_files(model, staged, d_.encoder->layout.transformer_dir,
                             {false, cfg.export_.max_shard_mb, /*encoder_only=*/true});
      core::write_sentence_model_files(d_.encoder->layout, model.config().hidden_size, staged);
    });
  }
  core::Bert load(const std::string& dir, const core::LoadOptions& options) const override;
  // The whole folder (its pooling and Normalize in the ONNX graph) on the evaluation pairs' sentences.
  OrtSource ort_source(const std::string&) const override {
    return {d_.encoder->layout.dir, eval::encode_texts(*d_.encoder, eval::sts_texts(*d_.eval), 0), true};
  }
  double metric_of_outputs(const torch::Tensor& embeddings) const override {
    return eval::sts_of_embeddings(*d_.eval, embeddings).metrics.at("cosine_spearman");
  }
  // The candidates train towards the teacher: the teacher trained further towards itself is the teacher.
  bool has_control() const override { return false; }
  bool train(const TrainRequest& r) const override;

 private:
  EmbeddingData d_;
  core::TaskSpec task_;
  torch::Tensor teacher_eval_, teacher_select_;  // the teacher's embeddings, eval::sts_texts' order
};

core::Bert EmbeddingObjective::load(const std::string& dir, const core::LoadOptions& options) const {
  eval::SentenceEncoder back = eval::load_sentence_encoder(dir, options);
  const core::SentenceModel &a = back.layout, &b = d_.encoder->layout;
  if (a.pooling.modes != b.pooling.modes || a.pooling.include_prompt != b.pooling.include_prompt ||
      a.normalize != b.normalize || a.prompt != b.prompt || a.do_lower_case != b.do_lower_case ||
      a.max_seq_length != b.max_seq_length)
    throw InternalError(dir +
                        ": the exported folder's modules (pooling, Normalize, prompt, lower-casing, length) "
                        "differ from the teacher's " +
                        b.dir + "; report it with the run's config");
  return std::move(back.model);
}

// What a training run minimises and keeps: the distance of the student's embeddings to the teacher's, the checkpoint
// the closest to the teacher on the selection pairs' sentences (mean cosine), their cosine Spearman beside it.
train::Objective training_objective(const EmbeddingData& d, const torch::Tensor& teacher_select) {
  train::Objective o;
  o.metric = "select_cosine_to_teacher";
  o.loss = [pooling = d.pooling](const core::EncoderOutput& student, const core::EncoderOutput& t,
                                 const core::EncoderInput& in) {
    return train::embedding_distill_loss(train::pooled(student, in, pooling), train::pooled(t, in, pooling));
  };
  o.evaluate = [&d, teacher_select](const core::Bert& model, const eval::Masks& masks) {
    const eval::SentenceEncoder enc{d.encoder->layout, model, d.encoder->tokenizer};
    const eval::StsResult s = eval::evaluate_sts(enc, *d.select, d.batch, 0, masks);
    return std::map<std::string, double>{
        {"select_cosine_to_teacher", eval::paired_cosine(s.embeddings, teacher_select).mean().item<double>()},
        {"select_spearman", 100 * s.metrics.at("cosine_spearman")}};
  };
  return o;
}

bool EmbeddingObjective::train(const TrainRequest& r) const {
  const train::Objective o = training_objective(d_, teacher_select_);
  train::TrainData data;
  data.task = d_.task;
  data.train = d_.sentences, data.eval = d_.eval_sentences, data.objective = &o;
  data.pad_id = d_.encoder->tokenizer.pad_id(), data.eval_batch_size = r.cfg->eval.batch_size;
  train::TrainOptions opts;
  opts.run_dir = r.run_dir, opts.config_yaml = core::resume_yaml(*r.cfg);
  opts.resume = std::filesystem::exists(r.run_dir + "/state");
  opts.teacher = &d_.encoder->model, opts.finetune_steps = r.finetune_steps, opts.stop = r.stop;
  opts.fixed_keep = r.fixed_keep, opts.tokenizer_dir = d_.tokenizer_dir;
  core::Bert student = core::load_bert(r.from, core::LoadOptions{});
  const train::TrainResult t = train::train_model(r.cfg->train, r.cfg->gates, r.cfg->run, student, data, opts);
  if (t.interrupted) return false;
  core::write_file_atomic(r.run_dir + "/train_result.json", train::result_json(t).dump(2) + "\n");
  return true;
}

}  // namespace

std::unique_ptr<Objective> make_embedding_objective(const EmbeddingData& data) {
  return std::make_unique<EmbeddingObjective>(data);
}

}  // namespace hp::prune
