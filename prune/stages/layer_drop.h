// Whole-layer dropping, `prune --target-layers N` (oBERT's and FastFormers' first step: Kurtic et al. 2022 drop
// layers before unstructured pruning; Kim and Awadalla 2020 distil to fewer layers): the model keeps N of its L
// layers, the others leave the stack (both sublayers and their LayerNorms; core/model/bert.h's layer mask), then
// recovery (stage 6) distils the unpruned model into it.
//
// Which layers (prune.layer_choice), each evaluated at stage 5 and reported, the configured one exported:
//   fisher     the layers whose removal costs least under Kwon et al.'s block-diagonal Fisher of the mask
//              gradients: layer l's loss is Σ_batches (Σ_heads g)² + Σ_batches (Σ_neurons g)², the estimate of
//              the loss increase from zeroing every head and neuron of the layer (prune/search/mask_search.h)
//   top        the last L − N layers (Sajjad et al. 2023's top-layer dropping)
//   alternate  every other layer from the top (L−1, L−3, …; then L−2, L−4, … if more must go)
#pragma once

#include <string>
#include <vector>

#include "prune/search/mask_search.h"
#include "prune/stages/summary.h"

namespace hp::prune {

struct RunContext;

// The choices in the order they are reported.
const std::vector<std::string>& layer_choices();

// Per layer, the block-Fisher loss of removing its heads and FFN neurons (above): grads [N, L, U] → L values.
std::vector<double> layer_fisher_loss(const MaskGradients& grads);

// keep[l] for the `n` layers `choice` keeps of `fisher_loss.size()` (ties in the Fisher loss: the later layer goes
// first). ConfigError for an unknown choice or n outside 1..L−1.
std::vector<bool> keep_layers(const std::string& choice, const std::vector<double>& fisher_loss, int n);

// Stage 5 with prune.target_layers: every choice evaluated with its layers masked, the configured one slimmed
// (checked against the masked model, <= 1e-5) into RUN_DIR/layers (choice.json last; a resumed run reads it).
FinalChoice choose_layers(RunContext& ctx, const MaskGradients& grads);

}  // namespace hp::prune
