// The retraining-free search over hidden channels (prune/mask_search.h search_budget_hidden, prune/mask_tuning.h
// with keep.hidden): the hidden mask's gradients against central differences of the loss, the width chosen by
// hand, the widths tried, and mask tuning with removed channels against a fit built here from the model's own
// pieces (kept channels only), folded = scaled = slimmed.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "core/base/errors.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "fixtures.h"
#include "golden_data.h"
#include "prune/mask_search.h"
#include "prune/mask_tuning.h"
#include "prune/slim.h"

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

}  // namespace

TEST_CASE("hidden-mask gradients: central differences of the batch loss; heads and neurons unchanged",
          "[prune][kwon][hidden]") {
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto model = core::load_bert(test::kTinyBert);
  const auto data = test::golden_dataset(g);
  const auto rank = prune::make_rank_data(core::find_task("mnli"), data, static_cast<int>(data.size()), 0);
  REQUIRE(rank.batches.size() == 1);
  const auto with = prune::mask_gradients(model, rank, {}, /*hidden=*/true);
  const auto without = prune::mask_gradients(model, rank);
  CHECK(!without.hidden.defined());
  REQUIRE(with.hidden.sizes() == torch::IntArrayRef({1, 32}));
  CHECK((with.heads - without.heads).abs().max().item<double>() <= 1e-6);
  CHECK((with.neurons - without.neurons).abs().max().item<double>() <= 1e-6);
  // The loss as a function of one channel's mask value, by central differences.
  torch::NoGradGuard no_grad;
  const auto& b = rank.batches[0];
  auto loss_at = [&](long c, double v) {
    core::EncoderInput in = core::encoder_input(b);
    in.hidden_mask = torch::ones({32});
    in.hidden_mask[c] = v;
    in.cls_only = true;
    return prune::per_example_loss(model.forward(in).logits, b.labels, false).mean().item<double>();
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
}

TEST_CASE("search over hidden widths: the width that keeps the most importance, by hand", "[prune][kwon][hidden]") {
  // One layer, 2 heads, 4 neurons, 4 channels; a head costs 4 and a neuron 2, all of it in proportion to the width
  // kept (w / 4). Budget 6. Width 4: one head and one neuron (5 + 2) + channels 20.6 = 27.6. Width 3 (head 3, neuron
  // 1.5): one head and two neurons, 9 + 20.5 = 29.5. Width 2 (head 2, neuron 1): one head and four neurons, 11 + 20 =
  // 31 (two heads and two neurons: 10). Width 1: two heads and four neurons, 12 + 10 = 22. Width 2 wins.
  const auto heads = torch::tensor({5.0, 1.0}).view({1, 2});
  const auto neurons = torch::tensor({2.0, 2.0, 1.0, 1.0}).view({1, 4});
  const prune::UnitCosts costs{4, 2, 4, 2};
  const auto keep = prune::search_budget_hidden(heads, neurons, torch::tensor({0.5, 10.0, 0.1, 10.0}), costs, 6,
                                                {}, {4, 3, 2, 1});
  CHECK(keep.hidden == std::vector<bool>{false, true, false, true});
  CHECK(keep.heads == core::HeadSet{{true, false}});
  CHECK(keep.neurons == core::NeuronSet{{true, true, true, true}});
  CHECK(core::structure_cost(keep, costs) == Approx(6));
  // Channels worth more than what their width buys: every channel stays (an empty keep.hidden).
  const auto whole = prune::search_budget_hidden(heads, neurons, torch::tensor({10.0, 10.0, 10.0, 10.0}), costs, 6,
                                                 {}, {4, 3, 2, 1});
  CHECK(whole.hidden.empty());
  CHECK(whole.heads == core::HeadSet{{true, false}});
  // A budget that pays one head only at a narrow width: the wider ones are passed over.
  const auto narrow = prune::search_budget_hidden(heads, neurons, torch::tensor({10.0, 10.0, 10.0, 10.0}), costs,
                                                  1.5, {}, {4, 3, 1});
  CHECK(core::count_kept({narrow.hidden}) == 1);
  CHECK_THROWS_AS(prune::search_budget_hidden(heads, neurons, torch::ones({4}), costs, 0.5, {}, {4, 2}), ConfigError);

  const auto widths = prune::hidden_widths(384, {});
  CHECK(widths.size() == 25);
  CHECK(widths.front() == 384);
  CHECK(widths[1] == 372);
  CHECK(widths.back() == 96);
  CHECK(prune::hidden_widths(384, {96, 288, 96}) == std::vector<long>{288, 96});
  CHECK_THROWS_AS(prune::hidden_widths(384, {385}), ConfigError);
  CHECK_THROWS_AS(prune::hidden_widths(384, {0}), ConfigError);
}

TEST_CASE("mask tuning with removed hidden channels: layer 0's attention fit by hand over the kept channels; "
          "folded = scaled = slimmed",
          "[prune][kwon][hidden][tuning]") {
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto model = core::load_bert(test::kTinyBert);
  const auto data = test::golden_dataset(g);
  const auto rank = prune::make_rank_data(core::find_task("mnli"), data, static_cast<int>(data.size()), 0);
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
  core::EncoderInput in = golden_input(g);
  auto scaled_in = in;
  scaled_in.head_mask = scales.heads, scaled_in.neuron_mask = scales.neurons, scaled_in.hidden_mask = h;
  const auto scaled = model.forward(scaled_in).logits;
  const auto folded = prune::fold_scales(model, scales);
  auto masked_in = in;
  masked_in.head_mask = eval::head_mask_tensor(keep.heads);
  masked_in.neuron_mask = eval::neuron_mask_tensor(keep.neurons);
  masked_in.hidden_mask = h;
  CHECK((folded.forward(masked_in).logits - scaled).abs().max().item<double>() <= 1e-5);
  const auto slim = prune::slim_model(folded, keep);
  CHECK(slim.config().hidden_size == 21);
  CHECK((slim.forward(in).logits - scaled).abs().max().item<double>() <= 1e-5);
  // Closer to the unpruned model than the untuned choice on the sample it was fitted to.
  const auto teacher = model.forward(in).logits;
  const double tuned = (scaled - teacher).pow(2).mean().item<double>();
  const double untuned = (model.forward(masked_in).logits - teacher).pow(2).mean().item<double>();
  INFO("logit MSE untuned " << untuned << ", tuned " << tuned);
  CHECK(tuned < untuned);
}
