// prune/heads/criteria.h: each criterion against an independent computation — Taylor against HF's head-mask
// gradients (golden files from tests/golden/make_goldens.py), confidence against its definition on
// the attention maps, LRP conservation, integrated-gradients completeness for attention attribution,
// and the reuse of lower layers (attattr, leave-one-out) against full forward passes.
#include <catch2/catch.hpp>

#include "fixtures.h"
#include "golden_data.h"
#include "skip.h"
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/autograd.h>

#include <filesystem>

#include "core/io/checkpoint.h"
#include "core/base/errors.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "prune/heads/criteria.h"

using namespace hp;

namespace {

using test::kMiniLM;
using test::kMiniLMH5;
using test::kTinyBert;
using test::kTinyBertH5;
using test::kTinyBertReg;

struct Fixture {
  core::Bert model;
  const core::TaskSpec* task;
  core::EncodedDataset data;
  prune::RankData rank;
  core::PruneConfig opts;
  prune::CriterionContext ctx(const torch::Tensor& keep) const {
    prune::CriterionContext c;
    c.model = &model;
    c.rank = &rank;
    c.keep = keep;
    c.opts = &opts;
    return c;
  }
};

Fixture tiny(int batch_size = 3) {
  auto g = core::read_hdf5(kTinyBertH5);
  Fixture f{core::load_bert(kTinyBert), &core::find_task("mnli"), test::golden_dataset(g), {}, {}};
  f.rank = prune::make_rank_data(*f.task, f.data, batch_size, 0);
  return f;
}

double rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max()).item<double>();
}

}  // namespace

TEST_CASE("taylor: per-example |dL/dxi| equals HF's head_mask gradients (tiny model and MiniLM)",
          "[prune][criteria][parity]") {
  auto f = tiny(3);  // batches of 3 and 1: batching must not matter
  f.opts.normalize_layers = false;
  auto keep = torch::ones({2, 4});
  auto g = core::read_hdf5(kTinyBertH5);
  const double n = static_cast<double>(f.data.size());
  auto ours = prune::taylor_importance(f.ctx(keep)) * n;  // mean over examples → sum, as the golden file
  CHECK(rel_diff(ours, g.at("head_mask_grad_abs_per_example")) <= 1e-4);
  f.opts.normalize_layers = true;
  auto normed = prune::taylor_importance(f.ctx(keep));
  CHECK(normed.pow(2).sum(1).sqrt().sub(1).abs().max().item<double>() <= 1e-5);  // unit L2 norm per layer

  if (!std::filesystem::exists(kMiniLM)) {
    hp::test::skip("the MiniLM part: " + std::string(kMiniLM) + " is absent; run scripts/setup.sh");
    return;
  }
  auto m = core::read_hdf5(kMiniLMH5);
  core::LoadOptions lo;
  lo.num_labels = 2;
  Fixture r{core::load_bert(kMiniLM, lo), &core::find_task("sst2"), test::golden_dataset(m), {}, {}};
  r.model.mutable_parameters().at("classifier.weight") = m.at("classifier_weight");
  r.model.mutable_parameters().at("classifier.bias") = m.at("classifier_bias");
  r.model = core::Bert(r.model.config(), r.model.parameters());
  r.rank = prune::make_rank_data(*r.task, r.data, 4, 0);
  r.opts.normalize_layers = false;
  auto imp = prune::taylor_importance(r.ctx(torch::ones({6, 12}))) * static_cast<double>(r.data.size());
  CHECK(rel_diff(imp, m.at("head_mask_grad_abs_per_example")) <= 1e-4);
}

TEST_CASE("taylor for regression (STS-B, squared error) equals HF's head_mask gradients", "[prune][criteria][parity]") {
  auto g = core::read_hdf5(kTinyBertH5);
  Fixture f{core::load_bert(kTinyBertReg), &core::find_task("stsb"), test::golden_dataset(g, "reg_labels"), {}, {}};
  f.rank = prune::make_rank_data(*f.task, f.data, 3, 0);
  f.opts.normalize_layers = false;
  auto ours = prune::taylor_importance(f.ctx(torch::ones({2, 4}))) * static_cast<double>(f.data.size());
  CHECK(rel_diff(ours, g.at("reg_head_mask_grad_abs_per_example")) <= 1e-4);
}

TEST_CASE("taylor token-level equals Σ over tokens of |ctx · dL/dctx| from HF's attention outputs",
          "[prune][criteria][parity]") {
  auto f = tiny(3);
  f.opts.normalize_layers = false;
  f.opts.taylor_token_level = true;
  auto g = core::read_hdf5(kTinyBertH5);
  auto ours = prune::taylor_importance(f.ctx(torch::ones({2, 4}))) * static_cast<double>(f.data.size());
  CHECK(rel_diff(ours, g.at("head_mask_grad_abs_per_token")) <= 1e-4);
}

TEST_CASE("taylor token-level: Σ_t |share_t| bounds the per-example value and masked heads are ignored",
          "[prune][criteria]") {
  auto f = tiny();
  f.opts.normalize_layers = false;
  auto keep = torch::ones({2, 4});
  auto per_example = prune::taylor_importance(f.ctx(keep));
  f.opts.taylor_token_level = true;
  auto per_token = prune::taylor_importance(f.ctx(keep));
  // |Σ_t a_t| <= Σ_t |a_t| (triangle inequality), strictly for some head.
  CHECK((per_token - per_example).min().item<double>() >= -1e-6);
  CHECK((per_token - per_example).max().item<double>() > 1e-6);
}

TEST_CASE("confidence: mean over real tokens of the largest attention weight", "[prune][criteria]") {
  auto f = tiny();
  auto keep = torch::ones({2, 4});
  auto imp = prune::confidence_importance(f.ctx(keep));
  // Independent: one example at a time, no padding at all.
  auto expect = torch::zeros({2, 4}, torch::kFloat64);
  double tokens = 0;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < f.data.size(); ++i) {
    core::EncoderInput in;
    const long n = static_cast<long>(f.data.ids[i].size());
    in.input_ids = torch::tensor(std::vector<int64_t>(f.data.ids[i].begin(), f.data.ids[i].end())).view({1, n});
    in.token_type_ids =
        torch::tensor(std::vector<int64_t>(f.data.type_ids[i].begin(), f.data.type_ids[i].end())).view({1, n});
    in.want_attention = true;
    auto out = f.model.forward(in);
    for (int l = 0; l < 2; ++l) expect[l] += std::get<0>(out.attentions[l][0].max(-1)).sum(-1).to(torch::kFloat64);
    tokens += n;
  }
  expect /= tokens;
  CHECK((imp.to(torch::kFloat64) - expect).abs().max().item<double>() <= 1e-6);
  CHECK(imp.min().item<double>() > 0.0);
  CHECK(imp.max().item<double>() <= 1.0);
}

TEST_CASE("lrp: same forward values and relevance is conserved layer by layer when biases are zero",
          "[prune][criteria]") {
  auto f = tiny();
  auto params = f.model.parameters();
  for (auto& [name, t] : params)
    if (name.find("bias") != std::string::npos) t = torch::zeros_like(t);
  core::Bert model(f.model.config(), params);
  auto b = f.rank.batches.at(0);
  core::EncoderInput in = core::encoder_input(b);
  in.want_hidden = true;
  auto plain = model.forward(in);
  // Start from the embeddings as a leaf that takes gradients.
  auto x0 = plain.hidden_states[0].detach().clone().requires_grad_(true);
  auto run = [&](bool lrp) {
    core::EncoderInput r = core::encoder_input(b);
    r.start_hidden = x0;
    r.want_hidden = true;
    r.lrp_rules = lrp;
    return model.forward(r);
  };
  auto out = run(true);
  CHECK((out.logits - plain.logits).abs().max().item<double>() <= 1e-5);  // rules change gradients only
  auto top = out.logits.gather(1, out.logits.argmax(1, true)).squeeze(1);  // [B]
  // Under the rules the network is linear in each layer's input x_l, so the relevance at x_l
  // (LRP-0 = x_l · ∂f/∂x_l) sums to the logit itself, at every layer.
  for (int l = 0; l <= 2; ++l) {
    auto g = torch::autograd::grad({top.sum()}, {out.hidden_states[l]}, {}, /*retain_graph=*/true)[0];
    auto total = (g * out.hidden_states[l]).sum(torch::IntArrayRef{1, 2});  // [B]
    CHECK(((total - top).abs() / top.abs().clamp_min(1e-3)).max().item<double>() <= 1e-3);
  }
  // Without the rules it does not (the check above could fail).
  auto o2 = run(false);
  auto top2 = o2.logits.gather(1, o2.logits.argmax(1, true)).squeeze(1);
  auto g2 = torch::autograd::grad({top2.sum()}, {x0})[0];
  CHECK(((g2 * x0).sum(torch::IntArrayRef{1, 2}) - top2).abs().max().item<double>() > 1e-3);
  // And the criterion: relevances normalised per layer and example (Σ_h |R_h| = 1), then averaged.
  auto imp = prune::lrp_importance(f.ctx(torch::ones({2, 4})));
  CHECK(imp.abs().sum(1).max().item<double>() <= 1.0 + 1e-5);
  CHECK(imp.abs().sum(1).min().item<double>() > 0.1);
}

TEST_CASE("attattr: integrated gradients are complete (Σ Attr = F(A) - F(0)) and reusing lower layers changes nothing",
          "[prune][criteria]") {
  auto f = tiny();
  auto keep = torch::ones({2, 4});
  const auto& b = f.rank.batches.at(0);
  auto base = prune::attribution_base(f.model, b, keep);
  auto target = b.labels.to(torch::kLong);
  const int layer = 0;
  auto attr =
      prune::attention_attribution(f.model, b, keep, base, layer, target, prune::riemann_alphas(400, "midpoint"), true);
  // F at α = 1 and α = 0 for layer 0's attention, computed directly.
  auto prob_at = [&](double alpha) {
    torch::NoGradGuard no_grad;
    core::EncoderInput in = core::encoder_input(b);
    in.override_layer = layer;
    in.override_probs = base.attentions[layer] * alpha;
    return torch::softmax(f.model.forward(in).logits, 1).gather(1, target.unsqueeze(1)).squeeze(1);
  };
  auto delta = prob_at(1.0) - prob_at(0.0);  // [B]
  auto sum = attr.sum(torch::IntArrayRef{1, 2, 3});
  CHECK((sum - delta).abs().max().item<double>() <= 2e-3 * delta.abs().max().item<double>() + 1e-6);
  CHECK(delta.abs().max().item<double>() > 1e-4);
  // The same attributions from full forward passes (no reuse of the layer below).
  auto alphas = prune::riemann_alphas(5, "right");
  auto with = prune::attention_attribution(f.model, b, keep, base, 1, target, alphas, true);
  auto without = prune::attention_attribution(f.model, b, keep, base, 1, target, alphas, false);
  CHECK((with - without).abs().max().item<double>() <= 1e-6);
  // Riemann points.
  CHECK(prune::riemann_alphas(4, "right") == std::vector<double>{0.25, 0.5, 0.75, 1.0});
  CHECK(prune::riemann_alphas(2, "left") == std::vector<double>{0.0, 0.5});
  CHECK(prune::riemann_alphas(2, "midpoint") == std::vector<double>{0.25, 0.75});
  CHECK_THROWS_AS(prune::riemann_alphas(2, "trapezoid"), ConfigError);
  // The criterion: one value per head, finite.
  f.opts.attattr_steps = 4;
  auto imp = prune::attattr_importance(f.ctx(keep));
  CHECK(imp.sizes() == torch::IntArrayRef({2, 4}));
  CHECK(torch::isfinite(imp).all().item<bool>());
}

TEST_CASE("loo: reusing lower layers gives the same scores as full passes and a score is the metric drop",
          "[prune][criteria]") {
  auto f = tiny(2);
  auto keep = torch::ones({2, 4});
  keep[1][2] = 0;  // an already pruned head gets no score
  auto ctx = f.ctx(keep);
  auto with = prune::loo_importance(ctx);
  ctx.reuse_lower_layers = false;
  auto without = prune::loo_importance(ctx);
  CHECK((with - without).abs().max().item<double>() <= 1e-6);
  CHECK(with[1][2].item<float>() == 0.f);
  // Independent: accuracy with and without head (0, 1) through the evaluator.
  auto base = eval::evaluate(f.model, *f.task, f.data, f.rank.batches, {keep}).metrics.at("accuracy");
  auto k2 = keep.clone();
  k2[0][1] = 0;
  auto ablated = eval::evaluate(f.model, *f.task, f.data, f.rank.batches, {k2}).metrics.at("accuracy");
  CHECK(std::abs(with[0][1].item<double>() - (base - ablated)) <= 2e-6);
}

TEST_CASE("random is seeded and unknown criteria name the key and the nearest name", "[prune][criteria]") {
  auto f = tiny();
  auto c = f.ctx(torch::ones({2, 4}));
  c.seed = 1;
  auto a = prune::random_importance(c), a2 = prune::random_importance(c);
  c.seed = 2;
  auto b = prune::random_importance(c);
  CHECK(torch::equal(a, a2));
  CHECK(!torch::equal(a, b));
  CHECK_THROWS_WITH(prune::find_criterion("taylr"), Catch::Contains("prune.criteria: unknown criterion 'taylr'") &&
                                                        Catch::Contains("did you mean taylor"));
  CHECK(std::string(prune::find_criterion("attattr").name) == "attattr");
}
