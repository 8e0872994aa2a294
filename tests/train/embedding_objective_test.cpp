// train/embedding_objective against independent references (#59): the distillation loss's gradient against central
// differences (in the embeddings, and through the tiny model in a head mask), the probe's Fisher against the exact
// Jacobian's squared norm, and the recovery bringing a pruned model's embeddings back towards the teacher's.
#include "train/embedding_objective.h"

#include <catch2/catch.hpp>
#include <torch/autograd.h>

#include <atomic>
#include <filesystem>

#include "core/model/pooling.h"
#include "tiny_training.h"

using hp::test::make_data;
using hp::test::tiny_model;

namespace {

hp::train::Pooling mean_normalized() {
  hp::train::Pooling p;
  p.modes.modes = {hp::core::PoolingMode::kMean};
  p.modes.dimension = 32;
  p.normalize = true;
  return p;
}

// Two padded sentences of the tiny vocabulary.
hp::core::EncoderInput two_sentences() {
  auto data = make_data(2, 5);
  hp::core::BatchOptions bo;
  bo.sort_by_length = false;
  return hp::core::encoder_input(hp::core::make_batches(data, bo).at(0));
}

}  // namespace

TEST_CASE("the embedding distillation loss: value by hand, gradient against central differences", "[train][embed]") {
  auto s = torch::tensor({0.3, -0.2, 0.5, 0.1, 0.0, -0.4}, torch::kFloat64).view({2, 3});
  auto t = torch::tensor({0.1, 0.1, 0.4, -0.2, 0.2, -0.1}, torch::kFloat64).view({2, 3});
  // (0.04 + 0.09 + 0.01) and (0.09 + 0.04 + 0.09), averaged over the two rows.
  CHECK(hp::train::embedding_distill_loss(s, t).item<double>() == Approx((0.14 + 0.22) / 2).epsilon(1e-12));
  auto sg = s.clone().requires_grad_(true), tg = t.clone().requires_grad_(true);
  hp::train::embedding_distill_loss(sg, tg).backward();
  REQUIRE(sg.grad().defined());
  CHECK(!tg.grad().defined());  // the teacher's side is fixed
  const double h = 1e-6;
  for (long i = 0; i < 6; ++i) {
    auto up = s.clone(), down = s.clone();
    up.view(-1)[i] += h, down.view(-1)[i] -= h;
    const double numeric = (hp::train::embedding_distill_loss(up, t).item<double>() -
                            hp::train::embedding_distill_loss(down, t).item<double>()) / (2 * h);
    CHECK(sg.grad().view(-1)[i].item<double>() == Approx(numeric).margin(1e-8));
  }
}

TEST_CASE(
    "the layer-wise term: value by hand (padding left out, the embeddings not matched), gradient against "
    "central differences",
    "[train][embed]") {
  // Two layers' outputs plus the embeddings, batch 2 × 2 tokens × width 2; the second sentence's second token is
  // padding. The embeddings (entry 0) differ wildly: they are not matched.
  const auto mask = torch::tensor({1, 1, 1, 0}, torch::kInt64).view({2, 2});
  std::vector<torch::Tensor> s = {torch::full({2, 2, 2}, 5.0, torch::kFloat64),
                                  torch::tensor({1., 2., 0., 1., 3., -1., 9., 9.}, torch::kFloat64).view({2, 2, 2}),
                                  torch::tensor({0., 0., 1., 1., 2., 2., -7., 7.}, torch::kFloat64).view({2, 2, 2})};
  std::vector<torch::Tensor> t = {torch::zeros({2, 2, 2}, torch::kFloat64),
                                  torch::tensor({1., 1., 0., 0., 3., 1., 0., 0.}, torch::kFloat64).view({2, 2, 2}),
                                  torch::tensor({0., 1., 1., 1., 0., 2., 0., 0.}, torch::kFloat64).view({2, 2, 2})};
  // Layer 1: the real tokens' squared distances 1, 1, 4 → 6 / (3 tokens · width 2) = 1; layer 2: 1, 0, 4 → 5 / 6.
  CHECK(hp::train::hidden_distill_loss(s, t, mask).item<double>() == Approx((1.0 + 5.0 / 6.0) / 2).epsilon(1e-12));
  std::vector<torch::Tensor> sg;
  for (const auto& x : s) sg.push_back(x.clone().requires_grad_(true));
  auto t2 = t[2].clone().requires_grad_(true);
  hp::train::hidden_distill_loss(sg, {t[0], t[1], t2}, mask).backward();
  CHECK(!t2.grad().defined());  // the teacher's side is fixed
  CHECK(!sg[0].grad().defined());  // the embeddings are not matched
  const double h = 1e-6;
  for (size_t l = 1; l < 3; ++l)
    for (long i = 0; i < 8; ++i) {
      auto up = s, down = s;
      up[l] = s[l].clone(), down[l] = s[l].clone();
      up[l].view(-1)[i] += h, down[l].view(-1)[i] -= h;
      const double numeric = (hp::train::hidden_distill_loss(up, t, mask).item<double>() -
                              hp::train::hidden_distill_loss(down, t, mask).item<double>()) /
                             (2 * h);
      CHECK(sg[l].grad().view(-1)[i].item<double>() == Approx(numeric).margin(1e-8));
    }
}

TEST_CASE("the distillation loss through the tiny model: its head-mask gradient against central differences",
          "[train][embed]") {
  const auto teacher = tiny_model();
  const auto pool = mean_normalized();
  auto in = two_sentences();
  torch::Tensor target;
  {
    torch::NoGradGuard no_grad;
    target = hp::train::sentence_embedding(teacher, in, pool);
  }
  // At a mask away from 1, where the loss is not at its minimum.
  auto base = torch::full({2, 4}, 0.7f);
  auto loss_at = [&](const torch::Tensor& mask) {
    auto x = in;
    x.head_mask = mask;
    return hp::train::embedding_distill_loss(hp::train::sentence_embedding(teacher, x, pool), target);
  };
  auto m = base.clone().requires_grad_(true);
  const auto g = torch::autograd::grad({loss_at(m)}, {m})[0];
  torch::NoGradGuard no_grad;
  const float h = 1e-2f;
  for (long i = 0; i < 8; ++i) {
    auto up = base.clone(), down = base.clone();
    up.view(-1)[i] += h, down.view(-1)[i] -= h;
    const double numeric = (loss_at(up).item<double>() - loss_at(down).item<double>()) / (2 * h);
    INFO("head " << i);
    CHECK(g.view(-1)[i].item<double>() == Approx(numeric).epsilon(0.02).margin(1e-5));
  }
}

TEST_CASE("the probe's Fisher estimates the embedding's squared Jacobian norm per head mask", "[train][embed]") {
  const auto model = tiny_model();
  const auto pool = mean_normalized();
  const auto in = two_sentences();
  auto embed = [&](const torch::Tensor& mask) {
    auto x = in;
    x.head_mask = mask;
    return hp::train::sentence_embedding(model, x, pool);
  };
  auto m = torch::ones({2, 4}, torch::requires_grad());
  const auto e = embed(m);  // [2, 32]
  // Exact: Σ_b Σ_w (∂e_bw/∂m)², one backward per output, divided by B² as the probe's 1/B makes it.
  auto exact = torch::zeros({2, 4}, torch::kFloat64);
  for (long b = 0; b < e.size(0); ++b)
    for (long w = 0; w < e.size(1); ++w)
      exact += torch::autograd::grad({e[b][w]}, {m}, {}, /*retain_graph=*/true)[0].to(torch::kFloat64).pow(2);
  exact /= 4.0;
  // Estimate: the mean of g² over 400 probes.
  auto estimate = torch::zeros({2, 4}, torch::kFloat64);
  const int K = 400;
  for (int k = 0; k < K; ++k)
    estimate += torch::autograd::grad({hp::train::embedding_probe(e, 1000 + k)}, {m}, {}, true)[0]
                    .to(torch::kFloat64)
                    .pow(2);
  estimate /= K;
  // A mean of K scaled chi-square draws: relative error about sqrt(2 / K) = 7% per entry; over all 8 together less.
  const double rel = ((estimate - exact).norm() / exact.norm()).item<double>();
  INFO("exact " << exact << "\nestimate " << estimate);
  CHECK(rel < 0.15);
  // The same seed draws the same probe.
  CHECK(hp::train::embedding_probe(e, 5).item<double>() == hp::train::embedding_probe(e, 5).item<double>());
  CHECK(hp::train::embedding_probe(e, 5).item<double>() != hp::train::embedding_probe(e, 6).item<double>());
}

TEST_CASE("recovery brings a pruned model's embeddings towards the teacher's and leaves the teacher alone",
          "[train][embed]") {
  const auto teacher = tiny_model();
  const auto pool = mean_normalized();
  const auto before = teacher.parameters().at("encoder.layer.0.attention.self.query.weight").clone();
  // The student: the teacher with half its heads' outputs zeroed (their output-projection columns).
  auto student = hp::core::load_bert(hp::test::kTinyBert, hp::core::LoadOptions{});
  auto& w = student.mutable_parameters().at("encoder.layer.0.attention.output.dense.weight");
  w.narrow(1, 0, 16).zero_();
  const auto sentences = make_data(96, 3);
  hp::core::TrainConfig tc;
  tc.batch_size = 16;
  tc.lr_peak = 3e-3;
  auto distance = [&](const hp::core::Bert& m) {
    torch::NoGradGuard no_grad;
    const auto in = two_sentences();
    return hp::train::embedding_distill_loss(hp::train::sentence_embedding(m, in, pool),
                                             hp::train::sentence_embedding(teacher, in, pool))
        .item<double>();
  };
  const double start = distance(student);
  const auto r = hp::train::recover_embeddings(student, teacher, pool, sentences, 0, tc, 60, 9, 0.0, {}, nullptr);
  CHECK(r.steps == 60);
  CHECK(!r.interrupted);
  CHECK(r.last_loss < 0.5 * r.first_loss);
  CHECK(distance(student) < 0.5 * start);
  CHECK(torch::equal(before, teacher.parameters().at("encoder.layer.0.attention.self.query.weight")));
  for (const auto& [name, t] : student.parameters()) CHECK(!t.requires_grad());
  CHECK(r.first_hidden == 0);  // off: not computed
  // With the layer-wise term the layers' outputs come back too, and the loss reports it.
  auto layered = hp::core::load_bert(hp::test::kTinyBert, hp::core::LoadOptions{});
  layered.mutable_parameters().at("encoder.layer.0.attention.output.dense.weight").narrow(1, 0, 16).zero_();
  const auto rl = hp::train::recover_embeddings(layered, teacher, pool, sentences, 0, tc, 60, 9, 1.0, {}, nullptr);
  CHECK(rl.first_hidden > 0);
  CHECK(rl.last_hidden < 0.5 * rl.first_hidden);
  CHECK(rl.last_loss < 0.5 * rl.first_loss);
  CHECK(distance(layered) < 0.5 * start);
}

TEST_CASE("a stopped recovery continues from its saved state to the weights of one never stopped", "[train][embed]") {
  const auto teacher = tiny_model();
  const auto pool = mean_normalized();
  const auto sentences = make_data(40, 3);  // 3 batches a pass: the stop falls inside the second pass
  hp::core::TrainConfig tc;
  tc.batch_size = 16;
  tc.lr_peak = 3e-3;
  tc.save_every = 5;
  auto pruned = [] {
    auto m = hp::core::load_bert(hp::test::kTinyBert, hp::core::LoadOptions{});
    m.mutable_parameters().at("encoder.layer.0.attention.output.dense.weight").narrow(1, 0, 16).zero_();
    return m;
  };
  auto whole = pruned();
  const auto straight = hp::train::recover_embeddings(whole, teacher, pool, sentences, 0, tc, 24, 9, 1.0, {}, nullptr,
                                                      hp::test::fresh_dir("embed_recovery_straight"));
  CHECK(straight.resumed_at == 0);
  // Stopped after step 16 (the progress call), past the save at 15: the step since is saved on the way out.
  const std::string dir = hp::test::fresh_dir("embed_recovery_stopped");
  std::atomic<bool> stop{false};
  auto part = pruned();
  const auto first = hp::train::recover_embeddings(
      part, teacher, pool, sentences, 0, tc, 24, 9, 1.0, [&](long s, double) { stop = s >= 16; }, &stop, dir);
  CHECK(first.interrupted);
  CHECK(first.steps == 16);
  REQUIRE(std::filesystem::exists(dir + "/state/state.json"));
  auto rest = pruned();  // a new process: the weights come from the state
  const auto second =
      hp::train::recover_embeddings(rest, teacher, pool, sentences, 0, tc, 24, 9, 1.0, {}, nullptr, dir);
  CHECK(second.resumed_at == 16);
  CHECK(second.steps == 24);
  CHECK(!second.interrupted);
  CHECK(second.first_loss == straight.first_loss);
  CHECK(second.last_loss == straight.last_loss);
  CHECK(second.last_hidden == straight.last_hidden);
  for (const auto& [name, t] : whole.parameters()) {
    INFO(name);
    CHECK(torch::equal(t, rest.parameters().at(name)));
  }
  CHECK(!std::filesystem::exists(dir + "/state"));  // done: the state goes
  // A state saved by another recovery (other steps) is set aside: this one starts over.
  auto other = pruned();
  stop = false;
  hp::train::recover_embeddings(
      other, teacher, pool, sentences, 0, tc, 30, 9, 1.0, [&](long s, double) { stop = s >= 16; }, &stop, dir);
  auto again = pruned();
  const auto over = hp::train::recover_embeddings(again, teacher, pool, sentences, 0, tc, 24, 9, 1.0, {}, nullptr, dir);
  CHECK(over.resumed_at == 0);
  for (const auto& [name, t] : whole.parameters()) CHECK(torch::equal(t, again.parameters().at(name)));
}
