// Mask gradients, Fisher search and rearrangement (see prune/search/mask_search.h).
#include "prune/search/mask_search.h"
#include "core/model/head_loss.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <torch/autograd.h>

#include "core/base/errors.h"
#include "core/base/files.h"  // shared_write
#include "core/base/log.h"  // Progress
#include "core/dist/distributed.h"
#include "core/io/tensor_io.h"

namespace hp::prune {

MaskGradients mask_gradients(const core::Bert& model, const RankData& sample,
                             const std::function<void(long, long)>& progress, bool hidden, bool layers,
                             const MaskLoss& objective) {
  for (const auto& [name, t] : model.parameters())
    HP_CHECK(!t.requires_grad(), "mask_gradients needs a model without trainable tensors (" << name << ")");
  const auto& cfg = model.config();
  const bool regression = sample.task->is_regression();
  const long n = static_cast<long>(sample.batches.size());
  auto heads = torch::zeros({n, cfg.num_hidden_layers, cfg.max_heads()}, torch::kFloat64);
  auto neurons = torch::zeros({n, cfg.num_hidden_layers, cfg.max_ffn_width()}, torch::kFloat64);
  auto channels = hidden ? torch::zeros({n, cfg.hidden_size}, torch::kFloat64) : torch::Tensor();
  auto whole = layers ? torch::zeros({n, cfg.num_hidden_layers}, torch::kFloat64) : torch::Tensor();
  for (long i = 0; i < n; ++i) {
    if (progress) progress(i, n);
    if (!core::dist::mine(i)) continue;  // data-parallel: every world-th batch, summed below
    const auto& b = sample.batches[static_cast<size_t>(i)];
    core::EncoderInput in = core::encoder_input(b);
    in.head_mask = torch::ones({cfg.num_hidden_layers, cfg.max_heads()}, torch::requires_grad());
    in.neuron_mask = torch::ones({cfg.num_hidden_layers, cfg.max_ffn_width()}, torch::requires_grad());
    in.cls_only = !objective;
    std::vector<torch::Tensor> wrt = {in.head_mask, in.neuron_mask};
    if (hidden) wrt.push_back(in.hidden_mask = torch::ones({cfg.hidden_size}, torch::requires_grad()));
    if (layers) wrt.push_back(in.layer_mask = torch::ones({cfg.num_hidden_layers}, torch::requires_grad()));
    const auto loss = objective ? objective(model.forward(in), b, i)
                                : core::per_example_loss(model.forward(in).logits, b.labels, regression).mean();
    const auto g = torch::autograd::grad({loss}, wrt);
    heads[i] = g[0].to(torch::kFloat64);
    neurons[i] = g[1].to(torch::kFloat64);
    if (hidden) channels[i] = g[2].to(torch::kFloat64);
    if (layers) whole[i] = g.back().to(torch::kFloat64);
  }
  if (progress) progress(n, n);
  core::dist::all_reduce_sum(heads, "the mask gradients");
  core::dist::all_reduce_sum(neurons, "the mask gradients");
  if (hidden) core::dist::all_reduce_sum(channels, "the mask gradients");
  if (layers) core::dist::all_reduce_sum(whole, "the mask gradients");
  return {heads, neurons, channels, whole};
}

torch::Tensor fisher_diagonal(const torch::Tensor& grads) { return grads.pow(2).sum(0); }

torch::Tensor taylor_importance(const torch::Tensor& grads) { return grads.abs().sum(0); }

namespace {

// Flat indices of `importance` by decreasing value, equal values in index order.
std::vector<long> ranked(const torch::Tensor& importance) {
  const auto flat = importance.to(torch::kFloat64).contiguous().view(-1);
  const double* v = flat.data_ptr<double>();
  std::vector<long> order(static_cast<size_t>(flat.numel()));
  std::iota(order.begin(), order.end(), 0L);
  std::stable_sort(order.begin(), order.end(), [v](long a, long b) { return v[a] > v[b]; });
  return order;
}

std::vector<std::vector<bool>> keep_of(const std::vector<long>& order, long count, long rows, long cols) {
  std::vector<std::vector<bool>> keep(static_cast<size_t>(rows), std::vector<bool>(static_cast<size_t>(cols), false));
  for (long k = 0; k < count; ++k) keep[order[k] / cols][order[k] % cols] = true;
  return keep;
}

}  // namespace

StructureKeep search_budget(const torch::Tensor& head_importance, const torch::Tensor& neuron_importance,
                            const UnitCosts& costs, double budget, Prunable prunable) {
  HP_CHECK(costs.head > 0 && costs.neuron > 0, "search_budget: unit costs must be positive");
  budget *= 1 + 1e-12;  // a budget of exactly the whole model keeps the whole model despite rounding
  const auto heads = ranked(head_importance), neurons = ranked(neuron_importance);
  const long H = static_cast<long>(heads.size()), I = static_cast<long>(neurons.size());
  auto fits = [&](long h, long n) {
    return costs.head * static_cast<double>(h) + costs.neuron * static_cast<double>(n) <= budget;
  };
  if (!prunable.heads || !prunable.neurons) {  // one structure whole, the other's best units in the rest
    const long h = prunable.heads ? std::min<long>(H, static_cast<long>((budget - costs.neuron * I) / costs.head)) : H;
    const long n =
        prunable.neurons ? std::min<long>(I, static_cast<long>((budget - costs.head * H) / costs.neuron)) : I;
    if (h < 1 || n < 0 || !fits(h, n))
      throw ConfigError("the budget " + std::to_string(budget) +
                        " cannot keep the structures prune.structures keeps whole (" +
                        std::to_string(costs.head * H + costs.neuron * I) + " in all); raise the target or allow both");
    return {keep_of(heads, h, head_importance.size(0), head_importance.size(1)),
            keep_of(neurons, n, neuron_importance.size(0), neuron_importance.size(1))};
  }
  // Prefix sums of the ranked importances: the total of the best k units in O(1).
  auto prefix = [](const torch::Tensor& importance, const std::vector<long>& order) {
    const auto flat = importance.to(torch::kFloat64).contiguous();
    const double* v = flat.data_ptr<double>();
    std::vector<double> sum(order.size() + 1, 0.0);
    for (size_t k = 0; k < order.size(); ++k) sum[k + 1] = sum[k] + v[order[k]];
    return sum;
  };
  const auto h_sum = prefix(head_importance, heads), n_sum = prefix(neuron_importance, neurons);
  long best_heads = -1, best_neurons = 0;
  double best = -1;
  for (long h = 1; h <= static_cast<long>(heads.size()); ++h) {
    const double rest = budget - costs.head * static_cast<double>(h);
    if (rest < 0) break;
    const long n = std::min<long>(static_cast<long>(rest / costs.neuron), static_cast<long>(neurons.size()));
    const double total = h_sum[h] + n_sum[n];
    if (total > best) best = total, best_heads = h, best_neurons = n;
  }
  if (best_heads < 0)
    throw ConfigError("the budget pays for no head (one head costs " + std::to_string(costs.head) + ", the budget is " +
                      std::to_string(budget) + "); raise the target");
  return {keep_of(heads, best_heads, head_importance.size(0), head_importance.size(1)),
          keep_of(neurons, best_neurons, neuron_importance.size(0), neuron_importance.size(1))};
}

namespace {

// Σ of `importance` over the kept units of `keep` ([rows][cols] against [rows, cols]).
double kept_importance(const torch::Tensor& importance, const std::vector<std::vector<bool>>& keep) {
  const auto v = importance.to(torch::kFloat64).contiguous();
  const double* d = v.data_ptr<double>();
  const long cols = v.size(1);
  double sum = 0;
  for (size_t r = 0; r < keep.size(); ++r)
    for (size_t c = 0; c < keep[r].size(); ++c)
      if (keep[r][c]) sum += d[static_cast<long>(r) * cols + static_cast<long>(c)];
  return sum;
}

}  // namespace

Importances fisher_importances(const MaskGradients& g) {
  Importances imp{fisher_diagonal(g.heads), fisher_diagonal(g.neurons)};
  if (g.hidden.defined()) imp.hidden = fisher_diagonal(g.hidden);
  if (g.layers.defined()) imp.layers = fisher_diagonal(g.layers);
  return imp;
}

namespace {

// search_budget over the layers `rows` of the importances, spread back to all L layers (the others all false).
StructureKeep search_rows(const Importances& imp, const std::vector<long>& rows, const UnitCosts& costs,
                          double budget, Prunable prunable, double* removed) {
  const auto idx = torch::tensor(rows, torch::kLong);
  const auto heads = imp.heads.index_select(0, idx), neurons = imp.neurons.index_select(0, idx);
  const StructureKeep part = search_budget(heads, neurons, costs, budget, prunable);
  *removed = heads.to(torch::kFloat64).sum().item<double>() + neurons.to(torch::kFloat64).sum().item<double>() -
             kept_importance(heads, part.heads) - kept_importance(neurons, part.neurons);
  const long L = imp.heads.size(0);
  StructureKeep keep{std::vector<std::vector<bool>>(L, std::vector<bool>(imp.heads.size(1), false)),
                     std::vector<std::vector<bool>>(L, std::vector<bool>(imp.neurons.size(1), false))};
  for (size_t r = 0; r < rows.size(); ++r) keep.heads[rows[r]] = part.heads[r], keep.neurons[rows[r]] = part.neurons[r];
  return keep;
}

}  // namespace

StructureKeep search_structures(const Importances& imp, const UnitCosts& costs, double budget, Prunable prunable,
                                const std::vector<long>& widths, const std::vector<long>& layer_counts) {
  const long L = imp.heads.size(0);
  const long D = prunable.hidden ? imp.hidden.size(0) : 1;
  HP_CHECK(!prunable.hidden || !widths.empty(), "search_structures: no width to try");
  HP_CHECK(!prunable.layers || imp.layers.defined(), "search_structures: no layer importances");
  HP_CHECK(!prunable.layers || !layer_counts.empty(), "search_structures: no layer count to try");
  const std::vector<long> tried = prunable.hidden ? widths : std::vector<long>{D};
  const auto channels = prunable.hidden ? ranked(imp.hidden) : std::vector<long>{};
  const auto layers = prunable.layers ? ranked(-imp.layers) : std::vector<long>{};  // least important first
  // removed_channels[w]: the Fisher of the channels a width w removes (all but the w most important).
  std::vector<double> removed_channels(static_cast<size_t>(D) + 1, 0.0);
  if (prunable.hidden) {
    const auto v = imp.hidden.to(torch::kFloat64).contiguous();
    for (long w = D - 1; w >= 0; --w) removed_channels[w] = removed_channels[w + 1] + v[channels[w]].item<double>();
  }
  std::optional<StructureKeep> best;
  double best_removed = 0;
  std::string refused;
  for (const long n : prunable.layers ? layer_counts : std::vector<long>{L}) {
    HP_CHECK(n >= 1 && n <= L, "search_structures: " << n << " layers outside 1.." << L);
    const long k = L - n;  // layers removed
    std::vector<bool> layer_keep(static_cast<size_t>(L), true);
    double layers_removed = 0;
    for (long j = 0; j < k; ++j)
      layer_keep[layers[j]] = false, layers_removed += imp.layers[layers[j]].item<double>();
    std::vector<long> rows;
    for (long l = 0; l < L; ++l)
      if (layer_keep[l]) rows.push_back(l);
    for (const long w : tried) {
      HP_CHECK(w >= 1 && w <= D, "search_structures: width " << w << " outside 1.." << D);
      double removed = layers_removed, units_removed = 0;
      StructureKeep keep;
      try {
        keep = search_rows(imp, rows, costs.at_hidden(static_cast<double>(w) / D), budget, prunable, &units_removed);
      } catch (const ConfigError& e) {
        refused = e.what();
        continue;
      }
      removed += units_removed;
      removed += removed_channels[w];
      if (w < D) keep.hidden = keep_of(channels, w, 1, D).front();
      if (k > 0) keep.layers = layer_keep;
      if (!best || removed < best_removed) best = std::move(keep), best_removed = removed;
    }
  }
  if (!best)
    throw ConfigError(refused + (tried.size() > 1 || (L > 1 && prunable.layers)
                                     ? " (at every hidden width and layer count tried)"
                                     : ""));
  return *best;
}

std::vector<long> layer_counts(long layers, const std::vector<int>& configured) {
  std::vector<long> n;
  for (int c : configured) {
    if (c < 1 || c > layers)
      throw ConfigError("prune.layer_counts has " + std::to_string(c) + "; use layer counts in 1.." +
                        std::to_string(layers) + " (the model's layers), or [] for every count");
    n.push_back(c);
  }
  if (n.empty())
    for (long k = layers; k >= 1; --k) n.push_back(k);
  std::sort(n.rbegin(), n.rend());
  n.erase(std::unique(n.begin(), n.end()), n.end());
  return n;
}

std::vector<long> hidden_widths(long hidden, const std::vector<int>& configured) {
  std::vector<long> w;
  for (int c : configured) {
    if (c < 1 || c > hidden)
      throw ConfigError("prune.hidden_widths has " + std::to_string(c) + "; use channel counts in 1.." +
                        std::to_string(hidden) + " (the model's hidden_size), or [] for " + std::to_string(hidden) +
                        " down to " + std::to_string(std::max(1L, hidden / 4)) + " in steps of " +
                        std::to_string(std::max(1L, hidden / 32)));
    w.push_back(c);
  }
  if (w.empty()) {
    const long step = std::max(1L, hidden / 32);
    for (long k = hidden; k >= std::max(1L, hidden / 4); k -= step) w.push_back(k);
  }
  std::sort(w.rbegin(), w.rend());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

std::vector<bool> greedy_rearrange(const std::vector<bool>& keep, const torch::Tensor& grads) {
  const long U = static_cast<long>(keep.size());
  const long removed_count = U - std::count(keep.begin(), keep.end(), true);
  if (removed_count == 0 || removed_count == U) return keep;
  const auto g = grads.to(torch::kFloat64).t().contiguous();  // [U, N]
  const auto order = ranked(-g.pow(2).sum(1));  // increasing Fisher
  std::vector<long> removed(order.begin(), order.begin() + removed_count);
  for (long k = removed_count; k < U; ++k) {
    removed.push_back(order[k]);
    const auto idx = torch::tensor(removed, torch::kLong);
    const auto vectors = g.index_select(0, idx);  // [r + 1, N]
    const auto without = vectors.sum(0).unsqueeze(0) - vectors;  // the sum with each one left out
    const long back = without.pow(2).sum(1).argmin().item<long>();
    removed.erase(removed.begin() + back);
  }
  std::vector<bool> out(keep.size(), true);
  for (long u : removed) out[u] = false;
  return out;
}

namespace {

std::vector<std::vector<bool>> rearrange_layers(const std::vector<std::vector<bool>>& keep,
                                                const torch::Tensor& grads) {
  auto out = keep;
  for (size_t l = 0; l < keep.size(); ++l) {
    const long U = static_cast<long>(keep[l].size());
    out[l] = greedy_rearrange(keep[l], grads.select(1, static_cast<long>(l)).narrow(1, 0, U));
  }
  return out;
}

double layers_loss(const std::vector<std::vector<bool>>& keep, const torch::Tensor& grads) {
  double sum = 0;
  for (size_t l = 0; l < keep.size(); ++l) {
    std::vector<long> removed;
    for (size_t u = 0; u < keep[l].size(); ++u)
      if (!keep[l][u]) removed.push_back(static_cast<long>(u));
    if (removed.empty()) continue;
    const auto g = grads.select(1, static_cast<long>(l)).index_select(1, torch::tensor(removed, torch::kLong));
    sum += g.sum(1).pow(2).sum().item<double>();
  }
  return sum;
}

}  // namespace

StructureKeep rearrange(const StructureKeep& keep, const MaskGradients& grads) {
  return {rearrange_layers(keep.heads, grads.heads), rearrange_layers(keep.neurons, grads.neurons), keep.layers,
          keep.hidden};
}

double block_fisher_loss(const StructureKeep& keep, const MaskGradients& grads) {
  return layers_loss(keep.heads, grads.heads) + layers_loss(keep.neurons, grads.neurons);
}

UnitImportance magnitude_importance(const core::Bert& model) {
  const auto& cfg = model.config();
  const auto& p = model.parameters();
  const long Dh = cfg.head_dim();
  auto heads = torch::zeros({cfg.num_hidden_layers, cfg.max_heads()}, torch::kFloat64);
  auto neurons = torch::zeros({cfg.num_hidden_layers, cfg.max_ffn_width()}, torch::kFloat64);
  auto sq = [](const torch::Tensor& t) { return t.to(torch::kFloat64).pow(2); };
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".";
    const long H = cfg.heads_in_layer(l), I = cfg.ffn_width(l);
    auto h = sq(p.at(pre + "attention.output.dense.weight")).view({-1, H, Dh}).sum(torch::IntArrayRef{0, 2});
    for (const char* m : {"query", "key", "value"}) {
      const std::string w = pre + "attention.self." + m;
      h += sq(p.at(w + ".weight")).view({H, -1}).sum(1) + sq(p.at(w + ".bias")).view({H, Dh}).sum(1);
    }
    heads[l].narrow(0, 0, H).copy_(h.sqrt());
    const auto n = sq(p.at(pre + "intermediate.dense.weight")).sum(1) + sq(p.at(pre + "intermediate.dense.bias")) +
                   sq(p.at(pre + "output.dense.weight")).sum(0);
    neurons[l].narrow(0, 0, I).copy_(n.sqrt());
  }
  return {heads, neurons};
}

UnitImportance random_unit_importance(const core::BertConfig& cfg, int seed) {
  std::mt19937_64 gen(static_cast<uint64_t>(seed) * 0x9E3779B97F4A7C15ULL + 29);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto fill = [&](long rows, long cols) {
    auto t = torch::empty({rows, cols}, torch::kFloat64);
    double* v = t.data_ptr<double>();
    for (long i = 0; i < rows * cols; ++i) v[i] = u(gen);
    return t;
  };
  const auto heads = fill(cfg.num_hidden_layers, cfg.max_heads());
  return {heads, fill(cfg.num_hidden_layers, cfg.max_ffn_width())};
}

StructureKeep top_units(const torch::Tensor& heads, const torch::Tensor& neurons, long n_heads, long n_neurons) {
  return {keep_of(ranked(heads), n_heads, heads.size(0), heads.size(1)),
          keep_of(ranked(neurons), n_neurons, neurons.size(0), neurons.size(1))};
}

std::optional<MaskGradients> stored_mask_gradients(const std::string& path, const core::Bert& model,
                                                   const RankData& sample, bool hidden, bool layers,
                                                   const MaskLoss& loss, const std::function<bool()>& start) {
  auto lacks = [&] {
    const auto stored = core::read_hdf5(path);
    return (hidden && !stored.count("hidden")) || (layers && !stored.count("layers"));
  };
  if (!std::filesystem::exists(path) || lacks()) {
    if (!start()) return std::nullopt;
    core::Progress progress("gradients", static_cast<long>(sample.batches.size()), "batches");
    const auto t = std::chrono::steady_clock::now();
    const auto g = mask_gradients(model, sample, [&](long done, long) { progress.update(done); }, hidden, layers, loss);
    progress.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    std::map<std::string, torch::Tensor> sets = {{"heads", g.heads}, {"neurons", g.neurons}};
    if (hidden) sets["hidden"] = g.hidden;
    if (layers) sets["layers"] = g.layers;
    core::shared_write([&] { core::write_hdf5(path, sets, {{"seconds", std::to_string(seconds)}}); });
  }
  const auto t = core::read_hdf5(path);
  MaskGradients g{t.at("heads").to(torch::kFloat64), t.at("neurons").to(torch::kFloat64)};
  if (hidden) g.hidden = t.at("hidden").to(torch::kFloat64);
  if (layers) g.layers = t.at("layers").to(torch::kFloat64);
  return g;
}

}  // namespace hp::prune
