// The embedding objective (see train/embedding_objective.h).
#include "train/embedding_objective.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <filesystem>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/config.h"  // config_diff
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/kernels/device.h"
#include "core/model/pooling.h"
#include "train/optim.h"
#include "train/pending_steps.h"
#include "train/run_state.h"

namespace hp::train {

namespace fs = std::filesystem;

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

namespace {

// What a saved recovery state must match to be continued: everything that shapes the steps.
std::string recovery_descriptor(const core::Bert& student, const core::EncodedDataset& sentences,
                                const core::TrainConfig& tc, long steps, uint64_t seed, double hidden_weight) {
  int64_t parameters = 0;
  for (const auto& [name, t] : student.parameters()) parameters += t.numel();
  std::ostringstream d;
  d << "embedding_recovery:\n  steps: " << steps << "\n  seed: " << seed << "\n  hidden_weight: " << hidden_weight
    << "\n  sentences: " << sentences.size() << "\n  parameters: " << parameters << "\n  batch_size: " << tc.batch_size
    << "\n  lr_peak: " << tc.lr_peak << "\n  lr_warmup_ratio: " << tc.lr_warmup_ratio
    << "\n  weight_decay: " << tc.weight_decay << "\n  grad_clip: " << tc.grad_clip << "\n";
  return d.str();
}

// The loop's position and its running sums, saved with the weights and the moments (train/run_state.h).
struct RecoveryPosition {
  long step = 0, epoch = 0;  // steps done; the epoch of `batches` (-1: none drawn yet)
  size_t next = 0;  // batches of that epoch done
  double seconds = 0;  // training time of the processes before this one
  torch::Tensor first, last;  // [2] float64 sums of the first and last tenth
};

void save_recovery(const std::string& dir, const std::string& descriptor, const RecoveryPosition& at,
                   const core::Bert& student, const Optimizer& opt) {
  RunState s;
  s.step = s.phase_step = at.step;
  s.epoch = static_cast<int>(at.epoch);
  s.batch_in_epoch = static_cast<long>(at.next);
  s.train_seconds = at.seconds;
  s.config_yaml = descriptor;
  s.config_hash = config_hash(descriptor);
  s.rng_state = cpu_rng_state();
  s.device_rng_state = core::device_rng_state(student.device());
  const torch::Tensor f = at.first.cpu(), l = at.last.cpu();
  for (int i = 0; i < 2; ++i) {
    s.history.add("first/" + std::to_string(i), f[i].item<double>());
    s.history.add("last/" + std::to_string(i), l[i].item<double>());
  }
  save_run_state(dir, s, student, opt);
}

// The saved position in `dir`, its weights in `student` and its moments in `opt`; false when there is none or it
// belongs to another recovery (then set aside, saying so).
bool load_recovery(const std::string& dir, const std::string& descriptor, core::Bert& student, Optimizer& opt,
                   RecoveryPosition& at) {
  const std::string state = state_dir(dir);
  if (dir.empty() || !fs::exists(state + "/state.json")) return false;
  // The weights are read into the student only once the state is known to be this recovery's.
  const auto saved = nlohmann::json::parse(core::read_file(state + "/state.json"));
  if (saved.value("config_hash", "") != config_hash(descriptor)) {
    const auto diff = core::config_diff(core::read_file(state + "/config.yaml"), descriptor);
    core::log_warn("train", state + " was saved by another recovery (" + core::join_list(diff.changed) +
                                "); starting this one over");
    fs::remove_all(state);
    return false;
  }
  RunState s = read_run_state(dir, student);
  opt.load(optimizer_file(dir));
  set_cpu_rng_state(s.rng_state);
  if (s.device_rng_state.defined()) core::set_device_rng_state(student.device(), s.device_rng_state);
  at.step = s.step, at.epoch = s.epoch, at.next = static_cast<size_t>(s.batch_in_epoch), at.seconds = s.train_seconds;
  const auto& h = s.history.series;
  at.first = torch::tensor({h.at("first/0")[0], h.at("first/1")[0]}, torch::kFloat64).to(student.device());
  at.last = torch::tensor({h.at("last/0")[0], h.at("last/1")[0]}, torch::kFloat64).to(student.device());
  return true;
}

// One optimiser step towards the teacher's embeddings of `batch` (and, weighted, its layers' outputs): the loss and
// the layer-wise term (0 without it), on the device.
std::pair<torch::Tensor, torch::Tensor> distill_step(core::Bert& student, const core::Bert& teacher,
                                                     const Pooling& pooling, const core::Batch& batch,
                                                     double hidden_weight, Optimizer& opt) {
  core::EncoderInput in = core::encoder_input(batch);
  in.want_hidden = hidden_weight > 0;
  core::EncoderOutput target;
  {
    torch::NoGradGuard no_grad;
    target = teacher.forward(in);
  }
  opt.zero_grad();
  const core::EncoderOutput out = student.forward(in);
  auto loss = embedding_distill_loss(pooled(out, in, pooling), pooled(target, in, pooling));
  torch::Tensor hidden = torch::zeros({}, loss.options());
  if (in.want_hidden) {
    hidden = hidden_distill_loss(out.hidden_states, target.hidden_states, in.attention_mask);
    loss = loss + hidden_weight * hidden;
  }
  loss.backward();
  opt.step();
  return {loss, hidden};
}

}  // namespace

EmbeddingRecovery recover_embeddings(core::Bert& student, const core::Bert& teacher, const Pooling& pooling,
                                     const core::EncodedDataset& sentences, int pad_id, const core::TrainConfig& tc,
                                     long steps, uint64_t seed, double hidden_weight,
                                     const std::function<void(long, double)>& progress, const std::atomic<bool>* stop,
                                     const std::string& resume_dir) {
  HP_CHECK(sentences.size() > 0, "recover_embeddings: no sentences");
  EmbeddingRecovery r;
  const auto t0 = std::chrono::steady_clock::now();
  auto params = encoder_tensors(student);
  Optimizer opt(tc, params, {}, 0.0, steps);
  torch::manual_seed(seed);  // dropout
  const std::string descriptor = recovery_descriptor(student, sentences, tc, steps, seed, hidden_weight);
  const long save_every = tc.save_every > 0 ? tc.save_every : kEmbeddingSaveEvery;
  // The first and last tenth's mean losses, summed on the device: the host reads a loss only for the progress line,
  // every PendingSteps::kReadEvery steps, and these sums at the end.
  RecoveryPosition at;
  at.epoch = -1;
  at.first = torch::zeros({2}, torch::kFloat64), at.last = torch::zeros({2}, torch::kFloat64);
  std::vector<core::Batch> batches;
  if (load_recovery(resume_dir, descriptor, student, opt, at)) {
    r.resumed_at = at.step;
    if (at.epoch >= 0) batches = shuffled_batches(sentences, tc.batch_size, pad_id, seed, at.epoch);
  }
  auto elapsed = [&] {
    return at.seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  student.set_training(true);
  const long window = std::max(1L, steps / 10);
  const double share = 1.0 / static_cast<double>(window);
  for (; at.step < steps; ++at.step) {
    if (stop && stop->load()) {
      r.interrupted = true;
      break;
    }
    if (at.next == batches.size())
      batches = shuffled_batches(sentences, tc.batch_size, pad_id, seed, ++at.epoch), at.next = 0;
    opt.set_step(at.step);
    const auto [loss, hidden] = distill_step(student, teacher, pooling, batches[at.next++], hidden_weight, opt);
    if (at.step < window || at.step >= steps - window) {
      const torch::Tensor both = torch::stack({loss.detach(), hidden.detach()}).to(torch::kFloat64) * share;
      if (at.first.device() != both.device())
        at.first = at.first.to(both.device()), at.last = at.last.to(both.device());
      (at.step < window ? at.first : at.last).add_(both);
    }
    const long done = at.step + 1;
    if (progress && (done % PendingSteps::kReadEvery == 0 || done == steps)) progress(done, loss.item<double>());
    if (!resume_dir.empty() && done % save_every == 0 && done < steps) {
      RecoveryPosition saved = at;
      saved.step = done, saved.seconds = elapsed();
      save_recovery(resume_dir, descriptor, saved, student, opt);
    }
  }
  r.steps = at.step;
  student.set_training(false);
  r.seconds = elapsed();
  if (!resume_dir.empty()) {
    if (r.interrupted && at.step > r.resumed_at) {  // the steps since the last save are kept too
      at.seconds = r.seconds;
      save_recovery(resume_dir, descriptor, at, student, opt);
    }
    if (!r.interrupted) fs::remove_all(state_dir(resume_dir));
  }
  for (auto& [name, t] : params) t.requires_grad_(false);
  const torch::Tensor f = at.first.cpu(), l = at.last.cpu();
  r.first_loss = f[0].item<double>(), r.last_loss = l[0].item<double>();
  r.first_hidden = f[1].item<double>(), r.last_hidden = l[1].item<double>();
  return r;
}

}  // namespace hp::train
