// Slimming (see prune/export/slim.h).
#include "prune/export/slim.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/base/strings.h"  // format_number
#include "core/model/bert_keys.h"

namespace hp::prune {

namespace {

// A detached copy of the model's parameters, with f(tensor, axis, layer) applied to every tensor that has dimension
// `dim` (the heads' kHeads, the neurons' kInter, the hidden channels' kHidden) on that axis; `layer` is 0 for the
// tensors outside the layers.
template <class F>
std::map<std::string, torch::Tensor> map_axis(const core::Bert& model, core::Dim dim, F f,
                                              std::map<std::string, torch::Tensor> params = {}) {
  if (params.empty()) params = copy_parameters(model);
  for (const auto& spec : core::model_keys(model.config())) {
    const int axis = core::axis_of(spec, dim);
    if (axis < 0) continue;
    for (int l = 0; l < (spec.per_layer ? model.config().num_hidden_layers : 1); ++l) {
      auto& t = params.at(core::hf_key(spec, l));
      t = f(t, static_cast<int64_t>(axis), l);
    }
  }
  return params;
}

// Per layer, the indices kept along a unit axis: units of `size` entries each, unit u of layer l kept when
// keep[l][u] (missing entries: kept when `keep_missing`).
std::vector<torch::Tensor> kept_rows(const std::vector<std::vector<bool>>& keep, const std::vector<int>& units,
                                     int size, bool keep_missing) {
  std::vector<torch::Tensor> rows;
  for (size_t l = 0; l < units.size(); ++l) {
    std::vector<int64_t> idx;
    for (int u = 0; u < units[l]; ++u) {
      const bool kept = l < keep.size() && u < static_cast<int>(keep[l].size()) ? keep[l][u] : keep_missing;
      if (kept)
        for (int d = 0; d < size; ++d) idx.push_back(static_cast<int64_t>(u) * size + d);
    }
    rows.push_back(torch::tensor(idx, torch::kLong));
  }
  return rows;
}

// The model without the layers `keep_layers` removes, the rest numbered 0, 1, … in their order (their heads,
// widths and tensors with them). Shares storage with `model`.
core::Bert drop_layers(const core::Bert& model, const std::vector<bool>& keep_layers) {
  const core::BertConfig& from = model.config();
  core::BertConfig cfg = from;
  cfg.pruned_heads.clear();
  cfg.intermediate_sizes.clear();
  std::map<std::string, torch::Tensor> params;
  const auto keys = core::model_keys(from);
  for (const auto& spec : keys)
    if (!spec.per_layer) params[spec.hf] = model.parameters().at(spec.hf);
  int to = 0;
  for (int l = 0; l < from.num_hidden_layers; ++l) {
    if (!core::layer_kept(keep_layers, l)) continue;
    for (const auto& spec : keys)
      if (spec.per_layer) params[core::hf_key(spec, to)] = model.parameters().at(core::hf_key(spec, l));
    if (auto it = from.pruned_heads.find(l); it != from.pruned_heads.end()) cfg.pruned_heads[to] = it->second;
    if (!from.intermediate_sizes.empty()) cfg.intermediate_sizes.push_back(from.intermediate_sizes[l]);
    ++to;
  }
  HP_CHECK(to > 0, "slim_model: every layer removed");
  cfg.num_hidden_layers = to;
  if (!cfg.ffn_slimmed()) cfg.intermediate_sizes.clear();
  return core::Bert(cfg, std::move(params));
}

// The model without the hidden channels `keep_hidden` removes (every tensor's kHidden axis, and kEmbed where the
// embeddings are the hidden width). Shares no storage with `model`.
core::Bert drop_hidden(const core::Bert& model, const std::vector<bool>& keep_hidden) {
  core::BertConfig cfg = model.config();
  HP_CHECK(static_cast<int>(keep_hidden.size()) == cfg.hidden_size,
           "slim_model: keep_hidden has " << keep_hidden.size() << " channels, model " << cfg.hidden_size);
  const torch::Tensor rows = kept_rows({keep_hidden}, {cfg.hidden_size}, 1, false)[0];
  HP_CHECK(rows.numel() > 0, "slim_model: every hidden channel removed");
  auto select = [&rows](const torch::Tensor& t, int64_t dim, int) { return t.index_select(dim, rows).contiguous(); };
  auto params = map_axis(model, core::Dim::kHidden, select);
  const bool embeddings_too = cfg.embedding_width() == cfg.hidden_size;  // no projection between them
  if (embeddings_too) params = map_axis(model, core::Dim::kEmbed, select, std::move(params));
  cfg.attention_head_size = cfg.head_dim();
  cfg.classifier_hidden_size = cfg.classifier_width();
  cfg.hidden_size = static_cast<int>(rows.numel());
  if (cfg.embedding_size > 0 && embeddings_too) cfg.embedding_size = cfg.hidden_size;
  return core::Bert(cfg, std::move(params));
}

}  // namespace

core::Bert slim_model(const core::Bert& model, const core::StructureMask& keep) {
  return slim_model(model, keep.heads, keep.neurons, keep.layers, keep.hidden);
}

std::map<std::string, torch::Tensor> copy_parameters(const core::Bert& model) {
  std::map<std::string, torch::Tensor> params;
  for (const auto& [name, t] : model.parameters()) params[name] = t.detach().clone();
  return params;
}

core::Bert slim_model(const core::Bert& model, const core::HeadSet& keep, const core::NeuronSet& keep_neurons,
                      const std::vector<bool>& keep_layers, const std::vector<bool>& keep_hidden) {
  core::BertConfig cfg = model.config();
  const int L = cfg.num_hidden_layers;
  HP_CHECK(static_cast<int>(keep.size()) == L, "slim_model: keep has " << keep.size() << " layers, model " << L);
  HP_CHECK(keep_neurons.empty() || static_cast<int>(keep_neurons.size()) == L,
           "slim_model: keep_neurons has " << keep_neurons.size() << " layers, model " << L);
  HP_CHECK(keep_layers.empty() || static_cast<int>(keep_layers.size()) == L,
           "slim_model: keep_layers has " << keep_layers.size() << " layers, model " << L);
  std::vector<int> heads(L), widths(L);
  for (int l = 0; l < L; ++l) {
    heads[l] = cfg.heads_in_layer(l);
    widths[l] = cfg.ffn_width(l);
    const std::vector<int> original = cfg.kept_heads(l);
    for (int h = 0; h < heads[l]; ++h) {
      if (h < static_cast<int>(keep[l].size()) && keep[l][h]) continue;
      auto& removed = cfg.pruned_heads[l];
      removed.push_back(original[h]);
      std::sort(removed.begin(), removed.end());
    }
  }
  const auto head_rows = kept_rows(keep, heads, cfg.head_dim(), false);
  const auto neuron_rows = kept_rows(keep_neurons, widths, 1, true);
  auto select = [](const std::vector<torch::Tensor>& rows) {
    return [&rows](const torch::Tensor& t, int64_t dim, int l) { return t.index_select(dim, rows[l]).contiguous(); };
  };
  auto params = map_axis(model, core::Dim::kHeads, select(head_rows));
  params = map_axis(model, core::Dim::kInter, select(neuron_rows), std::move(params));
  cfg.intermediate_sizes.clear();
  for (int l = 0; l < L; ++l) cfg.intermediate_sizes.push_back(static_cast<int>(neuron_rows[l].numel()));
  if (!cfg.ffn_slimmed()) cfg.intermediate_sizes.clear();
  core::Bert slim(cfg, std::move(params));
  if (core::count_kept_layers(keep_layers, L) < L) slim = drop_layers(slim, keep_layers);
  if (core::hidden_fraction(keep_hidden) < 1) slim = drop_hidden(slim, keep_hidden);
  return slim;
}

core::Bert dense_model(const core::Bert& slim) {
  core::BertConfig cfg = slim.config();
  if (cfg.hidden_slimmed())
    throw ConfigError("the dense export cannot hold a model whose hidden channels were removed (" +
                      std::to_string(cfg.hidden_size) + " of " + std::to_string(cfg.classifier_width()) +
                      " kept): a LayerNorm over zero channels would count them; export it slimmed (it loads with "
                      "trust_remote_code=True) or leave the hidden dimension out of the structures");
  const int L = cfg.num_hidden_layers, Dh = cfg.head_dim();
  std::vector<torch::Tensor> head_rows(L), neuron_rows(L);  // per layer: where present units go in the full axis
  for (int l = 0; l < L; ++l) {
    std::vector<int64_t> idx;
    for (int h : cfg.kept_heads(l))
      for (int d = 0; d < Dh; ++d) idx.push_back(static_cast<int64_t>(h) * Dh + d);
    head_rows[l] = torch::tensor(idx, torch::kLong);
    neuron_rows[l] = torch::arange(cfg.ffn_width(l), torch::kLong);
  }
  auto widen = [](const std::vector<torch::Tensor>& rows, int64_t width) {
    return [&rows, width](const torch::Tensor& t, int64_t dim, int l) {
      auto sizes = t.sizes().vec();
      sizes[dim] = width;
      return torch::zeros(sizes, t.options()).index_copy_(dim, rows[l], t);
    };
  };
  auto params = map_axis(slim, core::Dim::kHeads, widen(head_rows, cfg.num_attention_heads * Dh));
  params = map_axis(slim, core::Dim::kInter, widen(neuron_rows, cfg.intermediate_size), std::move(params));
  cfg.pruned_heads.clear();
  cfg.intermediate_sizes.clear();
  return core::Bert(cfg, std::move(params));
}

std::string tolerance_text(double t) {
  std::string s = core::format_number("%.0e", t);
  if (const auto p = s.find("e-0"); p != std::string::npos) s.erase(p + 2, 1);
  return s;
}

}  // namespace hp::prune
