// The data behind the report's attention views for one example (analysis/report/README.md): attention
// of every head of the model and of its slimmed export (heads at their original indices), attention
// rollout of both (analysis/rollout.h), the query and key vectors of every head (neuron view), the
// predictions, and the attribution tree of `prune explain` drawn as SVG. `view_json` stores the arrays
// quantised to 8 bits, zlib-compressed and base64-encoded, as the page expects.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model/bert.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"

namespace hp::analysis {

struct ViewSettings {
  int max_seq_len = 128;
  bool tree = true;  // attribution tree (integrated gradients: L × steps backward passes)
  int steps = 20;  // prune.attattr_steps
  std::string riemann = "right";
  double threshold = 0.4;  // explain.threshold
};

struct ExampleView {
  std::string name;  // "dev #12", "text 1"
  std::vector<std::string> tokens;
  std::vector<int> segments;  // token_type_ids
  std::string label;  // "" when the example has none
  std::string prediction;  // class name, or the score for regression
  double probability = 0;  // of the predicted class (regression: NaN)
  int L = 0, H = 0, n = 0, Dh = 0;
  std::vector<float> attn;  // [L][H][n][n]; absent heads 0
  std::vector<uint8_t> kept;  // [L][H]: head present in the model
  std::vector<float> rollout;  // [L][n][n]
  std::vector<float> q, k;  // [L][H][n][Dh]
  bool has_slim = false;
  std::vector<float> slim_attn;  // [L][H][n][n] at original indices; removed heads 0
  std::vector<uint8_t> slim_kept;  // [L][H]
  std::vector<float> slim_rollout;  // [L][n][n]
  std::string slim_prediction;
  double slim_probability = 0;
  std::string tree_svg;  // "" when not computed
  std::string note;
};

// `slim` may be null. Throws InputError when the example does not fit max_seq_len (nothing is truncated).
ExampleView view_example(const core::Bert& model, const core::Bert* slim, const core::Tokenizer& tok,
                         const core::TaskSpec& task, const core::Example& ex, const std::string& name,
                         const ViewSettings& s);

// The example's entry of the page's "examples" array (the tree SVG is not in it: it goes into the page).
nlohmann::json view_json(const ExampleView& v);

// base64 (RFC 4648, with padding) of the zlib stream (RFC 1950, level 9) of `bytes`.
std::string base64_zlib(const std::vector<uint8_t>& bytes);
// p ∈ [0, 1] → round(255 p), clamped.
std::vector<uint8_t> quantize_unit(const std::vector<float>& p);

}  // namespace hp::analysis
