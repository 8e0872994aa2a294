// prune/stages/layer_drop.h: the block Fisher loss of dropping a whole layer, against sums worked out by hand (#61).
#include <catch2/catch.hpp>

#include <torch/types.h>

#include <vector>

#include "prune/stages/layer_drop.h"

// Two batches, two layers, two heads and three neurons a layer. Layer 0's head gradients cancel within each batch,
// so zeroing the whole layer costs nothing to first order in the block Fisher, (Σ_units g)², while its diagonal
// Σ g² is the largest; layer 1's head gradients cancel only across batches, which the block sums per batch.
TEST_CASE("layer Fisher loss: Σ_batches (Σ_units g)², per batch and per unit kind, not Σ g² nor (Σ_batches Σ g)²",
          "[prune][layers]") {
  hp::prune::MaskGradients g;
  // heads [N=2, L=2, H=2]: batch 0: layer 0 (1, -1), layer 1 (1, 0); batch 1: layer 0 (2, -2), layer 1 (-1, 0).
  g.heads = torch::tensor({1.0, -1.0, 1.0, 0.0, 2.0, -2.0, -1.0, 0.0}).reshape({2, 2, 2});
  // neurons [2, 2, 3]: zero but batch 0 of layer 1 (1, 1, -1): (Σ g)² = 1.
  g.neurons = torch::zeros({2, 2, 3});
  g.neurons[0][1] = torch::tensor({1.0, 1.0, -1.0});
  const auto loss = hp::prune::layer_fisher_loss(g);
  REQUIRE(loss.size() == 2);
  // Layer 0: (1 − 1)² + (2 − 2)² = 0. Layer 1: heads 1² + (−1)² = 2, neurons (1 + 1 − 1)² = 1: 3.
  // (The diagonal would give 10 and 5; the sum over batches before squaring 0 and 1.)
  CHECK(loss[0] == Approx(0.0).margin(1e-12));
  CHECK(loss[1] == Approx(3.0).epsilon(1e-12));
  // So fisher drops layer 0 and keeps layer 1, where the diagonal would drop layer 1.
  CHECK(hp::prune::keep_layers("fisher", loss, 1) == std::vector<bool>{false, true});
  // Heads and neurons are separate blocks, squared apart: batch 0 of layer 1 gives 1² + 1², not (1 + 1)² (5 in all).
  g.neurons = torch::zeros({2, 2, 3});
  g.neurons[0][1][0] = 1.0;
  CHECK(hp::prune::layer_fisher_loss(g)[1] == Approx(2.0 + 1.0).epsilon(1e-12));
}
