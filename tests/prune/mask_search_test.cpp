// prune/search/mask_search.h and prune/search/mask_tuning.h (Kwon et al. 2022) against independent references: the mask
// gradients against Hugging Face's (the head-mask gradient of the golden batch, and the FFN output weights'
// gradient, which gives a neuron's mask gradient as Σ_d W2[d, i] ∂L/∂W2[d, i]); the search against brute force
// over every (heads, neurons) split; rearrangement on a hand case; the least-squares systems, built here
// entry by entry, solved by numpy's lstsq with the same damping; and the folded scales against masking.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/base/errors.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "fixtures.h"
#include "golden_data.h"
#include "prune/search/mask_search.h"
#include "prune/search/mask_tuning.h"
#include "prune/export/slim.h"
#include "skip.h"
#include "tuning_check.h"

using namespace hp;

namespace {

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max() / b.abs().max()).item<double>();
}

std::vector<std::vector<bool>> bools(const torch::Tensor& t) {
  std::vector<std::vector<bool>> out(t.size(0));
  for (long l = 0; l < t.size(0); ++l)
    for (long u = 0; u < t.size(1); ++u) out[l].push_back(t[l][u].item<double>() != 0);
  return out;
}

}  // namespace

TEST_CASE("mask gradients equal Hugging Face's: head-mask gradient and the FFN weight-gradient identity",
          "[prune][kwon][parity]") {
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto model = core::load_bert(test::kTinyBert);
  const auto data = test::golden_dataset(g);
  const auto rank = prune::make_rank_data(core::find_task("mnli"), data, static_cast<int>(data.size()), 0);
  REQUIRE(rank.batches.size() == 1);  // one batch: its mean loss is the golden file's
  const auto grads = prune::mask_gradients(model, rank);
  REQUIRE(grads.heads.sizes() == torch::IntArrayRef({1, 2, 4}));
  REQUIRE(grads.neurons.sizes() == torch::IntArrayRef({1, 2, 37}));
  CHECK(rel_diff(grads.heads[0], g.at("head_mask_grad")) <= 1e-4);
  for (int l = 0; l < 2; ++l) {
    INFO("layer " << l);
    const std::string w2 = "encoder.layer." + std::to_string(l) + ".output.dense.weight";
    const auto want =
        (model.parameters().at(w2).to(torch::kFloat64) * g.at("param_grad/bert." + w2).to(torch::kFloat64)).sum(0);
    CHECK(rel_diff(grads.neurons[0][l], want) <= 1e-4);
  }
  // Smaller batches: one gradient per batch, and the Fisher is the sum of their squares.
  const auto small = prune::make_rank_data(core::find_task("mnli"), data, 3, 0);
  const auto per_batch = prune::mask_gradients(model, small);
  CHECK(per_batch.heads.size(0) == static_cast<long>(small.batches.size()));
  CHECK(rel_diff(prune::fisher_diagonal(per_batch.neurons), per_batch.neurons.pow(2).sum(0)) == 0);
}

TEST_CASE("search: the best split of the budget between heads and neurons, as brute force finds it",
          "[prune][kwon][search]") {
  // By hand: heads cost 3, neurons 1, budget 8. One head (5) + five neurons (2 + 2 + 1 + 0.3 + 0.2) = 10.5;
  // two heads (5 + 3) + two neurons (2 + 2) = 12 wins; three heads do not fit.
  const auto heads = torch::tensor({5.0, 1.0, 3.0, 0.5}).view({2, 2});
  const auto neurons = torch::tensor({2.0, 2.0, 0.1, 1.0, 0.2, 0.3}).view({2, 3});
  const auto keep = prune::search_budget(heads, neurons, {3, 1}, 8);
  CHECK(keep.heads == core::HeadSet{{true, false}, {true, false}});
  CHECK(keep.neurons == core::NeuronSet{{true, true, false}, {false, false, false}});
  CHECK(prune::structure_cost(keep, {3, 1}) == 8);
  CHECK_THROWS_AS(prune::search_budget(heads, neurons, {3, 1}, 2.5), ConfigError);

  // Random instances: the chosen total equals the best over every (n heads, m neurons) split by brute force.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 20; ++trial) {
    auto h = torch::empty({3, 4}, torch::kFloat64), n = torch::empty({3, 10}, torch::kFloat64);
    for (long i = 0; i < h.numel(); ++i) h.view(-1)[i] = u(rng);
    for (long i = 0; i < n.numel(); ++i) n.view(-1)[i] = u(rng) * 0.3;
    const prune::UnitCosts c{4.0 + trial % 3, 1.0};
    const double budget = 10 + trial * 1.7;
    const auto got = prune::search_budget(h, n, c, budget);
    auto total = [&](const prune::StructureKeep& k) {
      double s = 0;
      for (long l = 0; l < 3; ++l) {
        for (long i = 0; i < 4; ++i) s += k.heads[l][i] ? h[l][i].item<double>() : 0;
        for (long i = 0; i < 10; ++i) s += k.neurons[l][i] ? n[l][i].item<double>() : 0;
      }
      return s;
    };
    const auto hs = std::get<0>(h.view(-1).sort(0, true)).cumsum(0),
               ns = std::get<0>(n.view(-1).sort(0, true)).cumsum(0);
    double best = -1;
    for (long nh = 1; nh <= 12; ++nh)
      for (long nn = 0; nn <= 30; ++nn)
        if (nh * c.head + nn * c.neuron <= budget)
          best = std::max(best, hs[nh - 1].item<double>() + (nn ? ns[nn - 1].item<double>() : 0.0));
    INFO("trial " << trial);
    CHECK(total(got) == Approx(best).epsilon(1e-12));
    CHECK(prune::structure_cost(got, c) <= budget);
  }
}

TEST_CASE("rearrangement: swaps toward units whose gradients cancel, counts kept", "[prune][kwon][search]") {
  // Units a (1, 0), b (−1, 0), c (0, 0.9) over two batches; one stays. By diagonal Fisher c (0.81) and then a go
  // (‖(1, 0.9)‖² = 1.81), but a and b cancel: removing both costs 0, so c stays.
  const auto grads = torch::tensor({1.0, -1.0, 0.0, 0.0, 0.0, 0.9}).view({2, 3});
  CHECK(prune::greedy_rearrange({false, true, false}, grads) == std::vector<bool>{false, false, true});
  CHECK(prune::greedy_rearrange({true, true, true}, grads) == std::vector<bool>{true, true, true});

  // On the tiny model's gradients: each layer keeps its counts and the block Fisher objective never rises.
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto model = core::load_bert(test::kTinyBert);
  const auto data = test::golden_dataset(g);
  const auto grads_tiny = prune::mask_gradients(model, prune::make_rank_data(core::find_task("mnli"), data, 2, 0));
  const auto keep = prune::search_budget(prune::fisher_diagonal(grads_tiny.heads),
                                         prune::fisher_diagonal(grads_tiny.neurons), {40, 2}, 0.5 * (8 * 40 + 74 * 2));
  const auto moved = prune::rearrange(keep, grads_tiny);
  for (int l = 0; l < 2; ++l) {
    CHECK(core::count_kept({moved.heads[l]}) == core::count_kept({keep.heads[l]}));
    CHECK(core::count_kept({moved.neurons[l]}) == core::count_kept({keep.neurons[l]}));
  }
  CHECK(prune::block_fisher_loss(moved, grads_tiny) <= prune::block_fisher_loss(keep, grads_tiny));
}

TEST_CASE("mask tuning: the least-squares systems, built entry by entry, solved by numpy with the same damping",
          "[prune][kwon][tuning]") {
  torch::manual_seed(5);
  const long B = 2, H = 4, S = 5, Dh = 3, D = 6, I = 7;
  const auto ctx = torch::randn({B, H, S, Dh}), o_w = torch::randn({D, H * Dh});
  const auto acts = torch::randn({B, S, I}), w2 = torch::randn({D, I});
  const auto residual = torch::randn({B, S, D});
  auto rows = torch::ones({B, S}, torch::kBool);
  rows[1].narrow(0, 3, 2).fill_(false);  // padding
  const std::vector<long> heads = {0, 2, 3}, neurons = {1, 2, 4, 6};
  // A and r written out: one row per (selected token, output dimension), one column per kept unit.
  auto explicit_system = [&](bool attention) {
    const auto& kept = attention ? heads : neurons;
    std::vector<double> a, r;
    for (long b = 0; b < B; ++b)
      for (long s = 0; s < S; ++s) {
        if (!rows[b][s].item<bool>()) continue;
        for (long d = 0; d < D; ++d) {
          r.push_back(residual[b][s][d].item<double>());
          for (long k : kept) {
            double v = 0;
            if (attention)
              for (long e = 0; e < Dh; ++e) v += ctx[b][k][s][e].item<double>() * o_w[d][k * Dh + e].item<double>();
            else v = acts[b][s][k].item<double>() * w2[d][k].item<double>();
            a.push_back(v);
          }
        }
      }
    return std::pair{torch::tensor(a, torch::kFloat64).view({static_cast<long>(r.size()), -1}),
                     torch::tensor(r, torch::kFloat64)};
  };
  const auto [aa, ra] = explicit_system(true);
  const auto [af, rf] = explicit_system(false);
  const auto sa = prune::attention_system(ctx, o_w, residual, rows, heads);
  const auto sf = prune::ffn_system(acts, w2, residual, rows, neurons);
  CHECK(rel_diff(sa.ata, aa.t().mm(aa)) <= 1e-5);
  CHECK(rel_diff(sa.atr, aa.t().mv(ra)) <= 1e-5);
  CHECK(rel_diff(sf.ata, af.t().mm(af)) <= 1e-5);
  CHECK(rel_diff(sf.atr, af.t().mv(rf)) <= 1e-5);
  CHECK(sf.rtr == Approx(rf.pow(2).sum().item<double>()).epsilon(1e-6));

  const std::string py = HP_REF_PYTHON;
  if (!std::filesystem::exists(py)) return test::skip("numpy's lstsq: no Python reference at " + py);
  const auto dir = test::scratch_dir("hp_kwon_lstsq");
  std::filesystem::create_directories(dir);
  const double damping = 0.05;
  core::write_hdf5((dir / "systems.h5").string(), {{"aa", aa}, {"ra", ra}, {"af", af}, {"rf", rf}});
  const std::string script =
      "import h5py, numpy as np\n"
      "f = h5py.File('" +
      (dir / "systems.h5").string() +
      "')\n"
      "out = []\n"
      "for a, r in ((f['aa'][()], f['ra'][()]), (f['af'][()], f['rf'][()])):\n"
      "    lam = " +
      std::to_string(damping) +
      " * np.mean(np.diag(a.T @ a)) + 1e-12\n"
      "    k = a.shape[1]\n"
      "    x = np.linalg.lstsq(np.vstack([a, np.sqrt(lam) * np.eye(k)]), np.concatenate([r, np.sqrt(lam) * np.ones(k)]), rcond=None)[0]\n"
      "    out.append(x)\n"
      "np.savetxt('" +
      (dir / "x.txt").string() + "', np.concatenate(out))\n";
  std::ofstream(dir / "lstsq.py") << script;
  REQUIRE(std::system((py + " " + (dir / "lstsq.py").string()).c_str()) == 0);
  std::ifstream in(dir / "x.txt");
  std::vector<double> want;
  for (double v; in >> v;) want.push_back(v);
  REQUIRE(want.size() == heads.size() + neurons.size());
  const auto got = torch::cat({prune::damped_lstsq(sa, damping), prune::damped_lstsq(sf, damping)});
  CHECK(rel_diff(got, torch::tensor(want, torch::kFloat64)) <= 1e-6);
}

TEST_CASE("mask tuning on the tiny model: fits improve, folded scales = scaled masks = the slimmed export",
          "[prune][kwon][tuning]") {
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto model = core::load_bert(test::kTinyBert);
  const auto data = test::golden_dataset(g);
  const auto rank = prune::make_rank_data(core::find_task("mnli"), data, 2, 0);
  const auto grads = prune::mask_gradients(model, rank);
  const auto keep = prune::rearrange(
      prune::search_budget(prune::fisher_diagonal(grads.heads), prune::fisher_diagonal(grads.neurons), {40, 2}, 200),
      grads);
  std::vector<prune::SublayerFit> fits;
  const auto scales = prune::tune_masks(model, keep, rank, {}, &fits);
  REQUIRE(!fits.empty());
  for (const auto& f : fits) {
    INFO("layer " << f.layer << " " << f.block << ": " << f.before << " -> " << f.after << " " << f.skipped);
    CHECK(f.skipped.empty());
    CHECK(f.after <= f.before);
  }
  // Removed units keep scale 0; kept ones moved off 1 somewhere.
  CHECK(bools(scales.heads) == keep.heads);
  CHECK(bools(scales.neurons) == keep.neurons);
  core::EncoderInput in;
  in.input_ids = g.at("input_ids");
  in.token_type_ids = g.at("token_type_ids");
  in.attention_mask = g.at("attention_mask");
  test::check_tuned(model, keep, scales, in);
}

TEST_CASE("mask tuning fits real tokens only: padded batches give the scales of the same examples unpadded",
          "[prune][kwon][tuning]") {
  // The golden batch's 4 examples (7, 15, 17 and 10 tokens) in one batch padded to 17, and one example per batch
  // (no padding): the fit sums over real tokens, so the scales agree; padding rows, if they entered the fit,
  // would add rows of their own (their hidden states are not zero) and move them (#44: a planted bug passed).
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto model = core::load_bert(test::kTinyBert);
  const auto data = test::golden_dataset(g);
  const auto padded = prune::make_rank_data(core::find_task("mnli"), data, 4, 0);
  const auto single = prune::make_rank_data(core::find_task("mnli"), data, 1, 0);
  REQUIRE(padded.batches.size() == 1);
  REQUIRE(padded.batches[0].attention_mask.sum().item<long>() < padded.batches[0].attention_mask.numel());
  const auto grads = prune::mask_gradients(model, single);
  const auto keep = prune::rearrange(
      prune::search_budget(prune::fisher_diagonal(grads.heads), prune::fisher_diagonal(grads.neurons), {40, 2}, 200),
      grads);
  for (bool cls_last_layer : {true, false}) {
    INFO("cls_last_layer " << cls_last_layer);
    prune::TuningOptions opts;
    opts.cls_last_layer = cls_last_layer;
    const auto a = prune::tune_masks(model, keep, padded, opts), b = prune::tune_masks(model, keep, single, opts);
    CHECK((a.heads - b.heads).abs().max().item<double>() <= 1e-4);
    CHECK((a.neurons - b.neurons).abs().max().item<double>() <= 1e-4);
    // The fit moved the kept units' scales off 1, so a change would show.
    CHECK((a.heads - prune::unit_scales(keep).heads).abs().max().item<double>() > 1e-2);
  }
}

TEST_CASE("baselines: a unit's weight magnitude by hand, random scores from the seed", "[prune][kwon][search]") {
  const auto model = core::load_bert(test::kTinyBert);
  const auto m = prune::magnitude_importance(model);
  const auto& p = model.parameters();
  auto sq = [](const torch::Tensor& t) { return t.to(torch::kFloat64).pow(2).sum().item<double>(); };
  // Head 1 of layer 0: rows 8..15 of Q, K, V and their biases, columns 8..15 of the output projection.
  double head = sq(p.at("encoder.layer.0.attention.output.dense.weight").narrow(1, 8, 8));
  for (const char* w : {"query", "key", "value"}) {
    const std::string pre = std::string("encoder.layer.0.attention.self.") + w;
    head += sq(p.at(pre + ".weight").narrow(0, 8, 8)) + sq(p.at(pre + ".bias").narrow(0, 8, 8));
  }
  CHECK(m.heads[0][1].item<double>() == Approx(std::sqrt(head)).epsilon(1e-9));
  // Neuron 3 of layer 1: row 3 and bias 3 of the first matrix, column 3 of the second.
  const double neuron = sq(p.at("encoder.layer.1.intermediate.dense.weight")[3]) +
                        sq(p.at("encoder.layer.1.intermediate.dense.bias")[3]) +
                        sq(p.at("encoder.layer.1.output.dense.weight").select(1, 3));
  CHECK(m.neurons[1][3].item<double>() == Approx(std::sqrt(neuron)).epsilon(1e-9));
  const auto r1 = prune::random_unit_importance(model.config(), 42),
             r2 = prune::random_unit_importance(model.config(), 42);
  CHECK(torch::equal(r1.neurons, r2.neurons));
  CHECK(!torch::equal(r1.neurons, prune::random_unit_importance(model.config(), 43).neurons));
  // top_units: the counts given, the highest of each (ties in index order).
  const auto top = prune::top_units(torch::tensor({0.5, 0.9, 0.1, 0.9}).view({2, 2}),
                                    torch::tensor({3.0, 1.0, 2.0}).view({1, 3}), 2, 1);
  CHECK(top.heads == core::HeadSet{{false, true}, {false, true}});
  CHECK(top.neurons == core::NeuronSet{{true, false, false}});
  CHECK(r1.heads.min().item<double>() >= 0);
  CHECK(r1.heads.max().item<double>() < 1);
}
