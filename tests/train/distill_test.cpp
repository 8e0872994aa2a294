// train/distill against a hand computation of T² KL(softmax(t/T) || softmax(s/T)), batch-averaged.
#include "train/distill.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace {
// float32 softmax of values near 1: about 1e-7 relative error per term.
constexpr double kTol = 1e-5;

std::vector<double> softmax(const std::vector<double>& x, double T) {
  double z = 0;
  std::vector<double> p;
  for (double v : x) z += std::exp(v / T);
  for (double v : x) p.push_back(std::exp(v / T) / z);
  return p;
}
}  // namespace

TEST_CASE("distillation KL equals a hand computation on tiny logits", "[train]") {
  const std::vector<std::vector<double>> s = {{1.0, 2.0, 0.0}, {0.3, -1.0, 0.5}};
  const std::vector<std::vector<double>> t = {{0.5, 0.5, 2.0}, {0.0, 0.0, 0.0}};
  const double T = 2.0;
  double expected = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    auto ps = softmax(s[i], T), pt = softmax(t[i], T);
    for (size_t c = 0; c < 3; ++c) expected += pt[c] * std::log(pt[c] / ps[c]);
  }
  expected = expected / 2.0 * T * T;
  auto st = torch::tensor({1.0f, 2.0f, 0.0f, 0.3f, -1.0f, 0.5f}).view({2, 3});
  auto tt = torch::tensor({0.5f, 0.5f, 2.0f, 0.0f, 0.0f, 0.0f}).view({2, 3});
  CHECK(hp::train::distill_kl(st, tt, T).item<double>() == Approx(expected).epsilon(kTol));
  // Equal logits: zero divergence; the teacher gets no gradient.
  CHECK(hp::train::distill_kl(st, st, T).item<double>() == Approx(0.0).margin(1e-7));
  auto sg = st.clone().requires_grad_(true), tg = tt.clone().requires_grad_(true);
  hp::train::distill_kl(sg, tg, T).backward();
  CHECK(sg.grad().defined());
  CHECK(!tg.grad().defined());
  // Regression: the mean squared difference.
  auto r = hp::train::distill_loss(torch::tensor({{1.0f}, {3.0f}}), torch::tensor({{0.0f}, {1.0f}}), T, true);
  CHECK(r.item<double>() == Approx(2.5).epsilon(kTol));
}

TEST_CASE("layer-wise distillation matches teacher layers in order and sums their MSE (CoFi)", "[train]") {
  hp::train::LayerDistill ld(/*hidden=*/2, /*layers=*/8);
  CHECK(ld.teacher_layers() == std::vector<int>{1, 3, 5, 7});  // 12 layers would give 2, 5, 8, 11
  CHECK(hp::train::LayerDistill(2, 12).teacher_layers() == std::vector<int>{2, 5, 8, 11});
  CHECK(hp::train::LayerDistill(2, 3).teacher_layers() == std::vector<int>{0, 1, 2});
  // Hidden state i (the embeddings are i = 0) holds the value i in every real token; the student equals the
  // teacher except its last layer (100) and a padding position (1000, never counted).
  std::vector<torch::Tensor> teacher, student;
  for (int i = 0; i <= 8; ++i) {
    teacher.push_back(torch::full({1, 3, 2}, static_cast<float>(i)));
    student.push_back(teacher.back().clone());
    student.back()[0][2] = 1000.0f;
  }
  student[8].slice(1, 0, 2).fill_(100.0f);
  const auto mask = torch::tensor({1, 1, 0}).view({1, 3});
  std::vector<int> align;
  // Teacher layer 7 (value 8) takes student layer 6 (value 7): MSE 1; the others match exactly below it.
  CHECK(ld.loss(student, teacher, mask, {}, &align).item<double>() == Approx(1.0));
  CHECK(align == std::vector<int>{1, 3, 5, 6});
  // Without layer 6 (its attention pruned away): 7 ← 5 (MSE 4), 5 ← 4 (1), then exact.
  auto alive = torch::ones({8}, torch::kBool);
  alive[6] = false;
  CHECK(ld.loss(student, teacher, mask, alive, &align).item<double>() == Approx(5.0));
  CHECK(align == std::vector<int>{1, 3, 4, 5});
  // Only layer 0 left (value 1): teacher layer 7 takes it (MSE 49), the rest keep that bound (CoFi): 25 + 9 + 1.
  alive = torch::zeros({8}, torch::kBool);
  alive[0] = true;
  CHECK(ld.loss(student, teacher, mask, alive, &align).item<double>() == Approx(84.0));
  CHECK(align == std::vector<int>{0, 0, 0, 0});
  // No layer left: no term at all.
  CHECK(ld.loss(student, teacher, mask, torch::zeros({8}, torch::kBool), &align).item<double>() == 0.0);
  CHECK(align == std::vector<int>{8, 8, 8, 8});
  // A GPU's path (the matches gathered on the device, no host read) gives the same losses and gradients.
  hp::train::LayerDistill gathered(2, 8);
  gathered.gather_on_device(true);
  for (const auto& a : {torch::Tensor(), torch::ones({8}, torch::kBool), alive}) {
    std::vector<int> align_host, align_gathered;
    auto s_host = student, s_gathered = student;
    for (size_t i = 0; i < student.size(); ++i) {
      s_host[i] = student[i].clone().requires_grad_(true);
      s_gathered[i] = student[i].clone().requires_grad_(true);
    }
    const auto lh = ld.loss(s_host, teacher, mask, a, &align_host);
    const auto lg = gathered.loss(s_gathered, teacher, mask, a, &align_gathered);
    CHECK(lg.item<double>() == lh.item<double>());
    CHECK(align_gathered == align_host);
    lh.backward();
    lg.backward();
    auto grad = [](const torch::Tensor& t) { return t.grad().defined() ? t.grad() : torch::zeros_like(t); };
    for (size_t i = 1; i < student.size(); ++i)
      CHECK(torch::allclose(grad(s_host[i]), grad(s_gathered[i]), 1e-6, 1e-7));
  }
  // The map trains: its gradient reaches W and b.
  auto l = ld.loss(student, teacher, mask, {});
  l.backward();
  CHECK(ld.parameters().at("distill_map.weight").grad().abs().sum().item<double>() > 0);
  CHECK(ld.parameters().at("distill_map.bias").grad().abs().sum().item<double>() > 0);
}
