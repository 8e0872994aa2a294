// train/embedding_objective against independent references (#59): the distillation loss's gradient against central
// differences (in the embeddings, and through the tiny model in a head mask), the probe's Fisher against the exact
// Jacobian's squared norm, and the trainer's recovery with the objective bringing a pruned model's embeddings back
// towards the teacher's (and resuming bit for bit).
#include "train/embedding_objective.h"

#include <catch2/catch.hpp>
#include <torch/autograd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/model/pooling.h"
#include "core/io/checkpoint.h"
#include "tiny_training.h"
#include "train/trainer.h"

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

namespace {

// The tiny model with half of layer 0's heads' outputs zeroed (their output-projection columns): a pruned student.
hp::core::Bert pruned_student() {
  auto m = hp::core::load_bert(hp::test::kTinyBert, hp::core::LoadOptions{});
  m.mutable_parameters().at("encoder.layer.0.attention.output.dense.weight").narrow(1, 0, 16).zero_();
  return m;
}

// The trainer's run of the embedding objective (as prune/objective/embedding.cpp makes it): `steps` steps of
// `student` towards `teacher`'s embeddings of `sentences`, evaluated by the same distance (negated: higher is better)
// on `probe`, with the same-depth layer term weighted `hidden`.
hp::train::TrainResult recover(hp::core::Bert& student, const hp::core::Bert& teacher,
                               const hp::core::EncodedDataset& sentences, long steps, double hidden,
                               const std::string& dir, long stop_after = 0) {
  const auto pool = mean_normalized();
  hp::train::Objective o;
  o.metric = "neg_distance";
  o.loss = [pool](const hp::core::EncoderOutput& s, const hp::core::EncoderOutput& t, const hp::core::EncoderInput& in) {
    return hp::train::embedding_distill_loss(hp::train::pooled(s, in, pool), hp::train::pooled(t, in, pool));
  };
  o.evaluate = [&teacher, pool](const hp::core::Bert& m, const hp::eval::Masks&) {
    torch::NoGradGuard no_grad;
    const auto in = two_sentences();
    const double d = hp::train::embedding_distill_loss(hp::train::sentence_embedding(m, in, pool),
                                                       hp::train::sentence_embedding(teacher, in, pool))
                         .item<double>();
    return std::map<std::string, double>{{"neg_distance", -d}};
  };
  hp::core::TrainConfig tc;
  tc.batch_size = 16, tc.lr_peak = 3e-3, tc.max_steps = steps, tc.eval_every = steps / 2;
  hp::core::GateConfig gc;
  gc.distill_hidden = hidden;
  hp::core::RunConfig rc;
  rc.seed = 9;
  hp::train::TrainData data;
  data.task = &hp::core::find_task("stsb");
  data.train = &sentences, data.eval = &sentences, data.objective = &o;
  hp::train::TrainOptions opts;
  opts.run_dir = dir, opts.teacher = &teacher, opts.stop_after_steps = stop_after;
  opts.resume = std::filesystem::exists(dir + "/state");
  return hp::train::train_model(tc, gc, rc, student, data, opts);
}

// The steps' logged values of `key` in RUN_DIR/metrics.csv (step,epoch,key,value rows).
std::vector<double> logged(const std::string& dir, const std::string& key) {
  std::ifstream in(dir + "/metrics.csv");
  std::vector<double> out;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    if (f.size() == 4 && f[2] == key) out.push_back(std::stod(f[3]));
  }
  return out;
}

}  // namespace

TEST_CASE("the trainer's recovery brings a pruned model's embeddings towards the teacher's, its layers too",
          "[train][embed]") {
  const auto teacher = tiny_model();
  const auto pool = mean_normalized();
  const auto before = teacher.parameters().at("encoder.layer.0.attention.self.query.weight").clone();
  const auto sentences = make_data(96, 3);
  auto distance = [&](const hp::core::Bert& m) {
    torch::NoGradGuard no_grad;
    const auto in = two_sentences();
    return hp::train::embedding_distill_loss(hp::train::sentence_embedding(m, in, pool),
                                             hp::train::sentence_embedding(teacher, in, pool))
        .item<double>();
  };
  auto student = pruned_student();
  const double start = distance(student);
  const std::string plain = hp::test::fresh_dir("embed_recovery_plain");
  const auto r = recover(student, teacher, sentences, 60, 0.0, plain);
  CHECK(r.steps == 60);
  CHECK(!r.interrupted);
  CHECK(-r.best_metric < 0.5 * start);  // the kept checkpoint is nearer the teacher
  const auto loss = logged(plain, "train/task_loss");
  REQUIRE(loss.size() >= 6);
  CHECK(loss.back() < 0.5 * loss.front());
  CHECK(logged(plain, "train/distill_hidden").empty());  // off: not computed
  CHECK(torch::equal(before, teacher.parameters().at("encoder.layer.0.attention.self.query.weight")));
  // With the layer-wise term the layers' outputs come back too, and the step logs it.
  auto layered = pruned_student();
  const std::string deep = hp::test::fresh_dir("embed_recovery_layers");
  const auto rl = recover(layered, teacher, sentences, 60, 1.0, deep);
  const auto hidden = logged(deep, "train/distill_hidden");
  REQUIRE(hidden.size() >= 6);
  CHECK(hidden.front() > 0);
  CHECK(hidden.back() < 0.5 * hidden.front());
  CHECK(-rl.best_metric < 0.5 * start);
}

TEST_CASE("a stopped recovery continues from the trainer's state to the weights of one never stopped",
          "[train][embed]") {
  const auto teacher = tiny_model();
  const auto sentences = make_data(40, 3);  // 3 batches a pass: the stop falls inside the second pass
  auto whole = pruned_student();
  const std::string straight_dir = hp::test::fresh_dir("embed_recovery_straight");
  const auto straight = recover(whole, teacher, sentences, 24, 1.0, straight_dir);
  const std::string dir = hp::test::fresh_dir("embed_recovery_stopped");
  auto part = pruned_student();
  const auto first = recover(part, teacher, sentences, 24, 1.0, dir, 16);
  CHECK(first.interrupted);
  CHECK(first.steps == 16);
  auto rest = pruned_student();  // a new process: the weights come from the state
  const auto second = recover(rest, teacher, sentences, 24, 1.0, dir);
  CHECK(second.steps == 24);
  CHECK(!second.interrupted);
  CHECK(second.best_metric == straight.best_metric);
  CHECK(second.best_step == straight.best_step);
  const auto a = hp::core::load_bert(straight_dir + "/best", {});
  const auto b = hp::core::load_bert(dir + "/best", {});
  for (const auto& [name, t] : a.parameters()) {
    INFO(name);
    CHECK(torch::equal(t, b.parameters().at(name)));
    CHECK(torch::equal(whole.parameters().at(name), rest.parameters().at(name)));
  }
}
