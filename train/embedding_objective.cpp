// The embedding objective (see train/embedding_objective.h).
#include "train/embedding_objective.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "core/base/errors.h"
#include "core/model/pooling.h"
#include "train/optim.h"
#include "train/pending_steps.h"

namespace hp::train {

torch::Tensor pooled(const core::EncoderOutput& out, const core::EncoderInput& in, const Pooling& pooling) {
  return core::pool_sentences(pooling.modes, pooling.normalize, out.last_hidden,
                              in.attention_mask.to(out.last_hidden.device()));
}

torch::Tensor sentence_embedding(const core::Bert& model, const core::EncoderInput& in, const Pooling& pooling) {
  return pooled(model.forward(in), in, pooling);
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

torch::Tensor hidden_distill_loss(const std::vector<torch::Tensor>& student, const std::vector<torch::Tensor>& teacher,
                                  const torch::Tensor& attention_mask) {
  HP_CHECK(student.size() == teacher.size() && student.size() >= 2,
           "hidden_distill_loss: " << student.size() << " student and " << teacher.size()
                                   << " teacher hidden states; the slimmed model keeps every layer");
  const auto mask = attention_mask.to(student[1].device(), student[1].scalar_type()).unsqueeze(-1);  // [B, S, 1]
  const auto tokens = mask.sum();
  auto total = torch::zeros({}, student[1].options());
  for (size_t l = 1; l < student.size(); ++l) {
    HP_CHECK(student[l].sizes() == teacher[l].sizes(), "hidden_distill_loss: layer "
                                                           << l << " student " << student[l].sizes() << " vs teacher "
                                                           << teacher[l].sizes());
    const auto d = (student[l] - teacher[l].detach()) * mask;
    total = total + d.pow(2).sum() / (tokens * static_cast<double>(student[l].size(-1)));
  }
  return total / static_cast<double>(student.size() - 1);
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
                                     long steps, uint64_t seed, double hidden_weight,
                                     const std::function<void(long, double)>& progress, const std::atomic<bool>* stop) {
  HP_CHECK(sentences.size() > 0, "recover_embeddings: no sentences");
  EmbeddingRecovery r;
  const auto t0 = std::chrono::steady_clock::now();
  auto params = encoder_tensors(student);
  Optimizer opt(tc, params, {}, 0.0, steps);
  torch::manual_seed(seed);  // dropout
  student.set_training(true);
  const long window = std::max(1L, steps / 10);
  const double share = 1.0 / static_cast<double>(window);
  // The first and last tenth's mean losses, summed on the device: the host reads a loss only for the progress line,
  // every PendingSteps::kReadEvery steps (#62), and these sums at the end.
  torch::Tensor first = torch::zeros({2}, torch::kFloat64), last = torch::zeros({2}, torch::kFloat64);
  const bool layers = hidden_weight > 0;
  long epoch = 0;
  std::vector<core::Batch> batches;
  size_t next = 0;
  for (long step = 0; step < steps; ++step) {
    if (stop && stop->load()) {
      r.interrupted = true;
      break;
    }
    if (next == batches.size()) batches = shuffled_batches(sentences, tc.batch_size, pad_id, seed, epoch++), next = 0;
    core::EncoderInput in = core::encoder_input(batches[next++]);
    in.want_hidden = layers;
    core::EncoderOutput target;
    {
      torch::NoGradGuard no_grad;
      target = teacher.forward(in);
    }
    opt.set_step(step);
    opt.zero_grad();
    const core::EncoderOutput out = student.forward(in);
    auto loss = embedding_distill_loss(pooled(out, in, pooling), pooled(target, in, pooling));
    torch::Tensor hidden = torch::zeros({}, loss.options());
    if (layers) {
      hidden = hidden_distill_loss(out.hidden_states, target.hidden_states, in.attention_mask);
      loss = loss + hidden_weight * hidden;
    }
    loss.backward();
    opt.step();
    if (step < window || step >= steps - window) {
      const torch::Tensor both = torch::stack({loss.detach(), hidden.detach()}).to(torch::kFloat64) * share;
      if (first.device() != both.device()) first = first.to(both.device()), last = last.to(both.device());
      (step < window ? first : last).add_(both);
    }
    r.steps = step + 1;
    if (progress && (r.steps % PendingSteps::kReadEvery == 0 || r.steps == steps))
      progress(r.steps, loss.item<double>());
  }
  student.set_training(false);
  for (auto& [name, t] : params) t.requires_grad_(false);
  const torch::Tensor f = first.cpu(), l = last.cpu();
  r.first_loss = f[0].item<double>(), r.last_loss = l[0].item<double>();
  r.first_hidden = f[1].item<double>(), r.last_hidden = l[1].item<double>();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace hp::train
