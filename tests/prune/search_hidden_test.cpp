// The retraining-free search over hidden channels and whole layers (prune/search/mask_search.h search_structures,
// prune/search/mask_tuning.h with keep.hidden and keep.layers): the hidden and layer masks' gradients against central
// differences of the loss, the width and the layers chosen by hand, the widths tried, and mask tuning with removed
// channels against a fit built here from the model's own pieces (kept channels only), folded = scaled = slimmed,
// and with a removed layer.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "core/base/errors.h"
#include "core/model/head_loss.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "fixtures.h"
#include "golden_data.h"
#include "prune/search/mask_search.h"
#include "prune/search/mask_tuning.h"
#include "prune/export/slim.h"
#include "tuning_check.h"

using namespace hp;

namespace {

core::EncoderInput golden_input(const std::map<std::string, torch::Tensor>& g) {
  core::EncoderInput in;
  in.input_ids = g.at("input_ids");
  in.token_type_ids = g.at("token_type_ids");
  in.attention_mask = g.at("attention_mask");
  return in;
}

std::vector<bool> every_third_removed(long D) {
  std::vector<bool> keep(static_cast<size_t>(D), true);
  for (long c = 1; c < D; c += 3) keep[static_cast<size_t>(c)] = false;
  return keep;
}

// The golden batch as one rank batch, and the model `dir`.
struct Golden {
  std::map<std::string, torch::Tensor> g;
  core::Bert model;
  prune::RankData rank;
};
Golden golden(const std::string& dir) {
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto data = test::golden_dataset(g);
  auto rank = prune::make_rank_data(core::find_task("mnli"), data, static_cast<int>(data.size()), 0);
  return {g, core::load_bert(dir), rank};
}

}  // namespace

TEST_CASE("hidden-mask and layer-mask gradients: central differences of the batch loss; heads and neurons unchanged",
          "[prune][kwon][hidden]") {
  const Golden fixture = golden(test::kTinyBert);
  const auto &g = fixture.g;
  const auto &model = fixture.model;
  const auto &rank = fixture.rank;
  REQUIRE(rank.batches.size() == 1);
  const auto with = prune::mask_gradients(model, rank, {}, /*hidden=*/true, /*layers=*/true);
  const auto without = prune::mask_gradients(model, rank);
  CHECK(!without.hidden.defined());
  CHECK(!without.layers.defined());
  REQUIRE(with.hidden.sizes() == torch::IntArrayRef({1, 32}));
  REQUIRE(with.layers.sizes() == torch::IntArrayRef({1, 2}));
  CHECK((with.heads - without.heads).abs().max().item<double>() <= 1e-6);
  CHECK((with.neurons - without.neurons).abs().max().item<double>() <= 1e-6);
  // The loss as a function of one channel's mask value, by central differences.
  torch::NoGradGuard no_grad;
  const auto& b = rank.batches[0];
  auto loss_at = [&](long c, double v, bool layer = false) {
    core::EncoderInput in = core::encoder_input(b);
    auto& mask = layer ? in.layer_mask : in.hidden_mask;
    mask = torch::ones({layer ? 2 : 32});
    mask[c] = v;
    in.cls_only = true;
    return core::per_example_loss(model.forward(in).logits, b.labels, false).mean().item<double>();
  };
  const double eps = 1e-2;
  double largest = 0;
  for (long c = 0; c < 32; ++c) largest = std::max(largest, std::abs(with.hidden[0][c].item<double>()));
  REQUIRE(largest > 1e-3);
  for (long c = 0; c < 32; c += 5) {
    const double fd = (loss_at(c, 1 + eps) - loss_at(c, 1 - eps)) / (2 * eps);
    INFO("channel " << c);
    CHECK(with.hidden[0][c].item<double>() == Approx(fd).margin(2e-3 * largest + 1e-5));
  }
  for (long l = 0; l < 2; ++l) {
    const double fd = (loss_at(l, 1 + eps, true) - loss_at(l, 1 - eps, true)) / (2 * eps);
    INFO("layer " << l << ": " << with.layers[0][l].item<double>() << " against " << fd);
    CHECK(std::abs(fd) > 1e-4);
    CHECK(with.layers[0][l].item<double>() == Approx(fd).epsilon(1e-2).margin(1e-5));
  }
}

namespace {

prune::StructureKeep search(const torch::Tensor& heads, const torch::Tensor& neurons, const torch::Tensor& hidden,
                            const prune::UnitCosts& costs, double budget, const std::vector<long>& widths) {
  return prune::search_structures({heads, neurons, hidden}, costs, budget, {true, true, true, false}, widths);
}

}  // namespace

TEST_CASE("search over hidden widths: the width that keeps the most importance, by hand", "[prune][kwon][hidden]") {
  // One layer, 2 heads, 4 neurons, 4 channels; a head costs 4 and a neuron 2, all of it in proportion to the width
  // kept (w / 4). Budget 6. Width 4: one head and one neuron (5 + 2) + channels 20.6 = 27.6. Width 3 (head 3, neuron
  // 1.5): one head and two neurons, 9 + 20.5 = 29.5. Width 2 (head 2, neuron 1): one head and four neurons, 11 + 20 =
  // 31 (two heads and two neurons: 10). Width 1: two heads and four neurons, 12 + 10 = 22. Width 2 wins.
  const auto heads = torch::tensor({5.0, 1.0}).view({1, 2});
  const auto neurons = torch::tensor({2.0, 2.0, 1.0, 1.0}).view({1, 4});
  const prune::UnitCosts costs{4, 2, 4, 2};
  const auto keep = search(heads, neurons, torch::tensor({0.5, 10.0, 0.1, 10.0}), costs, 6, {4, 3, 2, 1});
  CHECK(keep.hidden == std::vector<bool>{false, true, false, true});
  CHECK(keep.heads == core::HeadSet{{true, false}});
  CHECK(keep.neurons == core::NeuronSet{{true, true, true, true}});
  CHECK(core::structure_cost(keep, costs) == Approx(6));
  // Channels worth more than what their width buys: every channel stays (an empty keep.hidden).
  const auto whole = search(heads, neurons, torch::tensor({10.0, 10.0, 10.0, 10.0}), costs, 6, {4, 3, 2, 1});
  CHECK(whole.hidden.empty());
  CHECK(whole.heads == core::HeadSet{{true, false}});
  // A budget that pays one head only at a narrow width: the wider ones are passed over.
  const auto narrow = search(heads, neurons, torch::tensor({10.0, 10.0, 10.0, 10.0}), costs, 1.5, {4, 3, 1});
  CHECK(core::count_kept({narrow.hidden}) == 1);
  CHECK_THROWS_AS(search(heads, neurons, torch::ones({4}), costs, 0.5, {4, 2}), ConfigError);

  const auto widths = prune::hidden_widths(384, {});
  CHECK(widths.size() == 25);
  CHECK(widths.front() == 384);
  CHECK(widths[1] == 372);
  CHECK(widths.back() == 96);
  CHECK(prune::hidden_widths(384, {96, 288, 96}) == std::vector<long>{288, 96});
  CHECK_THROWS_AS(prune::hidden_widths(384, {385}), ConfigError);
  CHECK_THROWS_AS(prune::hidden_widths(384, {0}), ConfigError);
  CHECK(prune::layer_counts(6, {}) == std::vector<long>{6, 5, 4, 3, 2, 1});
  CHECK(prune::layer_counts(6, {4, 6, 4}) == std::vector<long>{6, 4});
  CHECK_THROWS_AS(prune::layer_counts(6, {7}), ConfigError);
}

TEST_CASE("search over whole layers: a layer leaves when its gate's Fisher is below what its units would lose, "
          "by hand",
          "[prune][kwon][hidden]") {
  // Two layers of one head (cost 4) and two neurons (cost 1); budget 6. Both layers kept: head 0 and layer 0's two
  // neurons fit (9 of 11), removed 2 (head 1 and layer 1's neurons). Layer 1 removed (its gate's Fisher 0.3): layer
  // 0's units all fit, removed 0.3, which wins. With layer 1's gate at 5 keeping it wins (2 < 5).
  const auto heads = torch::tensor({5.0, 1.0}).view({2, 1});
  const auto neurons = torch::tensor({2.0, 2.0, 0.5, 0.5}).view({2, 2});
  const prune::Prunable all{true, true, false, true};
  const auto keep = prune::search_structures({heads, neurons, {}, torch::tensor({10.0, 0.3})}, {4, 1}, 6, all, {}, {2, 1});
  CHECK(keep.layers == std::vector<bool>{true, false});
  CHECK(keep.heads == core::HeadSet{{true}, {false}});
  CHECK(keep.neurons == core::NeuronSet{{true, true}, {false, false}});
  CHECK(keep.hidden.empty());
  const auto kept = prune::search_structures({heads, neurons, {}, torch::tensor({10.0, 5.0})}, {4, 1}, 6, all, {}, {2, 1});
  CHECK(kept.layers.empty());
  CHECK(kept.heads == core::HeadSet{{true}, {false}});
  CHECK(kept.neurons == core::NeuronSet{{true, true}, {false, false}});
  // The least important layer goes first: with layer 0's gate at 0.1 layer 0 goes (0.1 removed; layer 1's units
  // all fit).
  const auto first = prune::search_structures({heads, neurons, {}, torch::tensor({0.1, 5.0})}, {4, 1}, 6, all, {}, {2, 1});
  CHECK(first.layers == std::vector<bool>{false, true});
  CHECK(first.heads == core::HeadSet{{false}, {true}});
  // Counts tried as given: with both layers required, none leaves.
  CHECK(prune::search_structures({heads, neurons, {}, torch::tensor({0.1, 5.0})}, {4, 1}, 6, all, {}, {2}).layers.empty());
}

TEST_CASE("mask tuning with removed hidden channels: layer 0's attention fit by hand over the kept channels; "
          "folded = scaled = slimmed",
          "[prune][kwon][hidden][tuning]") {
  const Golden fixture = golden(test::kTinyBert);
  const auto &g = fixture.g;
  const auto &model = fixture.model;
  const auto &rank = fixture.rank;
  REQUIRE(rank.batches.size() == 1);
  prune::StructureKeep keep{{{true, false, true, true}, {true, true, false, true}},
                            {std::vector<bool>(37, true), std::vector<bool>(37, true)}};
  for (long i = 0; i < 37; i += 4) keep.neurons[0][i] = keep.neurons[1][i + 1 < 37 ? i + 1 : i] = false;
  keep.hidden = every_third_removed(32);
  prune::TuningOptions opts;
  std::vector<prune::SublayerFit> fits;
  const auto scales = prune::tune_masks(model, keep, rank, opts, &fits);
  REQUIRE(fits.size() == 4);
  for (const auto& f : fits) {
    INFO("layer " << f.layer << " " << f.block << ": " << f.before << " -> " << f.after << " " << f.skipped);
    CHECK(f.skipped.empty());
    CHECK(f.after <= f.before);
  }

  // Layer 0's attention by hand: the student (channels masked) and the teacher (whole) from the embeddings, the
  // pre-LayerNorm target minus the student's input and bias, each kept head's output projection, both over the
  // kept channels of the real tokens only; solved with the same damping.
  torch::NoGradGuard no_grad;
  const auto& b = rank.batches[0];
  const auto h = eval::hidden_mask_tensor(keep.hidden);
  core::EncoderInput teacher_in = core::encoder_input(b);
  teacher_in.end_layer = 1, teacher_in.want_context = true;
  core::EncoderInput student_in = teacher_in;
  student_in.hidden_mask = h;
  student_in.head_mask = eval::head_mask_tensor(keep.heads);
  const auto& p = model.parameters();
  const auto wo = p.at("encoder.layer.0.attention.output.dense.weight"), bo = p.at("encoder.layer.0.attention.output.dense.bias");
  const auto xt = model.embed(teacher_in), xs = model.embed(student_in);
  const auto ct = model.forward(teacher_in).contexts[0], cs = model.forward(student_in).contexts[0];  // [B, H, S, 8]
  const auto target = xt + bo + torch::matmul(ct.transpose(1, 2).flatten(2), wo.t());
  const auto rows = b.attention_mask.to(torch::kBool);
  const auto r = ((target - xs - bo) * h).index({rows}).to(torch::kFloat64).reshape({-1});
  std::vector<torch::Tensor> columns;
  for (long head : {0L, 2L, 3L}) {
    const auto part = torch::matmul(cs.select(1, head), wo.narrow(1, head * 8, 8).t()) * h;  // [B, S, D]
    columns.push_back(part.index({rows}).to(torch::kFloat64).reshape({-1}));
  }
  const auto A = torch::stack(columns, 1);  // [T·D, 3]
  const auto ata = A.t().mm(A);
  const double lambda = opts.damping * ata.diagonal().mean().item<double>() + 1e-12;
  const auto want = torch::linalg_solve(ata + lambda * torch::eye(3, torch::kFloat64),
                                        A.t().mv(r) + lambda * torch::ones({3}, torch::kFloat64));
  const auto got = scales.heads[0].index_select(0, torch::tensor({0L, 2L, 3L})).to(torch::kFloat64);
  INFO("by hand " << want << " tuned " << got);
  CHECK((got - want).abs().max().item<double>() <= 1e-4 * want.abs().max().item<double>());
  CHECK(scales.heads[0][1].item<double>() == 0);

  // Folded into the weights: the 0/1 masks with the channels removed = the scales = the slimmed export.
  const auto slim = test::check_tuned(model, keep, scales, golden_input(g));
  CHECK(slim.config().hidden_size == 21);
}

TEST_CASE("mask tuning with a removed layer: the next layer fits from the student's input; folded = slimmed",
          "[prune][kwon][hidden][tuning]") {
  const Golden fixture = golden(test::kTinyBertL4);  // 4 layers: layer 1 goes, layer 2 fits all rows
  const auto &g = fixture.g;
  const auto &model = fixture.model;
  const auto &rank = fixture.rank;
  prune::StructureKeep keep{{{true, true, true, true}, {false, false, false, false}, {true, false, true, true},
                             {true, true, false, true}},
                            std::vector<std::vector<bool>>(4, std::vector<bool>(37, true))};
  keep.neurons[1].assign(37, false);
  for (long i = 0; i < 37; i += 3) keep.neurons[2][i] = keep.neurons[3][i] = false;
  keep.layers = {true, false, true, true};
  std::vector<prune::SublayerFit> fits;
  const auto scales = prune::tune_masks(model, keep, rank, {}, &fits);
  REQUIRE(fits.size() == 6);  // attention and FFN of layers 0, 2 and 3
  for (const auto& f : fits) {
    INFO("layer " << f.layer << " " << f.block << ": " << f.before << " -> " << f.after << " " << f.skipped);
    CHECK(f.layer != 1);
    CHECK(f.after <= f.before);
  }
  // Layer 2 is the first fitted after the removed layer: its attention fit starts far off (the student's input
  // lacks layer 1) and the scales take some of it back.
  const auto first = std::find_if(fits.begin(), fits.end(), [](const auto& f) { return f.layer == 2; });
  REQUIRE(first != fits.end());
  CHECK(first->skipped.empty());
  CHECK(first->after < first->before);
  const auto slim = test::check_tuned(model, keep, scales, golden_input(g));
  CHECK(slim.config().num_hidden_layers == 3);
}
