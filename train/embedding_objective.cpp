// The embedding objective (see train/embedding_objective.h).
#include "train/embedding_objective.h"

#include <random>

#include "core/base/errors.h"
#include "core/model/pooling.h"

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

}  // namespace hp::train
