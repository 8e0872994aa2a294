// The model card (README.md) of a pruning run's slimmed export: what the model is (base model and its
// licence, task, heads kept per layer and how they were chosen), how well and how fast it runs (dev
// metric unpruned / before / after recovery, parameters, measured speedup), how to load it, and the
// command that reproduces it. Hugging Face's card conventions: a YAML header, then Markdown. Torch-free.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hp::prune {

struct CardInputs {
  nlohmann::json summary;  // summary.json of the run, with its "final" section
  std::string run_dir;  // where config.resolved.yaml lives
  std::string base_model;  // model.path (its README.md front matter gives the licence)
  std::vector<std::vector<int>> kept;  // [L]: original indices of the heads kept
  int heads_per_layer = 0;  // of the base model
  int intermediate_size = 0;  // of the base model (the FFN widths of a budget run are out of it)
  std::string version;  // headprune's
};

std::string model_card(const CardInputs& in);

// The `license:` of a Hugging Face model card's YAML header in `dir`/README.md; "" when absent.
std::string base_licence(const std::string& dir);

}  // namespace hp::prune
