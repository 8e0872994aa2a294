// Whole-layer dropping (see prune/stages/layer_drop.h).
#include "prune/stages/layer_drop.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/config.h"  // join_list
#include "core/base/strings.h"
#include "core/dist/distributed.h"
#include "core/io/checkpoint.h"
#include "eval/evaluator.h"
#include "prune/export/slim.h"
#include "prune/stages/stages.h"

namespace hp::prune {

namespace fs = std::filesystem;

const std::vector<std::string>& layer_choices() {
  static const std::vector<std::string> kChoices = {"fisher", "top", "alternate"};
  return kChoices;
}

std::vector<double> layer_fisher_loss(const MaskGradients& grads) {
  // Σ over a layer's units, squared, summed over batches: [N, L, U] → [L], for heads and neurons apiece.
  auto block = [](const torch::Tensor& g) { return g.to(torch::kFloat64).sum(2).pow(2).sum(0); };
  auto loss = block(grads.heads);
  if (grads.neurons.defined() && grads.neurons.numel() > 0) loss = loss + block(grads.neurons);
  return std::vector<double>(loss.data_ptr<double>(), loss.data_ptr<double>() + loss.numel());
}

std::vector<bool> keep_layers(const std::string& choice, const std::vector<double>& fisher_loss, int n) {
  const int L = static_cast<int>(fisher_loss.size());
  if (n < 1 || n >= L)
    throw ConfigError("prune.target_layers = " + std::to_string(n) + " but the model has " + std::to_string(L) +
                      " layers; use 1.." + std::to_string(L - 1) + " (or 0 for off)");
  std::vector<int> order;  // layers in the order they are dropped
  if (choice == "fisher") {
    order.resize(L);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return fisher_loss[a] < fisher_loss[b] || (fisher_loss[a] == fisher_loss[b] && a > b);
    });
  } else if (choice == "top") {
    for (int l = L - 1; l >= 0; --l) order.push_back(l);
  } else if (choice == "alternate") {
    for (int start : {L - 1, L - 2})
      for (int l = start; l >= 0; l -= 2) order.push_back(l);
  } else {
    throw ConfigError("prune.layer_choice = '" + choice + "'; use fisher, top or alternate");
  }
  std::vector<bool> keep(L, true);
  for (int i = 0; i < L - n; ++i) keep[order[i]] = false;
  return keep;
}

namespace {

std::vector<int> kept_indices(const std::vector<bool>& keep) {
  std::vector<int> kept;
  for (size_t l = 0; l < keep.size(); ++l)
    if (keep[l]) kept.push_back(static_cast<int>(l));
  return kept;
}

// Every head of a kept layer, none of a removed one.
core::HeadSet heads_of_layers(const core::BertConfig& arch, const std::vector<bool>& layers) {
  core::HeadSet heads(arch.num_hidden_layers);
  for (int l = 0; l < arch.num_hidden_layers; ++l) heads[l].assign(arch.heads_in_layer(l), layers[l]);
  return heads;
}

std::string join_ints(const std::vector<int>& v) {
  std::vector<std::string> s;
  for (int x : v) s.push_back(std::to_string(x));
  return core::join_list(s);
}

FinalChoice choice_of(const RunContext& ctx, const LayerDropSummary& d, const std::string& dir) {
  FinalChoice c;
  c.method = ChoiceMethod::kLayers;
  c.criterion = d.choice;
  c.layers.assign(ctx.arch.num_hidden_layers, false);
  for (int l : d.choices.at(d.choice).kept) c.layers[l] = true;
  c.keep = heads_of_layers(ctx.arch, c.layers);
  c.metrics_before_recovery = d.choices.at(d.choice).metrics;
  c.model_dir = dir;
  c.slimmed = true;
  c.layer_drop = d;
  return c;
}

}  // namespace

FinalChoice choose_layers(RunContext& ctx, const MaskGradients& grads) {
  const core::Config& cfg = *ctx.cfg;
  const int n = cfg.prune.target_layers, L = ctx.arch.num_hidden_layers;
  const std::string dir = cfg.run.out_dir + "/layers";
  const std::string& metric = ctx.objective->task().primary_metric;
  if (fs::exists(dir + "/choice.json"))  // a resumed run: chosen and slimmed before
    return choice_of(ctx, nlohmann::json::parse(core::read_file(dir + "/choice.json")).get<LayerDropSummary>(), dir);
  log_stage(5, "choose layers",
            "keep " + std::to_string(n) + " of " + std::to_string(L) + " layers by " + cfg.prune.layer_choice +
                " (fisher, top and alternate each evaluated with the others removed)");
  LayerDropSummary d;
  d.choice = cfg.prune.layer_choice;
  d.fisher_loss = layer_fisher_loss(grads);
  torch::Tensor chosen_logits;
  for (const auto& name : layer_choices()) {
    const auto keep = keep_layers(name, d.fisher_loss, n);
    const auto r = evaluate_on(ctx.curves, *ctx.model, Split::kEval, {{}, {}, eval::layer_mask_tensor(keep)});
    d.choices[name] = LayerChoice{kept_indices(keep), r.metrics};
    if (name == d.choice) chosen_logits = r.logits;
    core::log_info("prune", "  " + name + ": layers " + join_ints(kept_indices(keep)) + " kept, " + metric + " " +
                                core::format_number("%.4g", r.metrics.at(metric)) + " before recovery");
  }
  FinalChoice c = choice_of(ctx, d, dir);
  const core::Bert slim = slim_model(*ctx.model, c.keep, {}, c.layers);
  const auto slim_eval = evaluate_on(ctx.curves, slim, Split::kEval);
  const double diff = (slim_eval.logits - chosen_logits).abs().max().item<double>();
  if (cfg.prune.verify && diff > kSlimLogitTolerance)
    throw InternalError("the model with layers " + join_ints(d.choices.at(d.choice).kept) +
                        " alone differs from masking the others by " + std::to_string(diff) + " (> " +
                        core::format_number("%g", kSlimLogitTolerance) + ")");
  core::shared_write([&] {
    core::StagedFolder(dir).write([&](const std::string& staged) {  // the model and its choice.json appear together
      core::write_bert_files(slim, staged, ctx.model_dir);
      core::write_file_atomic(staged + "/choice.json", nlohmann::json(d).dump(2) + "\n");
    });
  });
  return c;
}

}  // namespace hp::prune
