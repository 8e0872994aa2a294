// FLOP and parameter accounting for a (possibly slimmed) BERT forward pass. Counts multiply-adds of
// the matrix products as 2 FLOPs each (projections, attention scores and context, FFN, pooler,
// classifier); element-wise work (softmax, LayerNorm, GELU) is left out, as in Michel et al.'s plots and
// Kwon et al.'s MAC model.
//
// Per structure: a head costs head_flops (its Q, K, V rows, its scores and context, its output columns) and
// an FFN neuron neuron_flops (its row of the first matrix and column of the second); a layer's attention and
// FFN blocks are those costs times its heads and neurons, so a FLOPs budget is a sum over kept units. The
// budget's 100% is encoder_flops of the unpruned model (embeddings, pooler and classifier are not prunable).
#pragma once

#include "core/model/bert_config.h"
#include "core/model/head_mask.h"  // UnitCosts

namespace hp::eval {

// FLOPs of one forward pass over a batch of B sequences padded to length S.
double forward_flops(const core::BertConfig& cfg, long batch, long seq);

// FLOPs of one layer's attention block (Q, K, V, scores, context, output projection) for one sequence.
double attention_flops(const core::BertConfig& cfg, int layer, long seq);
// FLOPs of one layer's FFN block (both matrices) for one sequence.
double ffn_flops(const core::BertConfig& cfg, int layer, long seq);
// One head's and one FFN neuron's share, for one sequence of `seq` tokens.
double head_flops(const core::BertConfig& cfg, long seq);
double neuron_flops(const core::BertConfig& cfg, long seq);
// The prunable part: every layer's attention and FFN blocks, for one sequence.
double encoder_flops(const core::BertConfig& cfg, long seq);

// Parameters of the encoder + pooler + classifier (embeddings included).
long parameter_count(const core::BertConfig& cfg);
// One head's parameters (Q, K, V rows and biases, output-projection columns) and one FFN neuron's (its row
// and bias in the first matrix, its column in the second).
long head_parameters(const core::BertConfig& cfg);
long neuron_parameters(const core::BertConfig& cfg);

// A budget's unit costs: one head's and one FFN neuron's FLOPs at `mean_length` tokens (rounded, at least 1), or
// with `parameters` their parameters, with the parts proportional to the hidden width (UnitCosts::head_hidden: a
// head's four projections; neuron_hidden: all of a neuron's FLOPs, its two weight vectors' parameters).
core::UnitCosts unit_costs(const core::BertConfig& cfg, bool parameters, double mean_length);
// The unpruned model's units together: costs.head × all heads + costs.neuron × all FFN neurons (a budget's 100%).
double total_cost(const core::BertConfig& cfg, const core::UnitCosts& costs);

}  // namespace hp::eval
