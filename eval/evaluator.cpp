// Evaluation loop (see eval/evaluator.h).
#include "eval/evaluator.h"

#include <algorithm>

#include <chrono>

#include <fmt/format.h>
#include <torch/utils.h>

#include "core/data/file_task.h"
#include "core/dist/distributed.h"
#include "core/base/errors.h"  // InputError
#include "core/base/log.h"
#include "eval/metrics.h"

namespace hp::eval {

torch::Tensor head_mask_tensor(const core::HeadSet& keep) {
  const long L = static_cast<long>(keep.size());
  long H = 0;
  for (const auto& layer : keep) H = std::max(H, static_cast<long>(layer.size()));
  auto mask = torch::ones({L, H});  // rows of layers with fewer heads are padded with 1 (unused)
  auto a = mask.accessor<float, 2>();
  for (long l = 0; l < L; ++l)
    for (long h = 0; h < static_cast<long>(keep[l].size()); ++h) a[l][h] = keep[l][h] ? 1.f : 0.f;
  return mask;
}

torch::Tensor layer_mask_tensor(const std::vector<bool>& keep) {
  if (keep.empty()) return {};
  auto t = torch::ones({static_cast<long>(keep.size())});
  for (size_t l = 0; l < keep.size(); ++l) t[static_cast<long>(l)] = keep[l] ? 1.0 : 0.0;
  return t;
}

std::vector<float> predictions_from_logits(const torch::Tensor& logits, bool regression) {
  auto p = (regression ? logits.select(1, 0) : logits.argmax(1)).to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(p.data_ptr<float>(), p.data_ptr<float>() + p.numel());
}

torch::Tensor dataset_logits(long n, long classes, long seq) {
  return seq > 0 ? torch::zeros({n, seq, classes}) : torch::zeros({n, classes});
}

void put_rows(torch::Tensor& all, const torch::Tensor& logits, const std::vector<long>& index) {
  auto rows = all.dim() == 3 ? all.narrow(1, 0, logits.size(1)) : all;
  rows.index_copy_(0, torch::tensor(index, torch::kLong), logits.to(torch::kCPU, torch::kFloat));
}

std::vector<float> predictions_of(const torch::Tensor& logits, const core::EncodedDataset& data, bool regression) {
  if (logits.dim() == 2) return predictions_from_logits(logits, regression);
  const auto best = logits.argmax(2).to(torch::kCPU, torch::kLong).contiguous();  // [N, S]
  const auto a = best.accessor<int64_t, 2>();
  std::vector<float> out;
  for (size_t i = 0; i < data.tags.size(); ++i) {
    for (size_t t = 0; t < data.tags[i].size(); ++t)
      if (data.tags[i][t] != core::kUnscored)
        out.push_back(static_cast<float>(a[static_cast<long>(i)][static_cast<long>(t)]));
    out.push_back(core::kSentenceEnd);
  }
  return out;
}

Masks masks_of(const core::StructureMask& keep) {
  return {head_mask_tensor(keep.heads), keep.neurons.empty() ? torch::Tensor() : neuron_mask_tensor(keep.neurons),
          layer_mask_tensor(keep.layers), hidden_mask_tensor(keep.hidden)};
}

void set_masks(core::EncoderInput& in, const Masks& m) {
  in.head_mask = m.heads, in.neuron_mask = m.neurons, in.layer_mask = m.layers, in.hidden_mask = m.hidden;
}

EvalResult evaluate(const core::Bert& model, const core::TaskSpec& task, const core::EncodedDataset& data,
                    const std::vector<core::Batch>& batches, const Masks& masks, bool show_progress) {
  torch::NoGradGuard no_grad;
  EvalResult r;
  r.examples = static_cast<long>(data.size());
  const bool tagged = model.config().head == core::Head::kToken;  // logits [N, S, C], S the longest example
  r.logits = dataset_logits(r.examples, model.config().num_labels, tagged ? core::longest_length(data) : 0);
  core::Progress progress("eval", r.examples);
  auto start = std::chrono::steady_clock::now();
  long done = 0;
  // Data-parallel: each rank runs every world-th batch and writes its rows; the sum over ranks is then
  // every row exactly (the other ranks' rows are zero), so all ranks compute the same metrics.
  for (size_t i = 0; i < batches.size(); ++i) {
    const auto& b = batches[i];
    if (!core::dist::mine(static_cast<long>(i))) continue;
    core::EncoderInput in = core::encoder_input(b);
    set_masks(in, masks);
    in.cls_only = true;
    put_rows(r.logits, model.forward(in).logits, b.index);
    r.tokens += b.attention_mask.sum().item<long>();
    r.padded_tokens += b.input_ids.numel();
    done += b.input_ids.size(0) * core::dist::world();  // progress is rank 0's, its share scaled up
    if (show_progress) progress.update(std::min(done, r.examples));
  }
  core::dist::all_reduce_sum(r.logits, "evaluation");
  if (core::dist::active()) {
    auto counts = torch::tensor({r.tokens, r.padded_tokens}, torch::kLong);
    core::dist::all_reduce_sum(counts, "evaluation");
    r.tokens = counts[0].item<long>(), r.padded_tokens = counts[1].item<long>();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A metric over NaN/Inf outputs (argmax of NaN is class 0) would be a number that means nothing.
  const auto bad_rows = (~torch::isfinite(r.logits)).flatten(1).any(1).sum().item<long>();
  if (bad_rows > 0)
    throw InputError("the model's outputs are not finite (NaN/Inf) for " + std::to_string(bad_rows) + " of " +
                     std::to_string(r.examples) +
                     " examples, so no metric is reported; check the checkpoint's weights "
                     "(the load warning names non-finite tensors) and config.json");
  r.examples_per_s = r.seconds > 0 ? r.examples / r.seconds : 0;
  r.predictions = predictions_of(r.logits, data, task.is_regression());
  if (data.has_labels) r.metrics = compute_metrics(task, r.predictions, core::gold_labels(data));
  return r;
}

int calibrate_int8(core::Bert& model, const core::Config& cfg, const core::Tokenizer& tok, const Masks& masks) {
  const int n = cfg.run.calibrate;
  if (n <= 0 || model.precision() != core::Precision::kInt8) return 0;
  const core::TaskSpec& task = core::task_of(cfg.data, cfg.model.path);
  const auto splits = task.split_names();
  if (std::find(splits.begin(), splits.end(), "train") == splits.end()) {
    core::log_info("calibrate", task.name + " has no train split to calibrate on: int8 stays dynamic");
    return 0;
  }
  std::vector<core::Example> examples;
  try {
    examples = core::read_task(task, core::data_root_for(cfg.data), "train");
  } catch (const InputError& e) {
    throw InputError(std::string(e.what()) + " (int8 calibration reads " + std::to_string(n) + " examples of " +
                     task.name + "'s train split; pass --calibrate 0 for dynamic int8 without it)");
  }
  if (examples.size() > static_cast<size_t>(n)) examples.resize(static_cast<size_t>(n));
  if (examples.size() < static_cast<size_t>(n))
    core::log_warn("calibrate", "run.calibrate = " + std::to_string(n) + " but " + task.name + "'s train split holds " +
                                    std::to_string(examples.size()) + " examples: calibrating on all " +
                                    std::to_string(examples.size()) + " (pass --calibrate " +
                                    std::to_string(examples.size()) + " or fewer to silence this)");
  const auto data = core::encode_examples(tok, examples, cfg.data.max_seq_len);
  core::BatchOptions bo;
  bo.pad_id = tok.pad_id();
  bo.batch_size = 1;  // the statistics without padding rows, which are no input the model is judged on
  const auto singles = core::make_batches(data, bo);
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  model.calibrate_int8([&] {
    for (const auto& b : singles) {  // every rank runs every example, so data-parallel ranks calibrate alike
      core::EncoderInput in = core::encoder_input(b);
      set_masks(in, masks);
      in.cls_only = true;
      model.forward(in);
    }
  });
  core::log_info("calibrate", fmt::format("int8 calibrated on {} {} train examples in {:.1f} s (SmoothQuant, α 0.5)",
                                          examples.size(), task.name,
                                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  return static_cast<int>(examples.size());
}

}  // namespace hp::eval
