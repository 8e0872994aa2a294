// The evaluation loop: batched forward passes without gradients, predictions back in dataset order,
// task metrics (eval/metrics.h) and throughput. Used by `prune eval`, pruning curves and training.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/data/batching.h"
#include "core/model/bert.h"
#include "core/data/glue.h"
#include "core/model/head_mask.h"

namespace hp::eval {

struct EvalResult {
  std::map<std::string, double> metrics;  // empty when the split has no labels
  std::vector<float> predictions;  // N: class index, or the score for regression; a tagger's: predictions_of
  torch::Tensor logits;  // [N, C] in dataset order; a tagger's [N, S, C] (S: the longest example, zero-padded)
  long examples = 0;
  long tokens = 0;  // real (non-padding) tokens
  long padded_tokens = 0;  // tokens computed, padding included
  double seconds = 0;
  double examples_per_s = 0;
};

// [L, Hmax] float gates: 1 for kept heads, 0 for masked ones (rows padded with 1).
torch::Tensor head_mask_tensor(const core::HeadSet& keep);
// [L, Imax] float gates for FFN neurons, the same way (EncoderInput::neuron_mask).
inline torch::Tensor neuron_mask_tensor(const core::NeuronSet& keep) { return head_mask_tensor(keep); }
// [L] float gates for layers (EncoderInput::layer_mask): 1 kept, 0 removed; undefined for an empty list.
torch::Tensor layer_mask_tensor(const std::vector<bool>& keep);
// [D] float gates for hidden channels (EncoderInput::hidden_mask), the same way.
inline torch::Tensor hidden_mask_tensor(const std::vector<bool>& keep) { return layer_mask_tensor(keep); }

// The masks of an evaluation (EncoderInput's head, neuron, layer and hidden masks); undefined = all ones.
struct Masks {
  torch::Tensor heads = {}, neurons = {}, layers = {}, hidden = {};
};
// The 0/1 masks of a structure (neurons, layers and hidden undefined where its lists are empty).
Masks masks_of(const core::StructureMask& keep);
// Puts `m` on an encoder input.
void set_masks(core::EncoderInput& in, const Masks& m);

// Runs the model over `batches` of `data` (eval mode, no grad), with `masks`.
EvalResult evaluate(const core::Bert& model, const core::TaskSpec& task, const core::EncodedDataset& data,
                    const std::vector<core::Batch>& batches, const Masks& masks = {}, bool show_progress = false);

// run.calibrate: when the model runs at int8 and run.calibrate = n > 0, calibrates its int8 products
// (core::Bert::calibrate_int8) on the first n examples of data.task's train split (data.root, data.max_seq_len),
// under the given masks, and logs one line. Otherwise nothing. Returns how many examples it calibrated on (0 when
// it did not): fewer than n when the split holds fewer, with a warning naming both counts.
int calibrate_int8(core::Bert& model, const core::Config& cfg, const core::Tokenizer& tok, const Masks& masks = {});

// A dataset's logits in its order: [N, C], or for a token head (`seq` > 0, its longest example) [N, seq, C], zero
// until put_rows fills them.
torch::Tensor dataset_logits(long n, long classes, long seq = 0);
// Rows `index` of `all` (dataset_logits) set to a batch's logits (moved to the CPU as float32); a tagger's batch
// fills its first S positions.
void put_rows(torch::Tensor& all, const torch::Tensor& logits, const std::vector<long>& index);

// Predictions from logits: argmax, or logits[:, 0] for regression. logits: [N, C].
std::vector<float> predictions_from_logits(const torch::Tensor& logits, bool regression);
// The predictions the metrics read for every example of `data` from its logits in dataset order: those of
// predictions_from_logits, or a tagger's ([N, S, C]) tag at each scored token, each sentence closed by
// core::kSentenceEnd, as core::gold_labels lays out the gold ones.
std::vector<float> predictions_of(const torch::Tensor& logits, const core::EncodedDataset& data, bool regression);

}  // namespace hp::eval
