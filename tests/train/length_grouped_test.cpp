// train/run_state length_grouped: Hugging Face's group_by_length order (trainer_pt_utils.get_length_grouped_indices)
// on a shuffle: every example once, mega-batches of min(n / (4 b), 50) · b sorted longest first, the longest example
// first of all; and the same transcription of transformers' function on a hand case.
#include "train/run_state.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

TEST_CASE("length-grouped batches: each example once, mega-batches sorted longest first, the longest first of all",
          "[train]") {
  std::mt19937 gen(5);
  std::vector<size_t> lengths(1003);
  for (auto& l : lengths) l = 3 + gen() % 120;
  const int b = 8;
  const auto order = hp::train::epoch_order(static_cast<long>(lengths.size()), 42, 1, 0);
  const auto g = hp::train::length_grouped(order, lengths, b);
  std::vector<long> sorted_g(g), sorted_o(order);
  std::sort(sorted_g.begin(), sorted_g.end()), std::sort(sorted_o.begin(), sorted_o.end());
  CHECK(sorted_g == sorted_o);
  CHECK(lengths[g[0]] == *std::max_element(lengths.begin(), lengths.end()));
  const size_t mega = static_cast<size_t>(std::min<size_t>(lengths.size() / (4 * b), 50) * b);  // 31 · 8
  CHECK(mega == 248);
  for (size_t start = 0; start < g.size(); start += mega) {
    const size_t end = std::min(g.size(), start + mega);
    // Longest first, past the mega-batch's first position (the swap may have changed it).
    for (size_t i = start + 2; i < end; ++i) CHECK(lengths[g[i - 1]] >= lengths[g[i]]);
  }
  // transformers' function on lengths [3, 9, 1, 7, 5, 9, 2] with indices = the order below and batch size 1:
  // mega_batch_mult = min(7 // 4, 50) = 1, megabatches of 1: the longest (9 at index 1, in megabatch 3) swapped to
  // the front: [1, 4, 6, 0, 2, 3, 5].
  const std::vector<size_t> hand = {3, 9, 1, 7, 5, 9, 2};
  CHECK(hp::train::length_grouped({0, 4, 6, 1, 2, 3, 5}, hand, 1) == std::vector<long>{1, 4, 6, 0, 2, 3, 5});
  // Batch size 2: mult = min(7 // 8, 50) = 0 -> 1, megabatches of 2 sorted: [4, 0], [1, 6], [3, 2], [5]; the
  // longest first element (9, index 1, second megabatch) swapped with the first: [1, 0, 4, 6, 3, 2, 5].
  CHECK(hp::train::length_grouped({0, 4, 6, 1, 2, 3, 5}, hand, 2) == std::vector<long>{1, 0, 4, 6, 3, 2, 5});
}
