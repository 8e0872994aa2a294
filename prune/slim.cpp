// Slimming (see prune/slim.h).
#include "prune/slim.h"

#include <algorithm>

#include "core/model/bert_keys.h"
#include "core/base/errors.h"

namespace hp::prune {

namespace {

// A detached copy of the model's parameters, with f(tensor, axis, layer) applied to every per-layer tensor
// that has a head axis (axis 0: Q/K/V rows, 1: output-projection columns).
template <class F>
std::map<std::string, torch::Tensor> map_head_tensors(const core::Bert& model, F f) {
  std::map<std::string, torch::Tensor> params;
  for (const auto& [name, t] : model.parameters()) params[name] = t.detach().clone();
  for (const auto& spec : core::bert_key_table()) {
    if (!spec.per_layer || spec.head_axis == core::HeadAxis::kNone) continue;
    const int64_t dim = spec.head_axis == core::HeadAxis::kRows ? 0 : 1;
    for (int l = 0; l < model.config().num_hidden_layers; ++l) {
      auto& t = params.at(core::hf_key(spec, l));
      t = f(t, dim, l);
    }
  }
  return params;
}

}  // namespace

core::Bert slim_model(const core::Bert& model, const core::HeadSet& keep) {
  core::BertConfig cfg = model.config();
  const int L = cfg.num_hidden_layers, Dh = cfg.head_dim();
  HP_CHECK(static_cast<int>(keep.size()) == L, "slim_model: keep has " << keep.size() << " layers, model " << L);
  std::vector<torch::Tensor> rows(L);  // per layer: indices of the kept neurons in the head axis
  for (int l = 0; l < L; ++l) {
    const std::vector<int> original = cfg.kept_heads(l);
    std::vector<int64_t> idx;
    for (int h = 0; h < static_cast<int>(original.size()); ++h) {
      if (h < static_cast<int>(keep[l].size()) && keep[l][h]) {
        for (int d = 0; d < Dh; ++d) idx.push_back(static_cast<int64_t>(h) * Dh + d);
      } else {
        auto& removed = cfg.pruned_heads[l];
        removed.push_back(original[h]);
        std::sort(removed.begin(), removed.end());
      }
    }
    rows[l] = torch::tensor(idx, torch::kLong);
  }
  auto params = map_head_tensors(
      model, [&](const torch::Tensor& t, int64_t dim, int l) { return t.index_select(dim, rows[l]).contiguous(); });
  return core::Bert(cfg, std::move(params));
}

core::Bert dense_model(const core::Bert& slim) {
  core::BertConfig cfg = slim.config();
  const int L = cfg.num_hidden_layers, Dh = cfg.head_dim(), width = cfg.num_attention_heads * Dh;
  std::vector<torch::Tensor> rows(L);  // per layer: where the present heads' neurons go in the full head axis
  for (int l = 0; l < L; ++l) {
    std::vector<int64_t> idx;
    for (int h : cfg.kept_heads(l))
      for (int d = 0; d < Dh; ++d) idx.push_back(static_cast<int64_t>(h) * Dh + d);
    rows[l] = torch::tensor(idx, torch::kLong);
  }
  auto params = map_head_tensors(slim, [&](const torch::Tensor& t, int64_t dim, int l) {
    auto sizes = t.sizes().vec();
    sizes[dim] = width;
    return torch::zeros(sizes, t.options()).index_copy_(dim, rows[l], t);
  });
  cfg.pruned_heads.clear();
  return core::Bert(cfg, std::move(params));
}

}  // namespace hp::prune
