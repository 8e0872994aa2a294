// Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3): how much of
// each input token reaches each position through the stack, treating the residual connection as half of
// every layer's mixing. Per layer l, Â_l = ½·mean_h(A_l,h) + ½·I (rows still sum to 1), and the rollout
// through layer l is R_l = Â_l · R_{l−1}, R_0 = Â_0. The mean runs over the heads present (a pruned
// head's attention does not reach the residual stream). Torch-free; definition: analysis/DEFINITIONS.md §12.
#pragma once

#include <cstdint>
#include <vector>

namespace hp::analysis {

// att: [L][H][n][n] row-major (row = query, column = key), `kept`: [L][H] (1 = present; empty = all).
// Returns [L][n][n]: the rollout through each layer. A layer with no head present mixes nothing (Â = I).
std::vector<float> attention_rollout(const std::vector<float>& att, int L, int H, int n,
                                     const std::vector<uint8_t>& kept = {});

}  // namespace hp::analysis
