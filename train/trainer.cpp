// The training loop (see train/trainer.h).
#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <torch/utils.h>

#include "core/io/checkpoint.h"  // save_bert, load_bert
#include "core/kernels/device.h"  // parse_device
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"  // Bf16Autocast
#include "core/dist/distributed.h"
#include "core/base/errors.h"  // ConfigError
#include "core/base/strings.h"  // format_number
#include "core/base/files.h"  // write_file_atomic
#include "core/base/log.h"
#include "core/io/tensor_io.h"  // write_hdf5
#include "eval/evaluator.h"
#include "eval/flops.h"  // unit_costs
#include "eval/results_schema.h"  // the gate trajectories
#include "gates/structure_gates.h"
#include "gates/target_controller.h"
#include "train/distill.h"
#include "train/optim.h"
#include "train/pending_steps.h"
#include "train/loop.h"
#include "train/run_state.h"

namespace hp::train {

namespace fs = std::filesystem;

namespace detail {

Loop::Loop(const core::TrainConfig& tc, const core::GateConfig& gc, const core::RunConfig& rc, core::Bert& model,
           const TrainData& data, const TrainOptions& opts)
    : tc_(tc), gc_(gc), rc_(rc), model_(model), data_(data), opts_(opts) {
  const auto& mc = model.config();
  L_ = mc.num_hidden_layers;
  H_ = mc.max_heads();
  budget_mode_ = gc.target_flops > 0 || gc.target_params > 0;
  target_mode_ = gc.target_heads > 0 || budget_mode_;
  const long n = static_cast<long>(data.train->size());
  steps_per_epoch_ = (n + tc.batch_size - 1) / tc.batch_size;
  phase_total_[1] = tc.max_steps > 0 ? tc.max_steps : tc.epochs * steps_per_epoch_;
  const long finetune = opts.finetune_steps > 0 ? opts.finetune_steps : gc.finetune_epochs * steps_per_epoch_;
  phase_total_[2] = target_mode_ && gc.finetune_after ? finetune : 0;
  if (budget_mode_) {
    // One budget with the retraining-free search: FLOPs at the evaluation split's mean length, or parameters.
    costs_ = eval::unit_costs(mc, gc.target_params > 0, core::mean_length(*data.eval));
    total_cost_ = eval::total_cost(mc, costs_);
    const double target = gc.target_params > 0 ? gc.target_params : gc.target_flops;
    gates_ = std::make_unique<gates::StructureGates>(gc, L_, H_, mc.intermediate_size, mc.hidden_size);
    gates_->to(model.device());
    // The target falls from where the gates start (P(open) of a unit times its sublayer's: 89% of the cost at the
    // default log α 2.0, β 0.33), not from 100%, so that the multipliers do not first push the gates open.
    const double start = constrained().item<double>();
    controller_ = std::make_unique<gates::TargetController>(gc, start, 100.0 * target, phase_total_[1]);
  } else if (gc.enabled || target_mode_) {
    gates_ = std::make_unique<gates::StructureGates>(gc, L_, H_);
    gates_->to(model.device());
    if (target_mode_) controller_ = std::make_unique<gates::TargetController>(gc, L_ * H_, phase_total_[1]);
  }
  core::BatchOptions bo;
  bo.batch_size = data.eval_batch_size;
  bo.pad_id = data.pad_id;
  eval_batches_ = core::make_batches(*data.eval, bo);
  for (const auto& ids : data.train->ids) train_lengths_.push_back(ids.size());
  if (budget_mode_ && opts.teacher && (gc.distill || data.objective) && gc.distill_hidden > 0)
    layer_distill_ = std::make_unique<LayerDistill>(mc.hidden_size, L_), layer_distill_->to(model.device());
  same_depth_distill_ = !gates_ && opts.teacher && (gc.distill || data.objective) && gc.distill_hidden > 0;
  if (gc.distill_augment > 0 && opts.teacher && gc.distill && !data.objective) {
    if (opts.tokenizer_dir.empty())
      throw ConfigError("gates.distill_augment = " + core::format_number("%g", gc.distill_augment) +
                        " swaps words, which needs the model's tokenizer; this run has none: set it to 0");
    swap_ = std::make_unique<WordSwap>(core::Tokenizer::from_model_dir(opts.tokenizer_dir),
                                       opts.teacher->parameters().at("embeddings.word_embeddings.weight"), *data.train);
  }
  if (!opts.fixed_keep.empty()) {
    HP_CHECK(!gates_, "TrainOptions::fixed_keep excludes gates");
    fixed_.heads = eval::head_mask_tensor(opts.fixed_keep);
  }
}

core::StructureMask Loop::target_structure() const {
  if (budget_mode_) {
    const double target = gc_.target_params > 0 ? gc_.target_params : gc_.target_flops;
    return gates_->keep_within(costs_, target * total_cost_);
  }
  return {gates_->heads().top_n(gc_.target_heads), {}};
}

gates::GateMasks Loop::eval_mask() const {
  if (fixed_.heads.defined()) return fixed_;
  if (!gates_) return {};
  torch::NoGradGuard no_grad;
  if (target_mode_) {
    const core::StructureMask keep = target_structure();
    return {eval::head_mask_tensor(keep.heads),
            keep.neurons.empty() ? torch::Tensor() : eval::neuron_mask_tensor(keep.neurons),
            eval::layer_mask_tensor(keep.layers), eval::hidden_mask_tensor(keep.hidden)};
  }
  return {gates_->deterministic().heads.detach(), {}};
}

void Loop::set_trainable(bool encoder) {
  // DistilBERT's sinusoidal positions are fixed, as in HF (create_sinusoidal_embeddings: requires_grad False).
  const bool fixed_positions = model_.config().sinusoidal_pos_embds;
  for (auto& [name, t] : model_.mutable_parameters())
    t.requires_grad_(encoder && !(fixed_positions && name == "embeddings.position_embeddings.weight"));
}

void Loop::save_best(const torch::Tensor& log_alpha) {
  core::shared_write([&] { save_best_here(log_alpha); });
}

void Loop::save_best_here(const torch::Tensor& log_alpha) {
  // Staged and swapped in one step: a kill leaves the previous best/ whole, never none (the state may already
  // record this evaluation as the best, and no later one need beat it).
  core::StagedFolder(opts_.run_dir + "/best").write([&](const std::string& dir) {
    core::write_bert_files(model_, dir, opts_.tokenizer_dir);
    if (gates_) {
      core::TensorMap g;
      for (const auto& [name, t] : gates_->named()) g[name] = t.detach();
      if (log_alpha.defined()) g["log_alpha"] = log_alpha;  // the heads' at this evaluation
      core::write_safetensors(dir + "/gates.safetensors", g);
    }
  });
}

void Loop::evaluate_and_keep_best() {
  model_.set_training(false);
  const gates::GateMasks mask = eval_mask();
  const eval::Masks masks{mask.heads, mask.neurons, mask.layers, mask.hidden};
  std::map<std::string, double> metrics;
  double per_s = 0;
  if (data_.objective) {
    metrics = data_.objective->evaluate(model_, masks);
  } else {
    auto r = eval::evaluate(model_, *data_.task, *data_.eval, eval_batches_, masks);
    metrics = std::move(r.metrics), per_s = r.examples_per_s;
  }
  model_.set_training(true);
  record("eval/step", static_cast<double>(s_.step));
  for (const auto& [name, value] : metrics) record("eval/" + name, value);
  if (!data_.objective) record("eval/examples_per_s", per_s);
  torch::Tensor la;
  if (gates_) {
    torch::NoGradGuard no_grad;
    la = gates_->heads().log_alpha().detach().clone();
    namespace res = eval::results;
    auto& traj = s_.history.trajectories;
    traj[res::prefix(res::Dataset::kGateLogAlpha)].push_back(la);
    traj[res::prefix(res::Dataset::kGatePOpen)].push_back(gates::l0_expected(la, gc_.beta, gates_->heads().limits()));
    if (gates_->has_neurons())
      traj[res::prefix(res::Dataset::kGateNeuronPOpen)].push_back(gates_->neuron_p_open_by_layer());
    if (gates_->has_sublayers()) {
      traj[res::prefix(res::Dataset::kGateMhaPOpen)].push_back(gates_->mha_p_open());
      traj[res::prefix(res::Dataset::kGateFfnPOpen)].push_back(gates_->ffn_p_open());
    }
    if (gates_->has_layers()) traj[res::prefix(res::Dataset::kGateLayerPOpen)].push_back(gates_->layer_p_open());
    if (gates_->has_hidden()) traj[res::prefix(res::Dataset::kGateHiddenPOpen)].push_back(gates_->hidden_p_open());
  }
  const double m = metrics.at(metric());
  core::log_info("train", "step " + std::to_string(s_.step) + " " + metric() + " " + core::format_number("%.4f", m));
  // Phase 1 of target mode has no fixed head set yet, so its checkpoints are not candidates.
  const bool candidate = !target_mode_ || s_.phase == 2;
  if (candidate && (!s_.has_best || m > s_.best_metric)) {
    s_.has_best = true;
    s_.best_metric = m;
    s_.best_step = s_.step;
    if (gates_) s_.best_log_alpha = la;
    save_best(la);
  }
}

void Loop::save_state(const Optimizer& opt) {
  s_.rng_state = cpu_rng_state();
  s_.device_rng_state = core::device_rng_state(model_.device());
  s_.gates.clear();
  if (gates_)
    for (const auto& [name, t] : gates_->named()) s_.gates[name] = t.detach().clone();
  if (layer_distill_)
    for (const auto& [name, t] : layer_distill_->parameters()) s_.gates[name] = t.detach().clone();
  if (controller_) s_.controller_state = controller_->state();
  s_.train_seconds = earlier_seconds_ + train_seconds_;
  log_->flush();
  save_run_state(opts_.run_dir, s_, model_, opt);
}

bool Loop::run_phase(int phase, bool resumed_here) {
  const bool phase1 = phase == 1;
  set_trainable(!(phase1 && gc_.freeze_encoder));
  const std::vector<torch::Tensor> gate_params = gates_ && phase1 ? gates_->parameters() : std::vector<torch::Tensor>{};
  std::map<std::string, torch::Tensor> params = model_.parameters();  // + the layer-distillation map, if any
  if (layer_distill_) params.insert(layer_distill_->parameters().begin(), layer_distill_->parameters().end());
  Optimizer opt(tc_, params, gate_params, gc_.lr, phase_total_[phase]);
  if (resumed_here && s_.phase_step > 0) opt.load(optimizer_file(opts_.run_dir));
  std::vector<torch::Tensor> trained;
  for (auto& [name, t] : params) trained.push_back(t);
  trained.insert(trained.end(), gate_params.begin(), gate_params.end());
  core::dist::GradientReducer reducer(trained);  // data-parallel: gradients summed over ranks during backward
  const std::unique_ptr<GraphSteps> graphs = make_graphs(opt);  // train.cuda_graph on a GPU; else null
  if (resumed_here) set_cpu_rng_state(s_.rng_state), core::set_device_rng_state(model_.device(), s_.device_rng_state);
  model_.set_training(true);
  // Steps of earlier phases (and resumed ones) count as done, not towards this phase's rate.
  core::Progress progress("train", phase_total_[1] + phase_total_[2], "steps", s_.step);
  core::BatchOptions bo;
  bo.batch_size = tc_.batch_size;
  bo.sort_by_length = false;  // random batches, each padded to its longest member
  bo.pad_id = data_.pad_id;
  if (graphs) bo.length_buckets = graphs->buckets();  // a few shapes, a graph each
  auto count_graphs = [&] {
    if (graphs) graphs_captured_ += graphs->captured(), graph_replays_ += graphs->replays();
  };
  while (s_.phase_step < phase_total_[phase]) {
    auto order = epoch_order(data_.train->size(), rc_.seed, phase, s_.epoch);
    if (tc_.group_by_length) order = length_grouped(order, train_lengths_, tc_.batch_size);
    auto batches = core::make_batches(*data_.train, bo, std::move(order));
    const long nb = static_cast<long>(batches.size());
    for (long i = s_.batch_in_epoch; i < nb && s_.phase_step < phase_total_[phase]; ++i) {
      {
        std::optional<core::HostWaits> no_waits;
        if (opts_.forbid_host_waits) no_waits.emplace(core::HostWaits::kForbidden);
        train_step(distils() ? augmented(batches[i]) : batches[i], opt, reducer, graphs.get());
      }
      s_.batch_in_epoch = i + 1;
      const bool epoch_end = i + 1 == nb, done = s_.phase_step >= phase_total_[phase];
      const bool eval_due = tc_.eval_every > 0 ? s_.phase_step % tc_.eval_every == 0 : epoch_end;
      if (epoch_end) ++s_.epoch, s_.batch_in_epoch = 0;  // the state points at the next batch
      if (pending_.due() || eval_due || done) read_steps(progress);  // the rows before the evaluation's
      bool evaluated = false;
      if (eval_due || done) evaluate_and_keep_best(), evaluated = true;
      const bool save_due = tc_.save_every > 0 ? s_.phase_step % tc_.save_every == 0 : evaluated;
      const bool stop =
          (opts_.stop_after_steps > 0 && s_.step >= opts_.stop_after_steps) || core::dist::stop_requested(opts_.stop);
      if ((save_due || stop) && graphs) opt.set_step_count(s_.phase_step);  // the replays advanced only the GPU's
      if (save_due || stop) read_steps(progress), save_state(opt);
      if (stop) {
        count_graphs();
        return false;
      }
      if (epoch_end) break;
    }
  }
  progress.finish();
  count_graphs();
  return true;
}

core::StructureMask Loop::final_keep() const {
  if (!opts_.fixed_keep.empty()) return {opts_.fixed_keep, {}};
  if (!gates_) return {core::HeadSet(L_, std::vector<bool>(H_, true)), {}};
  if (target_mode_) return target_structure();
  // Plain L0: the heads whose deterministic gate at the best evaluation is nonzero.
  torch::Tensor la = s_.best_log_alpha.defined() ? s_.best_log_alpha : gates_->heads().log_alpha().detach();
  auto g = gates::hard_concrete_mean(la, gates_->heads().limits()).contiguous();
  core::HeadSet keep(L_, std::vector<bool>(H_, false));
  for (int l = 0; l < L_; ++l)
    for (int h = 0; h < H_; ++h) keep[l][h] = g[l][h].item<float>() > 0.f;
  return {keep, {}};
}

// The state to go on from (RUN_DIR/state), or a fresh start; true when resumed.
bool Loop::start_or_resume() {
  if (!opts_.resume) {
    torch::manual_seed(rc_.seed);  // dropout and gate noise; the data order has its own seeds
    s_.config_hash = config_hash(opts_.config_yaml);
    s_.config_yaml = opts_.config_yaml;
    return false;
  }
  s_ = read_run_state(opts_.run_dir, model_);
  earlier_seconds_ = s_.train_seconds;
  check_resume_config(opts_.run_dir, s_, opts_.config_yaml);
  if (s_.processes != core::dist::world())
    core::log_info("train", "the state was saved by " + std::to_string(s_.processes) +
                                " process(es) and resumes with " + std::to_string(core::dist::world()) +
                                ": the global batch (train.batch_size) and its "
                                "examples stay the same, so the run goes on as it was (equal up to float summation "
                                "order; with dropout, other dropout masks)");
  torch::NoGradGuard no_grad;
  if (gates_ && !s_.gates.empty()) gates_->load(s_.gates);
  if (layer_distill_)
    for (const auto& [name, t] : layer_distill_->parameters())
      if (s_.gates.count(name)) t.copy_(s_.gates.at(name));
  if (controller_ && s_.controller_state.defined()) controller_->load_state(s_.controller_state);
  core::log_info("train", "resuming " + opts_.run_dir + " at step " + std::to_string(s_.step) + " (phase " +
                              std::to_string(s_.phase) + ", epoch " + std::to_string(s_.epoch + 1) + ")");
  return true;
}

// Phase 2 begins: the target structure fixed from the gates as phase 1 left them.
void Loop::fix_structure() {
  if (s_.phase != 2) s_.phase = 2, s_.phase_step = 0, s_.epoch = 0, s_.batch_in_epoch = 0, s_.has_best = false;
  fixed_ = eval_mask();
  const core::StructureMask keep = target_structure();
  std::string what = "masked " + core::format_head_mask(keep.heads);
  if (budget_mode_) {  // the neuron spec runs to thousands of numbers: counts per layer here, the spec in head_mask.txt
    what = core::format_number("%.2f%% of the encoder's cost; ", 100 * core::structure_cost(keep, costs_) / total_cost_) +
           core::describe_counts(keep);
  }
  core::log_info("train", "phase 2: fine-tuning with " + std::to_string(core::count_kept(keep.heads)) + " heads" +
                              (budget_mode_ ? " and " + std::to_string(core::count_kept(keep.neurons)) + " FFN neurons"
                                            : std::string()) +
                              " fixed (" + what + ")");
}

TrainResult Loop::run() {
  core::shared_write([&] { fs::create_directories(opts_.run_dir); });
  const bool resumed = start_or_resume();
  if (tc_.cuda_graph && !model_.device().is_cuda())
    core::log_info("train", "train.cuda_graph is ignored on " + model_.device().str() + ": CUDA graphs need a GPU");
  log_ = std::make_unique<MetricsLog>(opts_.run_dir + "/metrics.csv", resumed ? s_.step : -1);
  const int last_phase = phase_total_[2] > 0 ? 2 : 1, first_phase = s_.phase;
  for (int phase = first_phase; phase <= last_phase; ++phase) {
    if (phase == 2) fix_structure();
    const bool resumed_here = resumed && phase == first_phase;
    if (!run_phase(phase, resumed_here)) return interrupted_result();
  }
  // Target mode without fine-tuning: the final model with its exactly-N heads is the result.
  if (target_mode_ && last_phase == 1) {
    s_.has_best = true;
    s_.best_step = s_.step;
    s_.best_metric = s_.history.series.at("eval/" + metric()).back();
    save_best(gates_->heads().log_alpha().detach().clone());
  }
  return finish();
}

// The result: the final structure, RUN_DIR/best re-read and evaluated under it, head_mask.txt and run.h5.
TrainResult Loop::finish() {
  TrainResult r;
  r.steps = s_.step;
  r.steps_per_epoch = steps_per_epoch_;
  r.metric = metric();
  r.best_metric = s_.best_metric;
  r.best_step = s_.best_step;
  const core::StructureMask keep = final_keep();
  r.final_keep = keep.heads;
  r.final_neurons = keep.neurons;
  r.final_layers = keep.layers;
  r.final_hidden = keep.hidden;
  r.heads_kept = core::count_kept(r.final_keep);
  r.heads_total = L_ * H_;
  if (budget_mode_) {
    r.budget_unit = gc_.target_params > 0 ? "parameters" : "FLOPs";
    r.budget_target = gc_.target_params > 0 ? gc_.target_params : gc_.target_flops;
    r.budget_kept = core::structure_cost(keep, costs_) / total_cost_;
    r.unit_costs = costs_;
  }
  if (gates_) r.log_alpha = gates_->heads().log_alpha().detach().cpu().clone();
  r.train_seconds = earlier_seconds_ + train_seconds_;
  r.steps_per_s = train_seconds_ > 0 ? steps_this_process_ / train_seconds_ : 0;
  r.host_reads = pending_.reads();
  r.graphs_captured = graphs_captured_, r.graph_replays = graph_replays_;
  r.examples_per_s = train_seconds_ > 0 ? examples_done_ / train_seconds_ : 0;

  core::LoadOptions lo;
  lo.num_labels = model_.config().num_labels;
  const core::Bert best = core::load_bert(opts_.run_dir + "/best", lo).to(model_.device());
  eval::Masks masks = eval::masks_of(keep);
  if (r.heads_kept == r.heads_total) masks.heads = torch::Tensor();
  r.final_metrics = evaluate(best, masks);
  if (gates_) core::write_file_atomic(opts_.run_dir + "/head_mask.txt", core::format_mask(keep) + "\n");
  core::write_hdf5(opts_.run_dir + "/run.h5", s_.history.to_tensors(),
                   {{"seed", std::to_string(rc_.seed)},
                    {"config_hash", s_.config_hash},
                    {"task", data_.task->name},
                    {"metric", r.metric}});
  return r;
}

}  // namespace detail

void check_bf16_training(const std::string& precision, const torch::Device& device) {
  namespace isa = core::isa;
  if (precision != "bf16" || !device.is_cpu() || isa::usable(isa::Level::kAvx512)) return;
  const std::string below = isa::cap_from_environment()
                                ? "HEADPRUNE_MAX_ISA=" + std::string(isa::name(isa::cap())) + " allows none"
                                : "this CPU has none";
  throw ConfigError("train.precision = bf16 on the CPU needs AVX-512 (oneDNN's bf16 products: native with "
                    "AVX512_BF16 or AMX, emulated on AVX-512), and " + below +
                    "; train at fp32 (train.precision: fp32, or auto, which measures the faster)");
}

TrainResult train_model(const core::TrainConfig& train, const core::GateConfig& gates, const core::RunConfig& run,
                        core::Bert& model, const TrainData& data, const TrainOptions& opts) {
  HP_CHECK(data.task && data.train && data.eval, "train_model needs a task, a train set and an eval set");
  validate_train_config(train, gates, model.config().num_hidden_layers * model.config().max_heads());
  if (gates.target_flops > 0 || gates.target_params > 0) check_budget_model(gates, model.config());
  if (data.train->size() == 0) throw InputError("train_model: the train split is empty; check data.task and data.root");
  HP_CHECK(!data.objective || opts.teacher, "train_model: an objective needs the teacher");
  if (!data.objective && !data.eval->has_labels)
    throw ConfigError("train.eval_split = " + train.eval_split + " has no labels; use a labelled split such as dev");
  const torch::Device device = core::parse_device(run.device);
  check_bf16_training(train.precision, device);
  if (device == model.device()) return detail::Loop(train, gates, run, model, data, opts).run();
  // On another device (a GPU): a copy of the model (and of the teacher) trains there; its weights come back.
  core::Bert there = model.to(device);
  std::optional<core::Bert> teacher;
  TrainOptions o = opts;
  if (opts.teacher) teacher.emplace(opts.teacher->to(device)), o.teacher = &*teacher;
  core::log_info("train", "training on " + device.str() + " (" + core::gpu_summary() + ")");
  TrainResult r = detail::Loop(train, gates, run, there, data, o).run();
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : model.mutable_parameters()) {
    const torch::Tensor& trained = there.parameters().at(name);
    t.copy_(trained);
    t.requires_grad_(trained.requires_grad());
  }
  return r;
}

}  // namespace hp::train
