// FLOP and parameter counts (see eval/flops.h).
#include "eval/flops.h"

#include <algorithm>
#include <cmath>

#include "core/model/bert_keys.h"

namespace hp::eval {

double head_flops(const core::BertConfig& cfg, long S) {
  const double D = cfg.hidden_size, Dh = cfg.head_dim();
  return 2.0 * S * D * Dh * 3  // its Q, K, V rows
         + 2.0 * S * S * Dh  // scores
         + 2.0 * S * S * Dh  // probs × V
         + 2.0 * S * Dh * D;  // its output-projection columns
}

double neuron_flops(const core::BertConfig& cfg, long S) { return 2.0 * S * cfg.hidden_size * 2; }

double attention_flops(const core::BertConfig& cfg, int layer, long S) {
  return cfg.heads_in_layer(layer) * head_flops(cfg, S);
}

double ffn_flops(const core::BertConfig& cfg, int layer, long S) { return cfg.ffn_width(layer) * neuron_flops(cfg, S); }

double encoder_flops(const core::BertConfig& cfg, long S) {
  double sum = 0;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) sum += attention_flops(cfg, l, S) + ffn_flops(cfg, l, S);
  return sum;
}

double forward_flops(const core::BertConfig& cfg, long B, long S) {
  const double D = cfg.hidden_size, P = cfg.classifier_width();
  const double per_seq = encoder_flops(cfg, S) + 2.0 * D * P + 2.0 * P * cfg.num_labels;  // pooler on [CLS], classifier
  return per_seq * B;
}

long parameter_count(const core::BertConfig& cfg) {
  long n = 0;
  for (const auto& spec : core::model_keys(cfg)) {
    for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l) {
      long size = 1;
      for (long d : core::key_shape(spec, cfg, l)) size *= d;
      n += size;
    }
  }
  return n;
}

long head_parameters(const core::BertConfig& cfg) {
  const long D = cfg.hidden_size, Dh = cfg.head_dim();
  return 3 * (D * Dh + Dh) + Dh * D;
}

long neuron_parameters(const core::BertConfig& cfg) { return 2L * cfg.hidden_size + 1; }

core::UnitCosts unit_costs(const core::BertConfig& cfg, bool parameters, double mean_length) {
  const double D = cfg.hidden_size, Dh = cfg.head_dim();
  core::UnitCosts c;
  if (parameters) {
    c.head = static_cast<double>(head_parameters(cfg)), c.neuron = static_cast<double>(neuron_parameters(cfg));
    c.head_hidden = 4 * D * Dh, c.neuron_hidden = 2 * D;  // the weights; the Q, K, V biases and a neuron's stay
  } else {
    const double S = static_cast<double>(std::max(1L, std::lround(mean_length)));
    c.head = head_flops(cfg, static_cast<long>(S)), c.neuron = neuron_flops(cfg, static_cast<long>(S));
    c.head_hidden = 2.0 * S * D * Dh * 4, c.neuron_hidden = c.neuron;  // not the scores and context
  }
  return c;
}

double total_cost(const core::BertConfig& cfg, const core::UnitCosts& costs) {
  return costs.head * cfg.total_heads() + costs.neuron * cfg.total_neurons();
}

}  // namespace hp::eval
