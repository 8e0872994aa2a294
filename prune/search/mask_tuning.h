// Mask tuning (Kwon et al. 2022, step 4): after the search has chosen which heads and FFN neurons stay, one
// scale per kept head and per kept neuron, fitted layer by layer so that the pruned layer reconstructs the
// unpruned one's output on the sample. The scales fold into the weights (a head's output-projection columns,
// a neuron's column of the second FFN matrix), so the exported model is a plain slimmed BERT.
//
// Each sublayer is linear in its scales before its LayerNorm: attention x + b_o + Σ_h s_h · ctx_h W_o,hᵀ, the
// FFN a + b_2 + Σ_i s_i · act_i W_2,i. Layer by layer, on the student's own inputs (the layers below already
// tuned) and the unpruned teacher's outputs, s minimises ‖A s − r‖² + λ ‖s − 1‖² over real tokens (padding
// excluded; in the last layer of a classifier only the [CLS] row, all the pooler reads), with r the teacher's
// pre-LayerNorm value minus the student's residual and bias, and λ = damping × mean(diag AᵀA): ridge toward
// "no change", which keeps a poorly determined scale near 1. A solve that fails or gives a scale outside
// ±max_scale leaves that sublayer's scales at 1 and is reported.
//
// Departures from Kwon et al.'s code: the teacher is the unpruned model (theirs is the model pruned at an
// intermediate budget, √F-like, from their schedule); the fit is damped toward 1 instead of their LSMR
// solve; their extra constant column in the attention fit is left out (it cannot be folded into a slimmed
// BERT's weights without changing the bias); layer 0's attention is tuned too (they skip it).
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "prune/search/mask_search.h"

namespace hp::prune {

// Scales per present unit: heads [L, Hmax], neurons [L, Imax]; 0 for removed units, 1 where nothing changed.
struct MaskScales {
  torch::Tensor heads, neurons;
};

// The 0/1 scales of a choice (no tuning).
MaskScales unit_scales(const StructureKeep& keep);

// The normal equations of one sublayer fit, summed over batches: AᵀA [K, K], Aᵀr [K], rᵀr (float64).
struct LstsqSystem {
  torch::Tensor ata, atr;
  double rtr = 0;
  void add(const LstsqSystem& other);
};

// One batch's attention system for the kept heads `kept` (indices into the H present heads): ctx [B, H, S, Dh]
// the student's head contexts, o_w [D, H·Dh], residual [B, S, D] the target minus the student's input and
// output bias, rows [B, S] bool (the rows that count).
LstsqSystem attention_system(const torch::Tensor& ctx, const torch::Tensor& o_w, const torch::Tensor& residual,
                             const torch::Tensor& rows, const std::vector<long>& kept);
// One batch's FFN system for the kept neurons: acts [B, S, I] (before the neuron mask), w2 [D, I].
LstsqSystem ffn_system(const torch::Tensor& acts, const torch::Tensor& w2, const torch::Tensor& residual,
                       const torch::Tensor& rows, const std::vector<long>& kept);

// s = argmin ‖A s − r‖² + λ ‖s − 1‖² with λ = damping × mean(diag AᵀA), from the normal equations.
torch::Tensor damped_lstsq(const LstsqSystem& system, double damping);

struct TuningOptions {
  double damping = 1e-2;
  double max_scale = 10;
  bool cls_last_layer = true;  // classifier: the last layer is fitted on its [CLS] rows only
};

// Per sublayer: the fit's relative residual ‖A s − r‖² / ‖r‖² at s = 1 and after (never above before: a solve that
// fits worse is not taken), or why it was skipped.
struct SublayerFit {
  int layer = 0;
  std::string block;  // "attention" or "ffn"
  double before = 0, after = 0;
  std::string skipped;  // non-empty: the scales stayed at 1
};

// Tunes the scales of `keep` on `sample`. `progress(done, total)` per layer; may be empty. With keep.hidden the
// student runs with those channels masked and each sublayer's fit counts the kept channels alone (its LayerNorm
// normalises over them). A layer keep.layers removes is skipped: the next layer kept fits the teacher's output of
// its own from the student's input as it is. On a model on a GPU (run.device) the forwards and each batch's system
// run there; the K × K systems come back, and are summed and solved, on the CPU, where the scales are.
MaskScales tune_masks(const core::Bert& model, const StructureKeep& keep, const RankData& sample,
                      const TuningOptions& opts, std::vector<SublayerFit>* fits = nullptr,
                      const std::function<void(long, long)>& progress = {});

// The model with the scales folded in: head h's output-projection columns and neuron i's column of the
// second FFN matrix multiplied by its scale. Masking with the 0/1 choice then equals masking with the scales.
core::Bert fold_scales(const core::Bert& model, const MaskScales& scales);

}  // namespace hp::prune
