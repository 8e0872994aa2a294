// Retraining-free search for the heads and FFN neurons to keep under a budget (Kwon et al. 2022, "A Fast
// Post-Training Pruning Framework for Transformers"), steps 1–3; step 4 (mask tuning) is prune/search/mask_tuning.h.
//
//   1. Mask gradients: on a sample of the rank split, with the weights frozen, the gradient of the batch's
//      mean task loss with respect to every head mask and every neuron mask (all at 1), one vector per batch.
//   2. Search: importance = the diagonal Fisher, Σ over batches of the squared mask gradient. For every head
//      count n (1 .. all heads), the n most important heads, then as many of the most important neurons as
//      the rest of the budget pays for; the count with the largest total importance wins.
//   3. Rearrangement: within each layer, its head and neuron counts fixed, greedy swaps that lower the
//      block-diagonal Fisher estimate of the loss increase, ‖Σ over removed units of g‖² (summed over
//      batches), which sees units that are important together.
//
// Budgets are in any additive unit cost: FLOPs at the task's mean length (eval/flops.h), or parameters.
#pragma once

#include <torch/types.h>

#include <functional>
#include <optional>
#include <string>

#include "core/model/bert.h"
#include "core/model/head_mask.h"
#include "prune/heads/criteria.h"  // RankData
#include "prune/objective/objective.h"  // MaskLoss

namespace hp::prune {

// What stays: heads [L][Hmax] and FFN neurons [L][Imax] (true = kept).
using StructureKeep = core::StructureMask;

// Per-batch mask gradients: heads [N, L, Hmax], neurons [N, L, Imax], float64 (N = batches); when asked for, hidden
// [N, D], the gradient of the hidden-channel mask shared by every layer (core::EncoderInput::hidden_mask), and
// layers [N, L], of each whole layer's gate (core::EncoderInput::layer_mask: x + z (layer(x) − x)).
struct MaskGradients {
  torch::Tensor heads, neurons;
  torch::Tensor hidden = {}, layers = {};  // undefined unless the search may remove hidden channels, layers
};

// Step 1 on `sample` (its batches as given). `progress(done, total)` after each batch; may be empty. The
// model's tensors must not require gradients. `hidden`, `layers`: also those masks' gradients.
MaskGradients mask_gradients(const core::Bert& model, const RankData& sample,
                             const std::function<void(long, long)>& progress = {}, bool hidden = false,
                             bool layers = false, const MaskLoss& loss = {});

// Step 1 stored: the gradients of mask_gradients(model, sample, …, hidden, layers, loss) in `path` (HDF5, with the
// seconds they took), computed when the file is missing or lacks the hidden channels' or layers' asked for, and read
// back from it, so that every reader (a resumed run, every rank) sees the stored values. `start` runs before computing
// (the stage's log line) and stops the step by returning false: nullopt then.
std::optional<MaskGradients> stored_mask_gradients(const std::string& path, const core::Bert& model,
                                                   const RankData& sample, bool hidden, bool layers,
                                                   const MaskLoss& loss, const std::function<bool()>& start);

// Σ over batches of g²: grads [N, L, U] → [L, U].
torch::Tensor fisher_diagonal(const torch::Tensor& grads);

// Michel et al.'s first-order Taylor importance on the same gradients, Σ over batches of |g| (each batch's
// mean gradient in place of one example's): [N, L, U] → [L, U]. A baseline ranking for top_units.
torch::Tensor taylor_importance(const torch::Tensor& grads);

using core::UnitCosts;  // the cost of one head and of one FFN neuron in the budget's unit

// What a budget may remove (prune.structures).
struct Prunable {
  bool heads = true, neurons = true;
  bool hidden = false, layers = false;
};

// Step 2: `budget` in the unit of `costs` (e.g. 0.5 × the unpruned encoder's FLOPs). Importances [L, H] and
// [L, I]; equal importances are taken in index order. A structure that may not be removed is kept whole and
// its cost comes off the budget first. ConfigError when not even one head fits.
StructureKeep search_budget(const torch::Tensor& head_importance, const torch::Tensor& neuron_importance,
                            const UnitCosts& costs, double budget, Prunable prunable = {});

// The diagonal Fisher importance of every unit of `grads` (hidden and layers undefined when they are).
struct Importances {
  torch::Tensor heads, neurons;  // [L, Hmax], [L, Imax]
  torch::Tensor hidden = {}, layers = {};  // [D], [L]
};
Importances fisher_importances(const MaskGradients& grads);

// Step 2 over whole layers and hidden channels as well (CoFi's two coarser structures, searched retraining-free).
// For every count n of `layer_counts` (layers kept; L alone unless prunable.layers) the L − n layers of least
// Fisher leave the stack, and for
// every width w of `widths` (channels kept; the whole width alone unless prunable.hidden) the w channels of
// highest Fisher stay; search_budget then fills the budget over the other layers' heads and neurons at the costs
// of that width (UnitCosts::at_hidden(w / D); a removed layer's units cost nothing). The (k, w) whose removed
// units have the least diagonal-Fisher estimate of the loss increase wins: the heads and neurons removed from
// the layers kept, the channels removed, and each removed layer's own gate (which stands for its units). With
// every layer and the whole width this is search_budget's own objective. keep.layers and keep.hidden are empty when nothing
// of theirs goes; a removed layer's heads and neurons are all false. An (n, w) that cannot pay one head is passed
// over; ConfigError when none can.
StructureKeep search_structures(const Importances& importance, const UnitCosts& costs, double budget,
                                Prunable prunable, const std::vector<long>& widths,
                                const std::vector<long>& layer_counts = {});

// The layer counts search_structures tries for `layers`: `configured` (prune.layer_counts, each checked against
// 1..layers), or with none every count from layers down to 1. Decreasing.
std::vector<long> layer_counts(long layers, const std::vector<int>& configured);

// The widths search_structures tries for `hidden` channels: `configured` (prune.hidden_widths, each checked
// against 1..hidden), or with none every multiple of hidden / 32 from hidden down to hidden / 4. Decreasing.
std::vector<long> hidden_widths(long hidden, const std::vector<int>& configured);

// Step 3 for one layer's units: `keep` [U] (its count is kept), `grads` [N, U]. Starting from the lowest-Fisher
// units removed, each remaining unit in increasing Fisher order joins the removed set and the unit whose
// departure leaves the smallest ‖Σ g‖² goes back.
std::vector<bool> greedy_rearrange(const std::vector<bool>& keep, const torch::Tensor& grads);

// Step 3 for every layer, heads and neurons (the hidden channels as chosen).
StructureKeep rearrange(const StructureKeep& keep, const MaskGradients& grads);

// The block-diagonal Fisher objective of a choice: Σ over layers and batches of ‖Σ over removed units g‖²
// (heads and neurons; lower is better). Step 3 lowers it layer by layer.
double block_fisher_loss(const StructureKeep& keep, const MaskGradients& grads);

// Baselines for the search's ranking (used with top_units): each head's and neuron's weight
// magnitude (the L2 norm of the weights that are its own alone: its Q, K, V rows and biases and
// output-projection columns; its first-matrix row and bias and second-matrix column), and uniform random
// scores from `seed`. heads [L, Hmax], neurons [L, Imax].
struct UnitImportance {
  torch::Tensor heads, neurons;
};
UnitImportance magnitude_importance(const core::Bert& model);
UnitImportance random_unit_importance(const core::BertConfig& cfg, int seed);

// The `n_heads` highest of `heads` and the `n_neurons` highest of `neurons` (equal values in index order): a
// baseline ranking at the counts the Fisher search chose, so that only which units differ, not how many.
StructureKeep top_units(const torch::Tensor& heads, const torch::Tensor& neurons, long n_heads, long n_neurons);

using core::structure_cost;

}  // namespace hp::prune
