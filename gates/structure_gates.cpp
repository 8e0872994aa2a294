#include "gates/structure_gates.h"

#include <algorithm>
#include <numeric>
#include <torch/utils.h>

#include "core/base/errors.h"  // ConfigError, CheckpointError, HP_CHECK

namespace hp::gates {

void validate_structure_gates(const core::GateConfig& cfg, int neurons) {
  if (cfg.neuron_group < 1 || neurons % cfg.neuron_group != 0)
    throw_bad_value("gates.neuron_group", cfg.neuron_group, "must divide the FFN width " + std::to_string(neurons),
                    "use 1 (a gate per neuron) or a divisor such as 8 or 64");
  if (cfg.per_example)
    throw ConfigError(
        "gates.per_example = true with a FLOPs or parameter target: neuron and sublayer gates are drawn "
        "once per batch; set gates.per_example: false");
}

StructureGates::StructureGates(const core::GateConfig& cfg, int layers, int heads, int neurons, int hidden)
    : cfg_(cfg), heads_(cfg, layers, heads), neurons_(neurons), group_(cfg.neuron_group) {
  if (neurons <= 0) return;
  validate_structure_gates(cfg, neurons);
  neuron_la_ = torch::full({layers, neurons / group_}, cfg.log_alpha_init, torch::kFloat32).requires_grad_(true);
  if (cfg.sublayer_gates) {
    mha_la_ = torch::full({layers}, cfg.log_alpha_init, torch::kFloat32).requires_grad_(true);
    ffn_la_ = torch::full({layers}, cfg.log_alpha_init, torch::kFloat32).requires_grad_(true);
  }
  if (cfg.layer_gates) layer_la_ = torch::full({layers}, cfg.log_alpha_init, torch::kFloat32).requires_grad_(true);
  if (cfg.hidden_gates && hidden > 0)
    hidden_la_ = torch::full({hidden}, cfg.log_alpha_init, torch::kFloat32).requires_grad_(true);
}

std::vector<torch::Tensor> StructureGates::parameters() const {
  std::vector<torch::Tensor> p = {heads_.log_alpha()};
  for (const auto& t : {neuron_la_, mha_la_, ffn_la_, layer_la_, hidden_la_})
    if (t.defined()) p.push_back(t);
  return p;
}

std::map<std::string, torch::Tensor> StructureGates::named() const {
  std::map<std::string, torch::Tensor> m = {{"log_alpha", heads_.log_alpha()}};
  if (neuron_la_.defined()) m["neuron_log_alpha"] = neuron_la_;
  if (mha_la_.defined()) m["mha_log_alpha"] = mha_la_, m["ffn_log_alpha"] = ffn_la_;
  if (layer_la_.defined()) m["layer_log_alpha"] = layer_la_;
  if (hidden_la_.defined()) m["hidden_log_alpha"] = hidden_la_;
  return m;
}

void StructureGates::load(const std::map<std::string, torch::Tensor>& saved) {
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : named()) {
    const auto it = saved.find(name);
    if (it == saved.end() || !it->second.sizes().equals(t.sizes()))
      throw CheckpointError("gate parameters: '" + name + "' is " +
                            (it == saved.end() ? std::string("missing") : "of another shape") +
                            "; resume or read a run made with the same gate settings (gates.neuron_group, "
                            "gates.sublayer_gates, gates.layer_gates, gates.hidden_gates, the target)");
    t.copy_(it->second);
  }
}

void StructureGates::to(const torch::Device& device) {
  heads_.to(device);
  for (torch::Tensor* t : {&neuron_la_, &mha_la_, &ffn_la_, &layer_la_, &hidden_la_})
    if (t->defined() && t->device() != device) *t = t->detach().to(device).requires_grad_(true);
}

torch::Tensor StructureGates::p_open(const torch::Tensor& la) const {
  return l0_expected(la, cfg_.beta, heads_.limits());
}

namespace {

// Fine gates [L, U] times coarse gates [L] (undefined = 1), the fine ones repeated g times along U.
torch::Tensor combine(torch::Tensor fine, const torch::Tensor& coarse, int group) {
  if (group > 1) fine = fine.repeat_interleave(group, -1);
  if (!coarse.defined()) return fine;
  return fine * (fine.dim() == 3 ? coarse.view({1, -1, 1}) : coarse.unsqueeze(1));
}

}  // namespace

GateMasks StructureGates::sample(long batch) const {
  GateMasks m;
  m.heads = heads_.sample(batch);
  if (!has_neurons()) return m;
  const auto opts = neuron_la_.options().requires_grad(false);
  const StretchLimits lim = heads_.limits();
  m.neurons = hard_concrete_sample(neuron_la_, cfg_.beta, lim, hard_concrete_noise(neuron_la_.sizes(), opts));
  torch::Tensor mha, ffn;
  if (has_sublayers()) {
    mha = hard_concrete_sample(mha_la_, cfg_.beta, lim, hard_concrete_noise(mha_la_.sizes(), opts));
    ffn = hard_concrete_sample(ffn_la_, cfg_.beta, lim, hard_concrete_noise(ffn_la_.sizes(), opts));
  }
  m.heads = combine(m.heads, mha, 1);
  m.neurons = combine(m.neurons, ffn, group_);
  if (has_layers()) m.layers = hard_concrete_sample(layer_la_, cfg_.beta, lim, hard_concrete_noise(layer_la_.sizes(), opts));
  if (has_hidden())
    m.hidden = hard_concrete_sample(hidden_la_, cfg_.beta, lim, hard_concrete_noise(hidden_la_.sizes(), opts));
  return m;
}

GateMasks StructureGates::deterministic() const {
  GateMasks m;
  m.heads = heads_.deterministic();
  if (!has_neurons()) return m;
  const StretchLimits lim = heads_.limits();
  torch::Tensor mha, ffn;
  if (has_sublayers()) mha = hard_concrete_mean(mha_la_, lim), ffn = hard_concrete_mean(ffn_la_, lim);
  m.heads = combine(m.heads, mha, 1);
  m.neurons = combine(hard_concrete_mean(neuron_la_, lim), ffn, group_);
  if (has_layers()) m.layers = hard_concrete_mean(layer_la_, lim);
  if (has_hidden()) m.hidden = hard_concrete_mean(hidden_la_, lim);
  return m;
}

torch::Tensor StructureGates::expected_cost(const core::UnitCosts& costs) const {
  const int L = layers();
  torch::Tensor heads = p_open(heads_.log_alpha()).to(torch::kFloat64).sum(1);  // [L] expected open heads
  torch::Tensor neurons =
      has_neurons() ? p_open(neuron_la_).to(torch::kFloat64).sum(1) * group_ : torch::zeros({L}, torch::kFloat64);
  if (has_sublayers()) {
    heads = heads * p_open(mha_la_).to(torch::kFloat64);
    neurons = neurons * p_open(ffn_la_).to(torch::kFloat64);
  }
  if (has_layers()) {
    const auto p_layer = p_open(layer_la_).to(torch::kFloat64);
    heads = heads * p_layer, neurons = neurons * p_layer;
  }
  if (!has_hidden()) return costs.head * heads.sum() + costs.neuron * neurons.sum();
  // The costs at the expected fraction of hidden channels open (UnitCosts::at_hidden, differentiable in it).
  const torch::Tensor r = p_open(hidden_la_).to(torch::kFloat64).mean();
  return (costs.head - costs.head_hidden * (1 - r)) * heads.sum() +
         (costs.neuron - costs.neuron_hidden * (1 - r)) * neurons.sum();
}

std::vector<bool> StructureGates::keep_hidden() const {
  if (!has_hidden()) return {};
  if (!hidden_la_.device().is_cpu()) return on_cpu().keep_hidden();  // the reads below are the host's
  torch::NoGradGuard no_grad;
  const torch::Tensor p = p_open(hidden_la_.detach()).to(torch::kFloat64).contiguous();
  const long D = p.size(0);
  const long kept = std::clamp(std::lround(p.sum().item<double>()), 1L, D);
  std::vector<long> order(static_cast<size_t>(D));
  std::iota(order.begin(), order.end(), 0L);
  const double* pp = p.data_ptr<double>();
  std::stable_sort(order.begin(), order.end(), [&](long a, long b) { return pp[a] > pp[b]; });
  std::vector<bool> keep(static_cast<size_t>(D), false);
  for (long i = 0; i < kept; ++i) keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  return kept < D ? keep : std::vector<bool>{};
}

core::StructureMask StructureGates::keep_within(const core::UnitCosts& full_costs, double budget) const {
  if (!heads_.log_alpha().device().is_cpu()) return on_cpu().keep_within(full_costs, budget);
  torch::NoGradGuard no_grad;
  const std::vector<bool> hidden = keep_hidden();
  const core::UnitCosts costs = full_costs.at_hidden(core::hidden_fraction(hidden));
  const int L = layers(), H = heads_.heads();
  auto f64 = [&](const torch::Tensor& la) { return p_open(la.detach()).to(torch::kFloat64).contiguous(); };
  const torch::Tensor ph = f64(heads_.log_alpha());
  const torch::Tensor pn = has_neurons() ? f64(neuron_la_) : torch::Tensor();
  // A layer whose test-time gate is 0 is removed; the others' units are scored with P(layer) too.
  const torch::Tensor pl = has_layers() ? f64(layer_la_) : torch::ones({L}, torch::kFloat64);
  const torch::Tensor pm = ((has_sublayers() ? f64(mha_la_) : torch::ones({L}, torch::kFloat64)) * pl).contiguous();
  const torch::Tensor pf = ((has_sublayers() ? f64(ffn_la_) : torch::ones({L}, torch::kFloat64)) * pl).contiguous();
  std::vector<bool> layer_open(L, true);
  if (has_layers()) {
    const auto closed = (hard_concrete_mean(layer_la_.detach(), heads_.limits()) == 0).contiguous();
    for (int l = 0; l < L; ++l) layer_open[l] = !closed[l].item<bool>();
    // Every layer closed: the most probable one stays (a model needs one).
    if (std::count(layer_open.begin(), layer_open.end(), true) == 0) layer_open[pl.argmax().item<long>()] = true;
  }
  const int G = has_neurons() ? neurons_ / group_ : 0;
  const double *h_p = ph.data_ptr<double>(), *m_p = pm.data_ptr<double>(), *f_p = pf.data_ptr<double>();
  const double* n_p = G ? pn.data_ptr<double>() : nullptr;
  // Units: heads l·H + h, then neuron groups L·H + l·G + j.
  const long n_units = static_cast<long>(L) * (H + G);
  std::vector<double> score(n_units), cost(n_units);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) score[l * H + h] = h_p[l * H + h] * m_p[l], cost[l * H + h] = costs.head;
    for (int j = 0; j < G; ++j) {
      const long u = static_cast<long>(L) * H + static_cast<long>(l) * G + j;
      score[u] = n_p[static_cast<long>(l) * G + j] * f_p[l], cost[u] = costs.neuron * group_;
    }
  }
  std::vector<long> order(n_units);
  std::iota(order.begin(), order.end(), 0L);
  std::stable_sort(order.begin(), order.end(), [&](long a, long b) { return score[a] > score[b]; });
  core::StructureMask keep;
  keep.heads.assign(L, std::vector<bool>(H, false));
  if (has_neurons()) keep.neurons.assign(L, std::vector<bool>(neurons_, false));  // head-only: no FFN part
  double spent = 0;
  const double slack = 1e-9 * std::max(1.0, std::abs(budget));
  auto layer_of = [&](long u) { return static_cast<int>(u < static_cast<long>(L) * H ? u / H : (u - L * H) / G); };
  for (long u : order) {
    if (!layer_open[layer_of(u)] || spent + cost[u] > budget + slack) continue;
    spent += cost[u];
    if (u < static_cast<long>(L) * H) {
      keep.heads[u / H][u % H] = true;
    } else {
      const long v = u - static_cast<long>(L) * H;
      const int l = static_cast<int>(v / G), j = static_cast<int>(v % G);
      for (int i = 0; i < group_; ++i) keep.neurons[l][j * group_ + i] = true;
    }
  }
  if (std::count(layer_open.begin(), layer_open.end(), false) > 0) keep.layers = layer_open;
  keep.hidden = hidden;
  return keep;
}

torch::Tensor StructureGates::neuron_p_open_by_layer() const {
  return has_neurons() ? p_open(neuron_la_.detach()).mean(1) : torch::Tensor();
}
torch::Tensor StructureGates::mha_p_open() const {
  return has_sublayers() ? p_open(mha_la_.detach()) : torch::Tensor();
}
torch::Tensor StructureGates::ffn_p_open() const {
  return has_sublayers() ? p_open(ffn_la_.detach()) : torch::Tensor();
}
torch::Tensor StructureGates::layer_p_open() const {
  return has_layers() ? p_open(layer_la_.detach()) : torch::Tensor();
}
torch::Tensor StructureGates::hidden_p_open() const {
  return has_hidden() ? p_open(hidden_la_.detach()) : torch::Tensor();
}

}  // namespace hp::gates
