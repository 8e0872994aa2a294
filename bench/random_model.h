// Random models of real shapes for the benchmarks (bench/forward_bench.cpp, gpu_step_bench.cpp): BERT-base and
// all-MiniLM-L6-v2's shapes with HF's initialisation, no checkpoint needed.
#pragma once

#include <map>
#include <string>

#include "core/model/bert.h"
#include "core/model/bert_keys.h"

namespace hp::bench {

inline hp::core::BertConfig bert_base_config() {
  hp::core::BertConfig cfg;
  cfg.vocab_size = 30522;
  cfg.hidden_size = 768;
  cfg.num_hidden_layers = 12;
  cfg.num_attention_heads = 12;
  cfg.intermediate_size = 3072;
  cfg.num_labels = 2;
  return cfg;
}

// all-MiniLM-L6-v2's shapes: 6 layers of 12 heads, D 384, FFN 1536.
inline hp::core::BertConfig minilm_config() {
  hp::core::BertConfig cfg = bert_base_config();
  cfg.hidden_size = 384;
  cfg.num_hidden_layers = 6;
  cfg.intermediate_size = 1536;
  return cfg;
}

// Random weights under the HF names: normal × 0.02, LayerNorm weight 1 and bias 0 (HF's init).
inline hp::core::Bert random_bert(const hp::core::BertConfig& cfg) {
  torch::manual_seed(0);
  std::map<std::string, torch::Tensor> params;
  for (const auto& spec : hp::core::model_keys(cfg)) {
    for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l) {
      std::string key = hp::core::hf_key(spec, l);
      auto shape = hp::core::key_shape(spec, cfg, l);
      bool ln = key.find("LayerNorm") != std::string::npos;
      bool weight = key.size() >= 6 && key.compare(key.size() - 6, 6, "weight") == 0;
      params[key] = ln ? (weight ? torch::ones(shape) : torch::zeros(shape)) : torch::randn(shape) * 0.02;
    }
  }
  return hp::core::Bert(cfg, std::move(params));
}

}  // namespace hp::bench
