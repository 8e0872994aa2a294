// The embedding objective (see train/embedding_objective.h).
#include "train/embedding_objective.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "core/base/errors.h"
#include "core/model/pooling.h"
#include "train/optim.h"

namespace hp::train {

torch::Tensor sentence_embedding(const core::Bert& model, const core::EncoderInput& in, const Pooling& pooling) {
  const auto hidden = model.forward(in).last_hidden;
  return core::pool_sentences(pooling.modes, pooling.normalize, hidden, in.attention_mask.to(hidden.device()));
}

torch::Tensor embedding_probe(const torch::Tensor& embeddings, uint64_t seed) {
  HP_CHECK(embeddings.dim() == 2, "embedding_probe: [B, W] embeddings, got " << embeddings.sizes());
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto v = torch::empty(embeddings.sizes(), torch::kFloat32);
  float* p = v.data_ptr<float>();
  for (long i = 0; i < v.numel(); ++i) p[i] = normal(rng);
  return (v.to(embeddings.device()) * embeddings).sum() / static_cast<double>(embeddings.size(0));
}

torch::Tensor embedding_distill_loss(const torch::Tensor& student, const torch::Tensor& teacher) {
  HP_CHECK(student.sizes() == teacher.sizes(),
           "embedding_distill_loss: student " << student.sizes() << " vs teacher " << teacher.sizes());
  return (student - teacher.detach()).pow(2).sum(1).mean();
}

namespace {

// The encoder's own tensors (the embeddings and the layers): a sentence-transformers model reads neither the
// pooler nor a classifier, which would otherwise only decay.
std::map<std::string, torch::Tensor> encoder_tensors(core::Bert& model) {
  std::map<std::string, torch::Tensor> out;
  const bool fixed_positions = model.config().sinusoidal_pos_embds;
  for (auto& [name, t] : model.mutable_parameters()) {
    const bool encoder = name.rfind("embeddings.", 0) == 0 || name.rfind("encoder.", 0) == 0 ||
                         name.rfind("transformer.", 0) == 0;
    if (!encoder || (fixed_positions && name == "embeddings.position_embeddings.weight")) continue;
    t.requires_grad_(true);
    out.emplace(name, t);
  }
  return out;
}

// Pass `epoch` over the sentences in a shuffled order of its own.
std::vector<core::Batch> shuffled_batches(const core::EncodedDataset& data, int batch_size, int pad_id,
                                          uint64_t seed, long epoch) {
  std::vector<long> order(data.size());
  std::iota(order.begin(), order.end(), 0L);
  std::mt19937_64 rng(seed + 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(epoch + 1));
  std::shuffle(order.begin(), order.end(), rng);
  core::BatchOptions bo;
  bo.batch_size = batch_size, bo.sort_by_length = false, bo.pad_id = pad_id;
  return core::make_batches(data, bo, order);
}

}  // namespace

EmbeddingRecovery recover_embeddings(core::Bert& student, const core::Bert& teacher, const Pooling& pooling,
                                     const core::EncodedDataset& sentences, int pad_id, const core::TrainConfig& tc,
                                     long steps, uint64_t seed, const std::function<void(long, double)>& progress,
                                     const std::atomic<bool>* stop) {
  HP_CHECK(sentences.size() > 0, "recover_embeddings: no sentences");
  EmbeddingRecovery r;
  const auto t0 = std::chrono::steady_clock::now();
  auto params = encoder_tensors(student);
  Optimizer opt(tc, params, {}, 0.0, steps);
  torch::manual_seed(seed);  // dropout
  student.set_training(true);
  const long window = std::max(1L, steps / 10);
  double first = 0, last = 0;
  long epoch = 0;
  std::vector<core::Batch> batches;
  size_t next = 0;
  for (long step = 0; step < steps; ++step) {
    if (stop && stop->load()) {
      r.interrupted = true;
      break;
    }
    if (next == batches.size()) batches = shuffled_batches(sentences, tc.batch_size, pad_id, seed, epoch++), next = 0;
    const core::EncoderInput in = core::encoder_input(batches[next++]);
    torch::Tensor target;
    {
      torch::NoGradGuard no_grad;
      target = sentence_embedding(teacher, in, pooling);
    }
    opt.set_step(step);
    opt.zero_grad();
    const auto loss = embedding_distill_loss(sentence_embedding(student, in, pooling), target);
    loss.backward();
    opt.step();
    const double value = loss.item<double>();
    if (step < window) first += value / static_cast<double>(window);
    if (step >= steps - window) last += value / static_cast<double>(window);
    r.steps = step + 1;
    if (progress) progress(step + 1, value);
  }
  student.set_training(false);
  for (auto& [name, t] : params) t.requires_grad_(false);
  r.first_loss = first, r.last_loss = last;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace hp::train
