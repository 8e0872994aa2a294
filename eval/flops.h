// FLOP and parameter accounting for a (possibly slimmed) BERT forward pass. Counts multiply-adds of
// the matrix products as 2 FLOPs each (projections, attention scores and context, FFN, pooler,
// classifier); element-wise work (softmax, LayerNorm, GELU) is left out, as in Michel et al.'s plots.
#pragma once

#include "core/model/bert_config.h"

namespace hp::eval {

// FLOPs of one forward pass over a batch of B sequences padded to length S.
double forward_flops(const core::BertConfig& cfg, long batch, long seq);

// FLOPs of one layer's attention block (Q, K, V, scores, context, output projection) for one sequence.
double attention_flops(const core::BertConfig& cfg, int layer, long seq);

// Parameters of the encoder + pooler + classifier (embeddings included).
long parameter_count(const core::BertConfig& cfg);

}  // namespace hp::eval
