// Physical removal of heads and FFN neurons: a slimmed model whose Q, K, V rows and output-projection
// columns of pruned heads are gone, and whose FFN input rows, biases and output columns of pruned neurons are
// gone (driven by the kHeads and kInter dimensions of core/model/bert_keys.h). A layer left with 0 heads keeps
// only the attention output bias on its residual path; with 0 neurons, only the FFN output bias.
// config.pruned_heads records the removed heads by their original indices (Hugging Face re-prunes from it);
// config.intermediate_sizes the FFN width per layer; core/io/checkpoint.h also writes heads_per_layer.
// Removed layers (a "layers:" mask group) leave the stack: the rest are numbered 0, 1, … in their order, and
// config.json's num_hidden_layers, pruned_heads and intermediate_sizes follow them.
// Removed hidden channels (a "hidden:" mask group) leave every tensor with a hidden axis: the embeddings (unless
// an embedding projection, ELECTRA's, maps to the hidden width: then its output rows), every projection's input
// columns or output rows, the LayerNorms and the classification head's input columns. config.json's hidden_size
// becomes the channels kept and stores head_dim and classifier_hidden_size (core/model/bert_config.h).
// dense_model goes back to the original shapes with the removed heads and neurons zeroed (removed layers stay
// removed: no zero weights make a post-LayerNorm layer the identity).
#pragma once

#include "core/model/bert.h"
#include "core/model/head_mask.h"

namespace hp::prune {

// How far a slimmed model's logits may lie from the masked model's when prune.verify checks them: the same arithmetic
// on fewer terms, so float32 rounding alone; with mask tuning's scales folded into the weights they round once more.
inline constexpr double kSlimLogitTolerance = 1e-5;
inline constexpr double kFoldedLogitTolerance = 1e-4;
// How far transformers' logits of an export may lie from ours (tools/hf_check.py --tol).
inline constexpr double kHfLogitTolerance = 1e-4;
// How far ONNX Runtime's outputs of model.onnx may lie from ours (tools/onnx_export.py --tol).
inline constexpr double kOnnxTolerance = 1e-4;
// A tolerance as the scripts' flags and the messages write it: "1e-4".
std::string tolerance_text(double t);

// keep[l][h] indexes the heads present in `model` (position h of layer l); entries past a layer's head count
// are ignored. keep_neurons[l][i] likewise the FFN neurons present in layer l; empty = keep every neuron.
// keep_layers[l] = false removes layer l (empty = keep every layer); keep_hidden[c] = false hidden channel c
// (empty = keep every channel). The result shares no storage with `model`.
core::Bert slim_model(const core::Bert& model, const core::HeadSet& keep, const core::NeuronSet& keep_neurons = {},
                      const std::vector<bool>& keep_layers = {}, const std::vector<bool>& keep_hidden = {});
// The same from a parsed mask (core/model/head_mask.h).
core::Bert slim_model(const core::Bert& model, const core::StructureMask& keep);

// `model`'s parameters as tensors of their own (detached copies): a model to rewrite while the original stays as it was.
std::map<std::string, torch::Tensor> copy_parameters(const core::Bert& model);

// The dense fallback of a slimmed model (`prune export --dense`): the original shapes, with each removed
// head's query, key and value rows and biases and its output-projection columns zero, and no
// pruned_heads in the config, so any BERT loader reads it. A removed head's values are zero, so its
// context is zero whatever it attends to, and its zero output columns add nothing: the logits are the
// slimmed model's. FFN neurons are interchangeable (the block is a sum over them), so a slimmed layer's
// neurons go first and the rest of intermediate_size is zero: their GELU(0 + 0) = 0 meets zero output
// columns. No speedup. A model without removed heads or neurons comes back unchanged. A model without some hidden
// channels has no dense form (a LayerNorm over zero channels would count them): ConfigError saying so.
core::Bert dense_model(const core::Bert& slim);

}  // namespace hp::prune
