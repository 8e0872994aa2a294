// FLOP and parameter counts of the tiny config against counts done by hand (not by the formulas under test).
#include <catch2/catch.hpp>

#include "eval/flops.h"

namespace {

// tests/data/golden/tiny_bert: D 32, 2 layers x 4 heads (Dh 8), I 37, vocab 98, 64 positions, 3 labels.
hp::core::BertConfig tiny() {
  hp::core::BertConfig c;
  c.vocab_size = 98, c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.intermediate_size = 37, c.max_position_embeddings = 64, c.type_vocab_size = 2, c.num_labels = 3;
  return c;
}

}  // namespace

TEST_CASE("parameter count of the tiny config, whole and slimmed, by hand", "[eval][flops]") {
  // Embeddings: 98·32 + 64·32 + 2·32 + LayerNorm 2·32 = 3136 + 2048 + 64 + 64 = 5312.
  // A layer: Q, K, V 3·(32·32 + 32) = 3168, output 32·32 + 32 = 1056, LayerNorm 64, FFN in 32·37 + 37 = 1221,
  // FFN out 37·32 + 32 = 1216, LayerNorm 64: 6789; two layers 13578. Pooler 32·32 + 32 = 1056, classifier
  // 3·32 + 3 = 99. Total 5312 + 13578 + 1056 + 99 = 20045 (HF's num_parameters() for this model).
  auto c = tiny();
  CHECK(hp::eval::parameter_count(c) == 20045);
  // Layer 0 keeps 2 heads (16 columns), layer 1 keeps 1 (8): attention blocks of 3·(32·16 + 16) + 16·32 + 32
  // = 2128 and 3·(32·8 + 8) + 8·32 + 32 = 1080 instead of 4224 each: 20045 − 2096 − 3144 = 14805.
  c.pruned_heads = {{0, {1, 2}}, {1, {0, 1, 3}}};
  CHECK(hp::eval::parameter_count(c) == 14805);
}

TEST_CASE("forward FLOPs of the tiny config, whole and slimmed, by hand", "[eval][flops]") {
  // One sequence of 16 tokens. A layer's attention: Q, K, V 2·16·32·32·3 = 98304, scores 2·16·16·32 = 16384,
  // probs·V 16384, output 2·16·32·32 = 32768: 163840. FFN 2·16·32·37·2 = 75776. Two layers: 479232. Pooler
  // 2·32·32 = 2048, classifier 2·32·3 = 192: 481472 per sequence.
  auto c = tiny();
  CHECK(hp::eval::attention_flops(c, 0, 16) == Approx(163840).epsilon(1e-12));
  CHECK(hp::eval::forward_flops(c, 1, 16) == Approx(481472).epsilon(1e-12));
  CHECK(hp::eval::forward_flops(c, 3, 16) == Approx(3 * 481472).epsilon(1e-12));
  // Layer 0 with 2 heads (16 columns): 2·16·32·16·3 + 2·16·16·16 · 2 + 2·16·16·32 = 49152 + 16384 + 16384 = 81920.
  c.pruned_heads = {{0, {1, 2}}};
  CHECK(hp::eval::attention_flops(c, 0, 16) == Approx(81920).epsilon(1e-12));
  CHECK(hp::eval::forward_flops(c, 1, 16) == Approx(481472 - (163840 - 81920)).epsilon(1e-12));
}

TEST_CASE("per-structure FLOPs and parameters of the tiny config, FFN neurons removed, by hand", "[eval][flops]") {
  // 16 tokens. One head: Q, K, V rows 2·16·32·8·3 = 24576, scores and probs·V 2·2·16·16·8 = 8192, output
  // columns 2·16·8·32 = 8192: 40960 (= 163840 / 4). One neuron: its row and column 2·16·32·2 = 2048.
  auto c = tiny();
  CHECK(hp::eval::head_flops(c, 16) == Approx(40960).epsilon(1e-12));
  CHECK(hp::eval::neuron_flops(c, 16) == Approx(2048).epsilon(1e-12));
  CHECK(hp::eval::ffn_flops(c, 1, 16) == Approx(75776).epsilon(1e-12));
  CHECK(hp::eval::encoder_flops(c, 16) == Approx(2 * (163840 + 75776)).epsilon(1e-12));
  // One head: Q, K, V 3·(32·8 + 8) = 792 and output columns 8·32 = 256: 1048. One neuron: 32 + 1 + 32 = 65.
  CHECK(hp::eval::head_parameters(c) == 1048);
  CHECK(hp::eval::neuron_parameters(c) == 65);
  // Layer 0 keeps 10 neurons, layer 1 none (its FFN block is only the output bias and LayerNorm).
  // FLOPs: layer 0's FFN 2·16·32·10·2 = 20480, layer 1's 0: 481472 − 2·75776 + 20480 = 350400.
  // Parameters: layer 0 FFN 32·10 + 10 + 10·32 + 32 = 682 (was 2437), layer 1 32 (the bias; was 2437):
  // 20045 − 1755 − 2405 = 15885.
  c.intermediate_sizes = {10, 0};
  CHECK(hp::eval::ffn_flops(c, 0, 16) == Approx(20480).epsilon(1e-12));
  CHECK(hp::eval::ffn_flops(c, 1, 16) == 0);
  CHECK(hp::eval::forward_flops(c, 1, 16) == Approx(350400).epsilon(1e-12));
  CHECK(hp::eval::parameter_count(c) == 15885);
}
