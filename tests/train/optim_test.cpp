// train/optim against closed forms: HF's linear warm-up/decay schedule, the no-decay rule for biases
// and LayerNorm weights (group membership and the group's weight decay), and global-norm clipping.
#include "train/optim.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <torch/utils.h>
#include <torch/optim.h>

#include "core/base/errors.h"  // InternalError
#include "core/io/checkpoint.h"  // load_bert
#include "fixtures.h"

using hp::train::linear_schedule;
using hp::train::Optimizer;
using hp::train::ParamGroup;

namespace {
// Doubles computed from small integers: exact up to one rounding.
constexpr double kTol = 1e-12;
using hp::test::kTinyBert;
}  // namespace

TEST_CASE("linear schedule equals HF get_linear_schedule_with_warmup's closed form", "[train]") {
  // total 100, warm-up 10: step/10 below 10, then (100 - step)/90.
  CHECK(linear_schedule(0, 10, 100) == 0.0);
  CHECK(linear_schedule(5, 10, 100) == Approx(0.5).epsilon(kTol));
  CHECK(linear_schedule(10, 10, 100) == Approx(1.0).epsilon(kTol));
  CHECK(linear_schedule(55, 10, 100) == Approx(0.5).epsilon(kTol));
  CHECK(linear_schedule(99, 10, 100) == Approx(1.0 / 90.0).epsilon(kTol));
  CHECK(linear_schedule(100, 10, 100) == 0.0);
  CHECK(linear_schedule(150, 10, 100) == 0.0);
  CHECK(linear_schedule(0, 0, 100) == Approx(1.0).epsilon(kTol));
  // HF TrainingArguments: warmup_steps = ceil(ratio * total).
  CHECK(hp::train::warmup_steps_for(0.1, 95) == 10);
  CHECK(hp::train::warmup_steps_for(0.0, 95) == 0);
}

TEST_CASE("each param group's lr follows its base lr times the schedule", "[train]") {
  hp::core::TrainConfig cfg;
  cfg.lr_peak = 1e-3;
  cfg.lr_warmup_ratio = 0.1;
  std::map<std::string, torch::Tensor> params = {{"w.weight", torch::ones({2}).requires_grad_(true)},
                                                 {"w.bias", torch::ones({2}).requires_grad_(true)}};
  auto log_alpha = torch::zeros({2, 2}).requires_grad_(true);
  Optimizer opt(cfg, params, {log_alpha}, /*gates_lr=*/0.1, /*total_steps=*/100);
  REQUIRE(opt.warmup_steps() == 10);
  opt.set_step(5);
  auto& groups = opt.adamw().param_groups();
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].options().get_lr() == Approx(0.5e-3).epsilon(kTol));
  CHECK(groups[1].options().get_lr() == Approx(0.5e-3).epsilon(kTol));
  CHECK(groups[2].options().get_lr() == Approx(0.05).epsilon(kTol));
  opt.set_step(55);
  CHECK(opt.lr() == Approx(0.5e-3).epsilon(kTol));
  CHECK(groups[2].options().get_lr() == Approx(0.05).epsilon(kTol));
}

TEST_CASE("no weight decay on biases and LayerNorm weights of the tiny BERT", "[train]") {
  hp::core::LoadOptions lo;
  lo.num_labels = 3;
  auto model = hp::core::load_bert(kTinyBert, lo);
  for (auto& [name, t] : model.mutable_parameters()) t.requires_grad_(true);
  hp::core::TrainConfig cfg;
  cfg.weight_decay = 0.01;
  Optimizer opt(cfg, model.parameters(), {}, 0.1, 10);
  const auto& decay = opt.members(ParamGroup::kDecay);
  const auto& no_decay = opt.members(ParamGroup::kNoDecay);
  CHECK(decay.size() + no_decay.size() == model.parameters().size());
  auto ends_with_bias = [](const std::string& n) { return n.size() >= 4 && n.substr(n.size() - 4) == "bias"; };
  for (const auto& n : no_decay) CHECK((ends_with_bias(n) || n.find("LayerNorm") != std::string::npos));
  for (const auto& n : decay) CHECK((!ends_with_bias(n) && n.find("LayerNorm") == std::string::npos));
  // Named examples, and the tensors really sit in the group with the matching weight decay.
  auto& groups = opt.adamw().param_groups();
  auto in_group = [&](size_t g, const std::string& name) {
    for (const auto& p : groups[g].params())
      if (p.is_same(model.parameters().at(name))) return true;
    return false;
  };
  CHECK(in_group(0, "encoder.layer.0.attention.self.query.weight"));
  CHECK(in_group(0, "classifier.weight"));
  CHECK(in_group(1, "encoder.layer.0.attention.self.query.bias"));
  CHECK(in_group(1, "encoder.layer.1.output.LayerNorm.weight"));
  CHECK(in_group(1, "embeddings.LayerNorm.weight"));
  CHECK(static_cast<torch::optim::AdamWOptions&>(groups[0].options()).weight_decay() == 0.01);
  CHECK(static_cast<torch::optim::AdamWOptions&>(groups[1].options()).weight_decay() == 0.0);
}

TEST_CASE("gradient clipping bounds the global L2 norm and reports the norm before clipping", "[train]") {
  hp::core::TrainConfig cfg;
  cfg.grad_clip = 1.0;
  auto a = torch::zeros({2}).requires_grad_(true);
  auto b = torch::zeros({1}).requires_grad_(true);
  Optimizer opt(cfg, {{"a.weight", a}, {"b.weight", b}}, {}, 0.1, 10);
  // Gradients (3, 0) and (4): global norm 5.
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({4.0f});
  double before = opt.step().item<double>();
  CHECK(before == Approx(5.0).epsilon(1e-6));
  CHECK(hp::train::grad_norm({a, b}) == Approx(1.0).epsilon(1e-6));
  CHECK(a.grad()[0].item<float>() == Approx(0.6).epsilon(1e-6));
  CHECK(b.grad()[0].item<float>() == Approx(0.8).epsilon(1e-6));
}

TEST_CASE("a step in which a parameter gets no gradient is the same after a resume as without one", "[train]") {
  // Two parameters; the second gets no gradient in step 2 (no path from the loss, like the layer-distillation map
  // in a step where no layer matched). The optimizer that ran step 1 and one loaded from its saved state must
  // take the same step 2 (#44 item 9: a resumed gates run left the map behind by one step).
  hp::core::TrainConfig cfg;
  cfg.lr_peak = 0.1;
  cfg.lr_warmup_ratio = 0;
  cfg.grad_clip = 0;
  auto make = [] {
    return std::map<std::string, torch::Tensor>{{"a.weight", torch::tensor({1.0f, 2.0f}).requires_grad_()},
                                                {"b.weight", torch::tensor({3.0f}).requires_grad_()}};
  };
  auto loss_step = [](Optimizer& opt, std::map<std::string, torch::Tensor>& p, bool both, long step) {
    opt.zero_grad();
    opt.set_step(step);
    auto loss = p["a.weight"].pow(2).sum();
    if (both) loss = loss + p["b.weight"].sum();
    loss.backward();
    opt.step();
  };
  auto run = make();
  Optimizer opt(cfg, run, {}, 0.1, 10);
  loss_step(opt, run, true, 0);
  const auto dir = hp::test::scratch_dir("hp_optim_resume");
  std::filesystem::create_directories(dir);
  const std::string saved = (dir / "optimizer.pt").string();
  opt.save(saved);
  auto resumed = make();  // a fresh process: the weights as saved, no gradients yet
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : resumed) t.copy_(run[name]);
  }
  Optimizer opt2(cfg, resumed, {}, 0.1, 10);
  opt2.load(saved);
  loss_step(opt, run, false, 1);
  loss_step(opt2, resumed, false, 1);
  CHECK(torch::equal(run["a.weight"], resumed["a.weight"]));
  CHECK(torch::equal(run["b.weight"], resumed["b.weight"]));  // without the fix: 3 - 0.1 - ... vs left where it was
}

TEST_CASE("the fused AdamW path steps as torch::optim::AdamW does, and their saved states cross", "[train]") {
  if (!Optimizer::fused_available()) {  // LibTorch before 2.4 (Debian's 1.13): the path is not built
    hp::core::TrainConfig cfg;
    std::map<std::string, torch::Tensor> p{{"a.weight", torch::ones({2}).requires_grad_()}};
    Optimizer opt(cfg, p, {}, 0.1, 10);
    CHECK_FALSE(opt.fused());
    CHECK_THROWS_AS(opt.set_fused(true), hp::InternalError);
    return;
  }
  hp::core::TrainConfig cfg;
  cfg.lr_peak = 0.05;
  cfg.grad_clip = 0.5;  // clips: the gradients below have norms of several units
  torch::manual_seed(5);
  const auto w0 = torch::randn({4, 3}), b0 = torch::randn({4}), g0 = torch::randn({2});
  auto make = [&] {
    return std::map<std::string, torch::Tensor>{{"l.weight", w0.clone().requires_grad_()},
                                                {"l.bias", b0.clone().requires_grad_()}};
  };
  auto step = [](Optimizer& opt, std::map<std::string, torch::Tensor>& p, const torch::Tensor& gate, long k) {
    opt.zero_grad();
    opt.set_step(k);
    const auto x = torch::arange(3.0f * (k + 1), 3.0f * (k + 2)).view({1, 3});
    (torch::linear(x, p["l.weight"], p["l.bias"]).pow(2).sum() + gate.pow(2).sum() * 3).backward();
    return opt.step().item<double>();
  };
  auto plain = make(), fused = make();
  auto gate_a = g0.clone().requires_grad_(), gate_b = g0.clone().requires_grad_();
  Optimizer a(cfg, plain, {gate_a}, 0.2, 10), b(cfg, fused, {gate_b}, 0.2, 10);
  b.set_fused(true);
  CHECK_FALSE(a.fused());  // parameters on the CPU: the per-parameter path unless asked
  for (long k = 0; k < 4; ++k) CHECK(step(a, plain, gate_a, k) == Approx(step(b, fused, gate_b, k)).epsilon(1e-6));
  for (const auto& [name, t] : plain) {
    INFO(name);
    CHECK(torch::allclose(t, fused.at(name), 1e-6, 1e-7));
  }
  CHECK(torch::allclose(gate_a, gate_b, 1e-6, 1e-7));
  // The fused path's state, saved, goes on in the per-parameter path exactly as the plain run does.
  const auto dir = hp::test::scratch_dir("hp_optim_fused");
  std::filesystem::create_directories(dir);
  b.save((dir / "fused.pt").string());
  auto cont = make();
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : cont) t.copy_(fused.at(name));
  }
  auto gate_c = gate_b.detach().clone().requires_grad_();
  Optimizer c(cfg, cont, {gate_c}, 0.2, 10);
  c.load((dir / "fused.pt").string());
  step(a, plain, gate_a, 4);
  step(c, cont, gate_c, 4);
  for (const auto& [name, t] : plain) CHECK(torch::allclose(t, cont.at(name), 1e-6, 1e-7));
}

TEST_CASE("set_step_count sets the step count a saved state carries (a captured step's replays do not advance it)",
          "[train]") {
  hp::core::TrainConfig cfg;
  auto p = std::map<std::string, torch::Tensor>{{"a.weight", torch::tensor({1.0f, 2.0f}).requires_grad_()},
                                                {"a.bias", torch::tensor({3.0f}).requires_grad_()}};
  Optimizer opt(cfg, p, {}, 0.1, 10);
  for (long step = 0; step < 2; ++step) {
    opt.zero_grad();
    opt.set_step(step);
    (p["a.weight"].pow(2).sum() + p["a.bias"].sum()).backward();
    opt.step();
  }
  auto counts = [](Optimizer& o) {
    std::vector<long> c;
    for (auto& entry : o.adamw().state())
      c.push_back(static_cast<long>(static_cast<torch::optim::AdamWParamState&>(*entry.second).step()));
    return c;
  };
  REQUIRE(counts(opt) == std::vector<long>{2, 2});  // one count per parameter, as the steps taken
  opt.set_step_count(7);
  const auto dir = hp::test::scratch_dir("hp_optim_step_count");
  std::filesystem::create_directories(dir);
  const std::string saved = (dir / "optimizer.pt").string();
  opt.save(saved);
  Optimizer loaded(cfg, p, {}, 0.1, 10);
  loaded.load(saved);
  CHECK(counts(loaded) == std::vector<long>{7, 7});
}
