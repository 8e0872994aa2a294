// Attention rollout (analysis/rollout.h) against values computed by hand from Abnar & Zuidema's
// definition (their compute_joint_attention: (A + I) row-normalised, multiplied layer after layer).
#include <catch2/catch.hpp>

#include "analysis/rollout.h"
#include "core/base/errors.h"

using hp::analysis::attention_rollout;

TEST_CASE("rollout: two layers by hand, heads averaged, residual as half of every layer", "[rollout]") {
  // Layer 0, two heads: mean [[0.5, 0.5], [0.2, 0.8]] → Â0 = [[0.75, 0.25], [0.1, 0.9]].
  // Layer 1, one head swapping the tokens: Â1 = [[0.5, 0.5], [0.5, 0.5]] → R1 = Â1·Â0 = [[0.425, 0.575]] × 2.
  const std::vector<float> att = {1.0f, 0.0f, 0.4f, 0.6f, 0.0f, 1.0f, 0.0f, 1.0f,  // layer 0: heads 0, 1
                                  0.0f, 1.0f, 1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f};  // layer 1: heads 0, 1
  const auto r = attention_rollout(att, 2, 2, 2);
  REQUIRE(r.size() == 8);
  const std::vector<float> want = {0.75f, 0.25f, 0.1f, 0.9f, 0.425f, 0.575f, 0.425f, 0.575f};
  for (size_t i = 0; i < want.size(); ++i) CHECK(r[i] == Approx(want[i]).margin(1e-6));
}

TEST_CASE("rollout: a pruned head leaves the mean, a layer without heads mixes nothing", "[rollout]") {
  const std::vector<float> att = {1.0f, 0.0f, 0.4f, 0.6f, 0.0f, 1.0f, 0.0f, 1.0f,
                                  0.0f, 1.0f, 1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f};
  // Layer 0 keeps head 0 only: Â0 = [[1, 0], [0.2, 0.8]]; layer 1 has no head: R1 = R0.
  const auto r = attention_rollout(att, 2, 2, 2, {1, 0, 0, 0});
  const std::vector<float> want = {1.0f, 0.0f, 0.2f, 0.8f, 1.0f, 0.0f, 0.2f, 0.8f};
  for (size_t i = 0; i < want.size(); ++i) CHECK(r[i] == Approx(want[i]).margin(1e-6));
  CHECK_THROWS_AS(attention_rollout(att, 2, 2, 3), hp::Error);
}
