// StructureGates (CoFi's gates on heads, FFN neurons and sublayers): the expected cost and its gradient against a
// hand computation in float64, the coarse gates multiplying the fine ones, neuron groups, exact landing of the
// deterministic structure on a budget, and bad settings.
#include "gates/structure_gates.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <torch/utils.h>

#include "core/base/errors.h"

using Catch::Matchers::Contains;

namespace {

hp::core::GateConfig cfg(int group = 1, bool sublayers = true) {
  hp::core::GateConfig c;
  c.target_flops = 0.5;
  c.neuron_group = group;
  c.sublayer_gates = sublayers;
  return c;
}

// P(g ≠ 0) of Louizos et al. eq. 12, by hand: σ(log α − β ln(−γ/ζ)).
double p_open(double la, const hp::core::GateConfig& c) {
  return 1.0 / (1.0 + std::exp(-(la - c.beta * std::log(-c.gamma / c.zeta))));
}

// Sets every log α of `g` from fixed, distinct values.
void set_log_alpha(hp::gates::StructureGates& g) {
  torch::NoGradGuard no_grad;
  int k = 0;
  for (auto& t : g.parameters()) {
    auto flat = t.view({-1});
    for (long i = 0; i < flat.numel(); ++i, ++k) flat[i] = std::sin(1.7 * k) * 3.0;
  }
}

// Entry [l] (or [l][i]) of the log α named `name`.
double log_alpha_at(const std::map<std::string, torch::Tensor>& named, const char* name, long l, long i = -1) {
  const auto t = named.at(name).detach();
  return i < 0 ? t[l].item<double>() : t[l][i].item<double>();
}

}  // namespace

TEST_CASE("expected cost and its gradient equal a hand computation on the tiny model", "[gates]") {
  for (int group : {1, 2}) {
    INFO("neuron_group " << group);
    // The tiny BERT's shapes (2 layers, 4 heads, D = 32, Dh = 8) with an FFN of 36 (37 does not divide by 2) and its
    // FLOPs per unit at 8 tokens, by hand: a head 2·8·32·8·3 (Q, K, V rows) + 2·8·8·8·2 (scores, context) +
    // 2·8·8·32 (output columns) = 18432; a neuron 2·8·32·2 = 1024.
    const auto c = cfg(group);
    hp::gates::StructureGates g(c, /*layers=*/2, /*heads=*/4, /*neurons=*/36);
    set_log_alpha(g);
    const hp::core::UnitCosts costs{18432.0, 1024.0};
    torch::Tensor e = g.expected_cost(costs);
    e.backward();
    const auto named = g.named();
    auto at = [&](const char* name, long l, long i = -1) { return log_alpha_at(named, name, l, i); };
    double expect = 0;
    for (int l = 0; l < 2; ++l) {
      double heads = 0, neurons = 0;
      for (int h = 0; h < 4; ++h) heads += p_open(at("log_alpha", l, h), c);
      for (int j = 0; j < 36 / group; ++j) neurons += group * p_open(at("neuron_log_alpha", l, j), c);
      const double pm = p_open(at("mha_log_alpha", l), c), pf = p_open(at("ffn_log_alpha", l), c);
      expect += pm * heads * costs.head + pf * neurons * costs.neuron;
      // d/d log α of σ is p(1 − p); each unit's term carries its sublayer's probability and cost.
      for (int h = 0; h < 4; ++h) {
        const double p = p_open(at("log_alpha", l, h), c);
        CHECK(named.at("log_alpha").grad()[l][h].item<double>() == Approx(pm * costs.head * p * (1 - p)).epsilon(1e-5));
      }
      for (int j = 0; j < 36 / group; ++j) {
        const double p = p_open(at("neuron_log_alpha", l, j), c);
        CHECK(named.at("neuron_log_alpha").grad()[l][j].item<double>() ==
              Approx(pf * group * costs.neuron * p * (1 - p)).epsilon(1e-5));
      }
      CHECK(named.at("mha_log_alpha").grad()[l].item<double>() ==
            Approx(heads * costs.head * pm * (1 - pm)).epsilon(1e-5));
      CHECK(named.at("ffn_log_alpha").grad()[l].item<double>() ==
            Approx(neurons * costs.neuron * pf * (1 - pf)).epsilon(1e-5));
    }
    CHECK(e.item<double>() == Approx(expect).epsilon(1e-6));
  }

  // Head-only gates count the heads alone (and no sublayer gates: the heads' P(open) only).
  const auto c = cfg();
  hp::gates::StructureGates heads_only(c, 2, 3);
  const double p0 = p_open(c.log_alpha_init, c);
  CHECK(heads_only.expected_cost({10.0, 1.5}).item<double>() == Approx(2 * 3 * p0 * 10.0));
}

TEST_CASE("the coarse gates multiply the fine ones; a neuron group's gate covers its neurons", "[gates]") {
  hp::gates::StructureGates g(cfg(/*group=*/2), 2, 3, 4);
  {
    torch::NoGradGuard no_grad;
    g.named().at("mha_log_alpha")[0] = -10.0;  // attention sublayer of layer 0 closed
    g.named().at("ffn_log_alpha")[1] = -10.0;  // FFN sublayer of layer 1 closed
    g.named().at("neuron_log_alpha")[0][1] = -10.0;  // neurons 2 and 3 of layer 0 closed
  }
  const auto d = g.deterministic();
  REQUIRE(d.heads.sizes() == torch::IntArrayRef({2, 3}));
  REQUIRE(d.neurons.sizes() == torch::IntArrayRef({2, 4}));
  CHECK(d.heads[0].abs().sum().item<double>() == 0.0);
  CHECK(d.heads[1].min().item<double>() > 0.9);
  CHECK(d.neurons[1].abs().sum().item<double>() == 0.0);
  CHECK(d.neurons[0][0].item<double>() == d.neurons[0][1].item<double>());
  CHECK(d.neurons[0][2].item<double>() == 0.0);
  CHECK(d.neurons[0][3].item<double>() == 0.0);

  torch::manual_seed(3);
  const auto s = g.sample(8);
  CHECK(s.heads[0].abs().sum().item<double>() == 0.0);  // a log α of −10 never samples open
  CHECK(s.neurons[1].abs().sum().item<double>() == 0.0);
  CHECK(torch::equal(s.neurons.select(1, 0), s.neurons.select(1, 1)));  // one draw per group

  // Head-only gates draw exactly what HeadGates draws (so head-only runs keep their random stream).
  hp::core::GateConfig hc;
  hp::gates::StructureGates sg(hc, 2, 3);
  hp::gates::HeadGates hg(hc, 2, 3);
  torch::manual_seed(5);
  const auto a = sg.sample(4).heads;
  torch::manual_seed(5);
  CHECK(torch::equal(a, hg.sample(4)));
}

TEST_CASE("keep_within lands on the budget within one unit and follows the gates", "[gates]") {
  for (int group : {1, 4}) {
    INFO("neuron_group " << group);
    hp::gates::StructureGates g(cfg(group), 3, 4, 16);
    set_log_alpha(g);
    const hp::core::UnitCosts costs{7.0, 0.9};
    const double total = costs.head * 12 + costs.neuron * 48;
    for (double f : {0.2, 0.5, 0.8}) {
      const auto keep = g.keep_within(costs, f * total);
      const double spent = hp::core::structure_cost(keep, costs);
      CHECK(spent <= f * total + 1e-9);
      CHECK(f * total - spent < costs.neuron * group);  // within one unit (a neuron group) of the budget
    }
  }
  // A closed sublayer gate puts its units last: at half the budget, layer 0's attention is gone entirely.
  hp::gates::StructureGates g(cfg(), 2, 4, 8);
  {
    torch::NoGradGuard no_grad;
    g.named().at("mha_log_alpha")[0] = -6.0;
  }
  const hp::core::UnitCosts costs{2.0, 1.0};
  const auto keep = g.keep_within(costs, 0.5 * (2.0 * 8 + 16.0));
  CHECK(hp::core::count_kept({keep.heads[0]}) == 0);
  CHECK(hp::core::count_kept({keep.heads[1]}) == 4);
}

TEST_CASE("structure gates refuse a group that does not divide the FFN and per-example gates", "[gates]") {
  CHECK_THROWS_WITH(hp::gates::StructureGates(cfg(5), 2, 3, 37), Contains("gates.neuron_group = 5"));
  auto c = cfg();
  c.per_example = true;
  CHECK_THROWS_WITH(hp::gates::StructureGates(c, 2, 3, 8), Contains("gates.per_example"));
  hp::gates::StructureGates g(cfg(), 2, 3, 8);
  auto saved = g.named();
  saved.erase("ffn_log_alpha");
  CHECK_THROWS_WITH(g.load(saved), Contains("'ffn_log_alpha' is missing"));
}

TEST_CASE("layer gates: the expected cost by hand, a closed layer removed with its units, the same draws before them",
          "[gates][layers]") {
  auto c = cfg();
  c.layer_gates = true;
  hp::gates::StructureGates g(c, /*layers=*/3, /*heads=*/4, /*neurons=*/6);
  REQUIRE(g.has_layers());
  set_log_alpha(g);
  const hp::core::UnitCosts costs{5.0, 0.75};
  torch::Tensor e = g.expected_cost(costs);
  e.backward();
  const auto named = g.named();
  auto at = [&](const char* name, long l, long i = -1) { return log_alpha_at(named, name, l, i); };
  double expect = 0;
  for (int l = 0; l < 3; ++l) {
    double heads = 0, neurons = 0;
    for (int h = 0; h < 4; ++h) heads += p_open(at("log_alpha", l, h), c);
    for (int j = 0; j < 6; ++j) neurons += p_open(at("neuron_log_alpha", l, j), c);
    const double pm = p_open(at("mha_log_alpha", l), c), pf = p_open(at("ffn_log_alpha", l), c);
    const double pl = p_open(at("layer_log_alpha", l), c);
    const double layer_cost = pm * heads * costs.head + pf * neurons * costs.neuron;
    expect += pl * layer_cost;
    CHECK(named.at("layer_log_alpha").grad()[l].item<double>() == Approx(layer_cost * pl * (1 - pl)).epsilon(1e-5));
  }
  CHECK(e.item<double>() == Approx(expect).epsilon(1e-6));

  // Layer 1 closed (its test-time gate 0): removed, none of its units taken, the budget spent on the others.
  {
    torch::NoGradGuard no_grad;
    named.at("layer_log_alpha").fill_(4.0);
    named.at("layer_log_alpha")[1] = -6.0;
  }
  const auto d = g.deterministic();
  REQUIRE(d.layers.defined());
  CHECK(d.layers[1].item<double>() == 0.0);
  CHECK(d.layers[0].item<double>() == 1.0);
  const double total = 3 * (4 * costs.head + 6 * costs.neuron);
  const auto keep = g.keep_within(costs, 0.6 * total);
  CHECK(keep.layers == std::vector<bool>{true, false, true});
  CHECK(hp::core::count_kept({keep.heads[1]}) + hp::core::count_kept({keep.neurons[1]}) == 0);
  CHECK(hp::core::structure_cost(keep, costs) <= 0.6 * total + 1e-9);
  CHECK(0.6 * total - hp::core::structure_cost(keep, costs) < costs.neuron);
  CHECK(hp::core::format_mask(keep).find("layers:1") != std::string::npos);
  // The whole budget: still none of the closed layer's units, every unit of the others.
  const auto all = g.keep_within(costs, total);
  CHECK(hp::core::count_kept({all.heads[1]}) + hp::core::count_kept({all.neurons[1]}) == 0);
  CHECK(hp::core::count_kept(all.heads) == 8);
  CHECK(hp::core::count_kept(all.neurons) == 12);
  // Every layer closed: the most probable one stays.
  {
    torch::NoGradGuard no_grad;
    named.at("layer_log_alpha").copy_(torch::tensor({-9.0f, -7.0f, -8.0f}));
  }
  CHECK(g.keep_within(costs, total).layers == std::vector<bool>{false, true, false});

  // The draws before the layer gates are those of gates without them (same seed): heads, neurons, sublayers.
  auto c0 = cfg();
  hp::gates::StructureGates g0(c0, 3, 4, 6), g1(c, 3, 4, 6);
  torch::manual_seed(11);
  const auto s0 = g0.sample(2);
  torch::manual_seed(11);
  const auto s1 = g1.sample(2);
  CHECK(torch::equal(s0.heads, s1.heads));
  CHECK(torch::equal(s0.neurons, s1.neurons));
  CHECK(!s0.layers.defined());
  REQUIRE(s1.layers.defined());
  CHECK(s1.layers.sizes() == torch::IntArrayRef({3}));
  auto saved = g1.named();
  saved.erase("layer_log_alpha");
  CHECK_THROWS_WITH(g1.load(saved), Contains("'layer_log_alpha' is missing"));
}

TEST_CASE("hidden gates: the expected cost and its gradient by hand, the channels kept, the budget at that width",
          "[gates][hidden]") {
  auto c = cfg();
  c.layer_gates = c.hidden_gates = true;
  hp::gates::StructureGates g(c, /*layers=*/2, /*heads=*/3, /*neurons=*/4, /*hidden=*/5);
  REQUIRE(g.has_hidden());
  set_log_alpha(g);
  // A head costs 9 of which 6 scale with the hidden width; a neuron 2, all of it.
  const hp::core::UnitCosts costs{9.0, 2.0, 6.0, 2.0};
  torch::Tensor e = g.expected_cost(costs);
  e.backward();
  const auto named = g.named();
  auto at = [&](const char* name, long l, long i = -1) { return log_alpha_at(named, name, l, i); };
  double r = 0;
  for (int ch = 0; ch < 5; ++ch) r += p_open(at("hidden_log_alpha", ch), c) / 5;
  double heads = 0, neurons = 0;  // E[open heads], E[open neurons] over the layers (with their coarse gates)
  for (int l = 0; l < 2; ++l) {
    double h = 0, n = 0;
    for (int k = 0; k < 3; ++k) h += p_open(at("log_alpha", l, k), c);
    for (int j = 0; j < 4; ++j) n += p_open(at("neuron_log_alpha", l, j), c);
    const double pl = p_open(at("layer_log_alpha", l), c);
    heads += pl * p_open(at("mha_log_alpha", l), c) * h;
    neurons += pl * p_open(at("ffn_log_alpha", l), c) * n;
  }
  CHECK(e.item<double>() == Approx((9.0 - 6.0 * (1 - r)) * heads + 2.0 * r * neurons).epsilon(1e-6));
  for (int ch = 0; ch < 5; ++ch) {  // ∂E/∂la_c = (6 · heads + 2 · neurons) / 5 · p(1 − p)
    const double p = p_open(at("hidden_log_alpha", ch), c);
    CHECK(named.at("hidden_log_alpha").grad()[ch].item<double>() ==
          Approx((6.0 * heads + 2.0 * neurons) / 5 * p * (1 - p)).epsilon(1e-5));
  }

  // Channels kept: the round(Σ P) most probable. Two nearly closed, three open → 3 kept, and the budget is spent at
  // 3/5 of the width: every unit fits a budget of the whole model's cost at that width.
  {
    torch::NoGradGuard no_grad;
    named.at("hidden_log_alpha").copy_(torch::tensor({6.0f, -9.0f, 6.0f, 6.0f, -9.0f}));
    named.at("layer_log_alpha").fill_(6.0);
  }
  CHECK(g.keep_hidden() == std::vector<bool>{true, false, true, true, false});
  const auto narrow = costs.at_hidden(3.0 / 5);
  CHECK(narrow.head == Approx(9.0 - 6.0 * 0.4));
  CHECK(narrow.neuron == Approx(2.0 * 0.6));
  const double width_total = 2 * (3 * narrow.head + 4 * narrow.neuron);
  const auto keep = g.keep_within(costs, width_total);
  CHECK(keep.hidden == std::vector<bool>{true, false, true, true, false});
  CHECK(hp::core::count_kept(keep.heads) == 6);
  CHECK(hp::core::count_kept(keep.neurons) == 8);
  CHECK(hp::core::structure_cost(keep, costs) == Approx(width_total));
  CHECK(hp::core::format_mask(keep) == "hidden:1,4");
  // Half of that: within one unit below it.
  const auto half = g.keep_within(costs, 0.5 * width_total);
  CHECK(hp::core::structure_cost(half, costs) <= 0.5 * width_total + 1e-9);
  CHECK(0.5 * width_total - hp::core::structure_cost(half, costs) < narrow.head);
  // Every channel open: none removed.
  {
    torch::NoGradGuard no_grad;
    named.at("hidden_log_alpha").fill_(6.0);
  }
  CHECK(g.keep_hidden().empty());
  // The draws before the hidden gates are those of gates without them (same seed).
  auto c0 = cfg();
  c0.layer_gates = true;
  hp::gates::StructureGates g0(c0, 2, 3, 4, 5), g1(c, 2, 3, 4, 5);
  CHECK(!g0.has_hidden());
  torch::manual_seed(13);
  const auto s0 = g0.sample(2);
  torch::manual_seed(13);
  const auto s1 = g1.sample(2);
  CHECK(torch::equal(s0.layers, s1.layers));
  REQUIRE(s1.hidden.defined());
  CHECK(s1.hidden.sizes() == torch::IntArrayRef({5}));
}
