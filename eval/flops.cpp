// FLOP and parameter counts (see eval/flops.h).
#include "eval/flops.h"

#include "core/model/bert_keys.h"

namespace hp::eval {

double attention_flops(const core::BertConfig& cfg, int layer, long S) {
  const double D = cfg.hidden_size, A = static_cast<double>(cfg.heads_in_layer(layer)) * cfg.head_dim();
  return 2.0 * S * D * A * 3  // Q, K, V projections
         + 2.0 * S * S * A  // scores
         + 2.0 * S * S * A  // probs × V
         + 2.0 * S * A * D;  // output projection
}

double forward_flops(const core::BertConfig& cfg, long B, long S) {
  const double D = cfg.hidden_size, I = cfg.intermediate_size;
  double per_seq = 0;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) per_seq += attention_flops(cfg, l, S) + 2.0 * S * D * I * 2;
  per_seq += 2.0 * D * D + 2.0 * D * cfg.num_labels;  // pooler on [CLS], classifier
  return per_seq * B;
}

long parameter_count(const core::BertConfig& cfg) {
  long n = 0;
  for (const auto& spec : core::bert_key_table()) {
    for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l) {
      long size = 1;
      for (long d : core::key_shape(spec, cfg, l)) size *= d;
      n += size;
    }
  }
  return n;
}

}  // namespace hp::eval
