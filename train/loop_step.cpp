// One training step: this rank's loss (the task's or the objective's, distillation), backward, the optimiser
// step and its scalars queued for the host (see train/loop.h).
#include <chrono>

#include "core/base/strings.h"  // format_number
#include "core/model/head_loss.h"
#include "core/kernels/device.h"  // to_device
#include "core/kernels/lowp_gemm.h"  // Bf16Autocast
#include "train/captured_step.h"  // CapturedStep::available
#include "train/embedding_objective.h"  // hidden_distill_loss
#include "train/loop.h"

namespace hp::train::detail {

namespace {

// Rows [lo, hi) of a batch.
core::Batch rows_of(const core::Batch& b, long lo, long hi) {
  core::Batch r;
  r.input_ids = b.input_ids.narrow(0, lo, hi - lo);
  r.token_type_ids = b.token_type_ids.narrow(0, lo, hi - lo);
  r.attention_mask = b.attention_mask.narrow(0, lo, hi - lo);
  r.labels = b.labels.narrow(0, lo, hi - lo);
  r.index.assign(b.index.begin() + lo, b.index.begin() + hi);
  return r;
}

}  // namespace

core::Batch Loop::augmented(const core::Batch& b) const {
  const uint64_t seed = step_seed(rc_.seed, s_.step);
  core::Batch out = swap_ ? swap_->apply(b, gc_.distill_augment, seed) : b;
  // Another stream than the swaps' (the seed XOR a constant), so that the rows drawn do not follow the words swapped.
  if (extra_rows()) out = with_unlabelled_rows(out, *data_.distill_rows, seed ^ 0x9E3779B97F4A7C15ULL, data_.pad_id);
  return out;
}

// The loss of this rank's rows of the global batch (all of it in one process), weighted by their share of
// the batch, so that the gradients summed over ranks are the whole batch's; gate penalty not included.
Loop::StepLoss Loop::batch_loss(const core::Batch& b) {
  const long B = b.input_ids.size(0);
  const long lo = B * core::dist::rank() / core::dist::world(), hi = B * (core::dist::rank() + 1) / core::dist::world();
  const core::Batch local = core::dist::active() ? rows_of(b, lo, hi) : b;
  const double share = static_cast<double>(hi - lo) / static_cast<double>(B);
  StepLoss r;
  r.distilling = distils();
  r.loss = torch::zeros({}), r.task_loss = torch::zeros({});
  if (hi <= lo) {
    if (gates_ && !fixed_.heads.defined()) gates_->sample(B);  // keeps the gate noise in step with the other ranks
    return r;
  }
  core::EncoderInput in = core::encoder_input(local);
  if (fixed_.heads.defined()) {
    const gates::GateMasks& f = in_graph_ ? graph_fixed_ : fixed_;
    in.head_mask = f.heads, in.neuron_mask = f.neurons, in.layer_mask = f.layers;
    in.hidden_mask = f.hidden;
  } else if (gates_) {
    const gates::GateMasks g = gates_->sample(B);  // every rank draws the whole batch's noise, as one process does
    in.head_mask = g.heads, in.neuron_mask = g.neurons, in.layer_mask = g.layers, in.hidden_mask = g.hidden;
    if (in.head_mask.dim() == 3) in.head_mask = in.head_mask.narrow(0, lo, hi - lo);  // per-example gates
  }
  if (data_.objective) {
    objective_loss(in, local, share, r);
    return r;
  }
  const bool hidden = r.distilling && (layer_distill_ || same_depth_distill_);
  in.cls_only = !hidden;  // the layer loss reads every row of every layer
  in.want_hidden = hidden;
  core::EncoderOutput out;
  torch::Tensor logits;  // [b, C]
  {
    const core::Bf16Autocast autocast(tc_.precision == "bf16", model_.device());
    out = model_.forward(in);
    logits = out.logits.to(torch::kFloat);  // the loss in fp32
  }
  const torch::Tensor labels = core::to_device(local.labels, logits.device());
  const bool regression = data_.task->is_regression();
  // With word swaps or prune.distill_tasks' rows some labels are NaN (the teacher's alone): the mean over the whole
  // batch's labelled rows, this rank's weighted by its share of them; without them the plain mean, as ever measured.
  // (One process: all of them, and nothing read to the host, which a captured step may not do.)
  // A token head scores some tokens of each row: the mean over the batch's scored tokens, weighted the same way.
  if (unlabelled_rows() || logits.dim() == 3) {
    auto labelled = [](const core::Batch& x) { return core::labelled_count(x.labels).item<double>(); };
    const double all = core::dist::active() ? labelled(b) : 1.0, here = core::dist::active() ? labelled(local) : 1.0;
    r.task_loss = (all > 0 ? here / all : 0.0) * core::labelled_loss(logits, labels, regression);
  } else {
    r.task_loss = share * (regression ? torch::mse_loss(logits.select(1, 0), labels)
                                      : torch::cross_entropy_loss(logits, labels.to(torch::kLong)));
  }
  r.loss = r.task_loss;
  if (r.distilling) {
    core::EncoderOutput teacher;
    {
      torch::NoGradGuard no_grad;
      core::EncoderInput tin = core::encoder_input(local);
      tin.cls_only = !hidden;
      tin.want_hidden = hidden;
      teacher = opts_.teacher->forward(tin);
    }
    r.kd = share * distill_loss(logits, teacher.logits, gc_.distill_temperature, regression, local.attention_mask);
    r.loss = (1.0 - gc_.distill_weight) * r.task_loss + gc_.distill_weight * r.kd;
    if (hidden && same_depth_distill_) {
      // This rank's mean over its tokens, weighted by its share of the rows (the whole batch's mean in one process).
      r.layer = share * hidden_distill_loss(out.hidden_states, teacher.hidden_states,
                                            core::to_device(local.attention_mask, model_.device()));
      r.loss = r.loss + gc_.distill_hidden * r.layer;
    } else if (hidden) {
      // Already this rank's share of the whole batch's mean (its errors over the whole batch's token count).
      r.layer = layer_distill_->loss(out.hidden_states, teacher.hidden_states,
                                     core::to_device(local.attention_mask, model_.device()),
                                     alive_layers(in.head_mask, in.layer_mask), nullptr, [](torch::Tensor& t) {
                                       if (core::dist::active())
                                         core::dist::all_reduce_sum(t, "the layer distillation");
                                     });
      r.loss = r.loss + gc_.distill_hidden * r.layer;
    }
  }
  return r;
}

// The objective's loss of this rank's rows (with gates.distill_hidden, and CoFi's layer term under budget gates or
// the same-depth one in a recovery): the student under the step's masks, the teacher unmasked, every position of
// both computed.
void Loop::objective_loss(const core::EncoderInput& masked, const core::Batch& local, double share, StepLoss& r) {
  core::EncoderInput in = masked;
  in.cls_only = false;
  in.want_hidden = layer_distill_ || same_depth_distill_;
  core::EncoderOutput teacher;
  {
    torch::NoGradGuard no_grad;
    core::EncoderInput tin = core::encoder_input(local);
    tin.cls_only = false;
    tin.want_hidden = in.want_hidden;
    teacher = opts_.teacher->forward(tin);
  }
  core::EncoderOutput out;
  {
    const core::Bf16Autocast autocast(tc_.precision == "bf16", model_.device());
    out = model_.forward(in);
  }
  out.last_hidden = out.last_hidden.to(torch::kFloat);  // the loss in fp32
  r.task_loss = share * data_.objective->loss(out, teacher, in);
  r.loss = r.task_loss;
  if (same_depth_distill_) {
    r.layer = share * hidden_distill_loss(out.hidden_states, teacher.hidden_states,
                                          core::to_device(local.attention_mask, model_.device()));
    r.loss = r.loss + gc_.distill_hidden * r.layer;
  }
  if (!layer_distill_) return;
  r.layer = layer_distill_->loss(out.hidden_states, teacher.hidden_states,
                                 core::to_device(local.attention_mask, model_.device()),
                                 alive_layers(in.head_mask, in.layer_mask), nullptr, [](torch::Tensor& t) {
                                   if (core::dist::active()) core::dist::all_reduce_sum(t, "the layer distillation");
                                 });
  r.loss = r.loss + gc_.distill_hidden * r.layer;
}

void Loop::train_step(const core::Batch& b, Optimizer& opt, core::dist::GradientReducer& reducer, GraphSteps* graphs) {
  auto start = std::chrono::steady_clock::now();
  const bool phase1 = s_.phase == 1;
  opt.set_step(s_.phase_step);
  StepLoss l;
  torch::Tensor norm, expected, penalty;
  if (graphs && graphs->fits(b)) {
    // A fixed structure's step (make_graphs): no gates' penalty, one process.
    const StepOutputs o = graphs->run(b);
    l.loss = o[0], l.task_loss = o[1], l.kd = o[2], l.layer = o[3], norm = o[4];
    l.distilling = l.kd.defined();
  } else {
    opt.zero_grad();
    l = batch_loss(b);
    if (gates_ && phase1) {
      // log α is the same on every rank (its gradient is all-reduced), so is the expectation: each rank adds
      // its 1/world of the penalty.
      expected = target_mode_ ? constrained() : gates_->heads().expected_open();
      penalty = target_mode_ ? controller_->penalty(expected, s_.phase_step) : gates_->heads().l0_penalty();
      l.loss = l.loss + penalty / core::dist::world();
    }
    reducer.start_step();
    if (l.loss.requires_grad()) l.loss.backward();  // gradient buckets are summed over ranks as they fill
    reducer.finish();
    norm = opt.step();
  }
  StepRow row;
  row.phase = s_.phase, row.lr = opt.lr();
  row.distilling = l.distilling, row.distilling_hidden = l.layer.defined();
  row.gated = gates_ && phase1, row.controlled = target_mode_ && phase1;
  torch::Tensor lambda;
  if (row.controlled) {
    controller_->update(expected, s_.phase_step);  // on the device: nothing read here
    row.target = controller_->target(s_.phase_step);
    lambda = controller_->multipliers();
  }
  examples_done_ += b.input_ids.size(0);
  ++steps_this_process_;
  ++s_.step;
  ++s_.phase_step;
  // Under the step just finished, as every scalar of it (a resume drops the log's rows past its state's step).
  row.step = s_.step, row.epoch = s_.epoch;
  pending_.add(row, {l.loss, l.task_loss, l.kd, l.layer},
               {norm, expected, penalty, lambda.defined() ? lambda[0] : lambda, lambda.defined() ? lambda[1] : lambda},
               model_.device());
  train_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What a captured step does, with the same loss as the eager step's; the fixed structure's masks are device copies
// (a graph replays a copy from the host with whatever that host memory holds then).
StepOutputs Loop::graph_step(const core::Batch& fixed, Optimizer& opt) {
  opt.zero_grad();
  in_graph_ = true;
  StepLoss l;
  try {
    l = batch_loss(fixed);
  } catch (...) {
    in_graph_ = false;
    throw;
  }
  in_graph_ = false;
  if (l.loss.requires_grad()) l.loss.backward();
  const torch::Tensor norm = opt.step();
  return {l.loss, l.task_loss, l.kd, l.layer, norm};
}

// Why this phase's steps cannot be captured (empty: they can). A captured step must keep its shapes and structure
// and read nothing on the host that changes between steps.
std::string Loop::eager_reason(const Optimizer& opt) const {
  if (core::dist::world() > 1) return "a data-parallel run (its all-reduce sums host memory)";
  if (!CapturedStep::available()) return "this LibTorch has no CUDA graphs";
  if (!opt.fused()) return "the optimiser's step reads the gradient norm to the host here (LibTorch < 2.4)";
  if (data_.objective) return "an objective's loss (the caller's function, not checked for host reads)";
  if (gates_ && !fixed_.heads.defined()) return "the gates' phase (the structure is sampled every step)";
  if (distils() && extra_rows()) return "prune.distill_tasks' rows (a step's row count and length vary)";
  if (fixed_.layers.defined() && !fixed_.layers.eq(1).all().item<bool>())
    return "a fixed layer mask (the model reads which layers to skip on the host)";
  return {};
}

std::unique_ptr<GraphSteps> Loop::make_graphs(Optimizer& opt) {
  if (!tc_.cuda_graph || !model_.device().is_cuda()) return nullptr;  // the CPU: logged once in run()
  const std::string why = eager_reason(opt);
  if (!why.empty()) {
    core::log_info("train", "train.cuda_graph: phase " + std::to_string(s_.phase) + " runs eagerly: " + why);
    return nullptr;
  }
  // The fixed structure on the device, each mask left out where it is all ones (as the model leaves it out).
  auto on_device = [&](const torch::Tensor& m) {
    return !m.defined() || m.eq(1).all().item<bool>() ? torch::Tensor() : m.to(model_.device());
  };
  graph_fixed_ = {on_device(fixed_.heads), on_device(fixed_.neurons), {}, on_device(fixed_.hidden)};
  return std::make_unique<GraphSteps>(
      model_.device(), core::length_buckets(core::longest_length(*data_.train)), tc_.batch_size,
      [this, &opt](const core::Batch& fixed) { return graph_step(fixed, opt); }, [&opt] { opt.zero_grad(); });
}

// The steps since the last read into the history and metrics log, and the progress line: one host read (the time it
// waits for the device counts as training).
void Loop::read_steps(core::Progress& progress) {
  if (pending_.empty()) return;
  auto start = std::chrono::steady_clock::now();
  const std::vector<StepRow> rows =
      pending_.take([](torch::Tensor& t) { core::dist::all_reduce_sum(t, "the training loss"); });
  train_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const StepRow& r : rows) {
    auto record_here = [&](const std::string& key, double value) { record_at(r.step, r.epoch, key, value); };
    if (r.distilling_hidden) record_here("train/distill_hidden", r.distill_hidden);
    record_here("train/step", static_cast<double>(r.step));
    record_here("train/phase", r.phase);
    record_here("train/loss", r.loss);
    record_here("train/task_loss", r.task_loss);
    record_here("train/lr", r.lr);
    record_here("train/grad_norm", r.grad_norm);
    if (r.distilling) record_here("train/distill", r.distill);
    if (r.gated) {
      record_here("train/penalty", r.penalty);
      record_here(budget_mode_ ? "train/expected_percent" : "train/expected_open", r.expected);
      if (r.controlled) {
        record_here("train/target", r.target);
        record_here("train/lambda1", r.lambda1);
        record_here("train/lambda2", r.lambda2);
      }
    }
  }
  const StepRow& r = rows.back();
  const double ex_s = train_seconds_ > 0 ? examples_done_ / train_seconds_ : 0;
  progress.update(r.step, "phase " + std::to_string(r.phase) + "  loss " + core::format_number("%.4f", r.loss) +
                              "  lr " + core::format_number("%.2e", r.lr) + "  " + core::format_number("%.1f", ex_s) +
                              " ex/s" +
                              (r.gated ? (budget_mode_ ? "  kept " + core::format_number("%.1f%%", r.expected)
                                                       : "  open " + core::format_number("%.1f", r.expected))
                                       : ""));
}

}  // namespace hp::train::detail
