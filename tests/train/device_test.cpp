// run.device (core/kernels/device.h): values checked on every build; on a GPU ([.cuda], the CTest test
// train.device_cuda, skipped visibly without one) the model, its gradients and training against the CPU's, a
// resumed GPU run against an uninterrupted one, a GPU run folder resumed on the CPU, a training step captured as a
// CUDA graph and replayed against the same steps run eagerly, and train.cuda_graph's training against the eager one.
#include "core/kernels/device.h"

#include <catch2/catch.hpp>

#include "core/base/errors.h"  // ConfigError
#include "core/io/tensor_io.h"  // read_hdf5
#include "train/captured_step.h"
#include "train/optim.h"
#include "train/run_state.h"  // optimizer_file
#include "skip.h"
#include "tiny_training.h"

using Catch::Matchers::Contains;
using namespace hp::test;  // tiny_training.h

namespace {

// The tiny model with dropout off: the CPU and a GPU draw different masks, so only a model without them can be
// compared across devices step by step.
hp::core::Bert tiny_without_dropout() {
  const auto m = tiny_model();
  auto cfg = m.config();
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0;
  cfg.classifier_dropout = 0;
  return {cfg, m.parameters()};
}

// Inputs with padding and every mask the gates use (heads, neurons, a layer, hidden channels).
hp::core::EncoderInput masked_input(const hp::core::BertConfig& c) {
  torch::manual_seed(3);
  hp::core::EncoderInput in;
  in.input_ids = torch::randint(5, 90, {3, 9}, torch::kLong);
  in.attention_mask = torch::ones({3, 9}, torch::kLong);
  in.attention_mask.index_put_({1, torch::indexing::Slice(6, torch::indexing::None)}, 0);
  in.head_mask = torch::rand({c.num_hidden_layers, c.max_heads()}).requires_grad_(true);
  in.neuron_mask = torch::rand({c.num_hidden_layers, c.intermediate_size});
  in.layer_mask = torch::full({c.num_hidden_layers}, 0.7);
  in.hidden_mask = (torch::rand({c.hidden_size}) > 0.2).to(torch::kFloat);
  return in;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kCPU) - b.to(torch::kCPU)).abs().max().item<double>();
}

bool no_gpu() {
  if (hp::core::cuda_devices() > 0) return false;
  skip(hp::core::gpu_summary() + ": the CUDA checks need a CUDA build of LibTorch and a GPU (docs/gpu.md)");
  return true;
}

}  // namespace

TEST_CASE("run.device is checked: a form, a CUDA build and a GPU that is there", "[train]") {
  CHECK(hp::core::parse_device("cpu") == torch::Device(torch::kCPU));
  CHECK_THROWS_WITH(hp::core::parse_device("gpu"), Contains("run.device = 'gpu'") && Contains("cuda:N"));
  CHECK_THROWS_WITH(hp::core::parse_device("cuda:01"), Contains("run.device"));
  // Index 99: no machine has it, so every build refuses it, naming why (no CUDA build, or the GPUs there are).
  CHECK_THROWS_WITH(hp::core::parse_device("cuda:99"),
                    Contains("run.device = cuda:99") && (Contains("without CUDA") || Contains("visible")));
  CHECK_THAT(hp::core::gpu_summary(), Contains("GPU"));
}

TEST_CASE("Bert::to the device it is on shares the weights and gives the same logits", "[train]") {
  const auto m = tiny_model();
  const auto c = m.to(torch::kCPU);
  CHECK(c.device().is_cpu());
  CHECK(c.parameters().at("classifier.weight").data_ptr() == m.parameters().at("classifier.weight").data_ptr());
  const auto in = masked_input(m.config());
  torch::NoGradGuard g;
  CHECK(torch::equal(m.forward(in).logits, c.forward(in).logits));
}

TEST_CASE("on the GPU: logits within 1e-4 of the CPU, gate gradients within 1e-3", "[.cuda]") {
  if (no_gpu()) return;
  auto cpu = tiny_without_dropout();
  auto gpu = cpu.to(torch::kCUDA);
  for (bool train : {false, true}) {
    INFO("training mode " << train);
    auto in = masked_input(cpu.config());
    cpu.set_training(train);
    gpu.set_training(train);
    const auto a = cpu.forward(in).logits;
    const auto b = gpu.forward(in).logits;  // the inputs move to the model (and the head mask's gradient back)
    CHECK(b.device().is_cuda());
    CHECK(max_diff(a, b) <= 1e-4);
    const auto ga = torch::autograd::grad({a.sum()}, {in.head_mask})[0];
    const auto gb = torch::autograd::grad({b.sum()}, {in.head_mask})[0];
    CHECK(gb.device().is_cpu());
    CHECK(max_diff(ga, gb) <= 1e-3 * std::max(1.0, ga.abs().max().item<double>()));
  }
}

TEST_CASE("on the GPU: training follows the CPU's losses; a resumed run equals the uninterrupted one", "[.cuda]") {
  if (no_gpu()) return;
  Setup s;
  s.tc.epochs = 2;  // 24 steps
  s.tc.lr_peak = 1e-3;
  auto data = s.data();
  auto run = [&](const std::string& name, const std::string& device, long stop_after, bool resume) {
    auto m = tiny_without_dropout();
    hp::core::RunConfig rc = s.rc;
    rc.device = device;
    hp::train::TrainOptions o;
    o.run_dir = resume ? std::string(HP_BINARY_DIR) + "/test_tmp/train/" + name : fresh_dir(name);
    o.config_yaml = "device test";  // the same on both devices: a run folder crosses between them
    o.stop_after_steps = stop_after;
    o.resume = resume;
    const auto r = hp::train::train_model(s.tc, s.gc, rc, m, data, o);
    return std::make_pair(r, m);
  };
  const auto [r_cpu, m_cpu] = run("dev_cpu", "cpu", 0, false);
  const auto [r_gpu, m_gpu] = run("dev_gpu", "cuda", 0, false);
  REQUIRE(r_gpu.steps == r_cpu.steps);
  CHECK(m_gpu.device().is_cpu());  // the trained weights came back into the caller's model
  const auto l_cpu = hp::core::read_hdf5(std::string(HP_BINARY_DIR) + "/test_tmp/train/dev_cpu/run.h5").at("train/loss");
  const auto l_gpu = hp::core::read_hdf5(std::string(HP_BINARY_DIR) + "/test_tmp/train/dev_gpu/run.h5").at("train/loss");
  WARN("largest loss difference GPU - CPU over " << r_cpu.steps << " steps: " << max_diff(l_cpu, l_gpu));
  CHECK(max_diff(l_cpu, l_gpu) <= 1e-3);
  CHECK(std::abs(r_gpu.best_metric - r_cpu.best_metric) <= 0.02);

  // Stopped on the GPU after 10 steps and resumed there: the same weights as the uninterrupted GPU run.
  // Stopped on the GPU after 10 steps and resumed on `device`: the largest weight difference to the uninterrupted
  // GPU run.
  auto resumed_on = [&, &m_gpu = m_gpu, &r_gpu = r_gpu](const std::string& name, const std::string& device) {
    REQUIRE(run(name, "cuda", 10, false).first.interrupted);
    const auto [r, m] = run(name, device, 0, true);
    REQUIRE(r.steps == r_gpu.steps);
    double worst = 0;
    for (const auto& [key, t] : m_gpu.parameters()) worst = std::max(worst, max_diff(t, m.parameters().at(key)));
    WARN("GPU run resumed on " << device << " against the uninterrupted GPU run: largest weight difference " << worst);
    return worst;
  };
  CHECK(resumed_on("dev_gpu_part", "cuda") == 0);
  CHECK(resumed_on("dev_cross", "cpu") <= 1e-3);  // the run folder crosses devices, within float error
}

TEST_CASE("on the GPU: CoFi's gated steps queue without the host waiting for the GPU", "[.cuda]") {
  if (no_gpu()) return;
  // Gates over heads, neurons, layers and hidden channels under a FLOPs target, with the logit and the layer
  // distillation, then the structure fixed: every training step runs under c10's sync debug mode "error", so a read
  // of a value, a blocking copy or a synchronisation inside it throws; the logged scalars are read every
  // PendingSteps::kReadEvery steps. (The fixed masks live on the host, where the model reads their values.)
  Setup s;
  s.tc.epochs = 4;  // 48 gated steps, then 16 with the structure fixed
  s.gc.target_flops = 0.5;
  s.gc.lr = 0.5;
  s.gc.lagrangian_lr = 0.05;
  s.gc.finetune_after = true;
  s.gc.distill = true;
  s.gc.distill_hidden = 1;
  s.gc.layer_gates = s.gc.hidden_gates = true;
  auto data = s.data();
  auto teacher = tiny_without_dropout(), m = tiny_without_dropout();
  hp::core::RunConfig rc = s.rc;
  rc.device = "cuda";
  hp::train::TrainOptions o;
  o.run_dir = fresh_dir("dev_no_waits");
  o.config_yaml = "no waits";
  o.teacher = &teacher;
  o.forbid_host_waits = true;
  o.finetune_steps = 16;
  const auto r = hp::train::train_model(s.tc, s.gc, rc, m, data, o);
  CHECK(r.steps == 64);
  CHECK(r.host_reads * 8 <= r.steps);
  const auto loss = hp::core::read_hdf5(o.run_dir + "/run.h5").at("train/loss");
  CHECK(loss.size(0) == 64);
  CHECK(torch::isfinite(loss).all().item<bool>());
}

TEST_CASE("a captured step needs CUDA: a build without it says so", "[train]") {
  if (hp::train::CapturedStep::available()) return;  // a CUDA build: the [.cuda] case below checks it on a GPU
  CHECK_THROWS_WITH(hp::train::CapturedStep([] {}, {}, torch::kCPU), Contains("LibTorch built with CUDA"));
}

TEST_CASE("on the GPU: a captured training step replayed gives the eager steps' weights", "[.cuda]") {
  if (no_gpu()) return;
  // Six steps of the same batch with the lr schedule running: eagerly, and as three eager warm-up steps, the capture
  // and three replays (the lr of each replay filled by set_step, the step counts advanced on the device).
  auto steps = [](bool captured) {
    auto m = tiny_without_dropout().to(torch::kCUDA);
    m.set_training(true);
    for (auto& [key, p] : m.mutable_parameters()) p.requires_grad_(true);
    hp::core::TrainConfig tc;
    tc.lr_peak = 1e-3;
    hp::train::Optimizer opt(tc, m.parameters(), {}, 0, 6);
    REQUIRE(opt.fused());
    auto in = masked_input(m.config());
    in.head_mask = in.neuron_mask = in.layer_mask = in.hidden_mask = torch::Tensor();
    for (auto* t : {&in.input_ids, &in.token_type_ids, &in.attention_mask})
      if (t->defined()) *t = t->to(torch::kCUDA);
    const auto labels = torch::tensor({0, 1, 2}, torch::kLong).to(torch::kCUDA) % m.config().num_labels;
    long step = 0;
    auto one = [&] {
      const auto logits = m.forward(in).logits;
      torch::cross_entropy_loss(logits, labels).backward();
      opt.step();
    };
    if (!captured) {
      for (; step < 6; ++step) opt.set_step(step), opt.zero_grad(), one();
    } else {
      // set_step stays out of the capture: its fill of the device lr, recorded there, would replay the capture's lr.
      bool capturing = false;
      hp::train::CapturedStep graph(
          [&] {
            if (!capturing) opt.set_step(step++);
            opt.zero_grad(), one();
          },
          [&] { capturing = true, opt.set_step(step), opt.zero_grad(); }, torch::kCUDA, 3);
      for (; step < 6; ++step) opt.set_step(step), graph.replay();
      hp::core::synchronize(torch::kCUDA);
    }
    return m;
  };
  const auto eager = steps(false), captured = steps(true);
  double worst = 0, moved = 0;
  const auto start = tiny_without_dropout();
  for (const auto& [key, t] : eager.parameters()) {
    worst = std::max(worst, max_diff(t, captured.parameters().at(key)));
    moved = std::max(moved, max_diff(t, start.parameters().at(key)));
  }
  CHECK(moved > 1e-3);  // the steps did move the weights
  CHECK(worst <= 1e-5);
}

TEST_CASE("on the GPU: train.cuda_graph follows the eager run's losses; its stopped run resumes to the same weights",
          "[.cuda]") {
  if (no_gpu()) return;
  // Batches of 4 over 198 rows: 49 full ones an epoch, padded to the tiny data's buckets {8, 12} (6 to 12 tokens),
  // each replaying its bucket's graph after one warm-up step, and a last batch of 2 rows, which runs eagerly. Dropout
  // is off: a graph's replays draw from the generator at other offsets than the eager steps do.
  // The captured steps run the eager step's kernels on inputs padded to the bucket, where the eager run pads to each
  // batch's longest row; the masked keys weigh exact zeros, so only float32 summation order differs, ~1e-6 a step,
  // carried through 50 steps.
  constexpr double kGraphLossTol = 1e-4;
  // A resumed run's first batch of each bucket is its warm-up step on a side stream where the uninterrupted run
  // replays: the same kernels. A saved AdamW step count left where the capture put it would move the weights by
  // about the lr (1e-3) through the bias correction.
  constexpr double kResumeTol = 1e-5;
  Setup s;
  s.train = make_data(198, 1);
  s.tc.epochs = 1;
  s.tc.batch_size = 4;
  s.tc.lr_peak = 1e-3;
  auto data = s.data();
  auto run = [&](const std::string& name, bool graph, long stop_after, bool resume) {
    auto m = tiny_without_dropout();
    hp::core::TrainConfig tc = s.tc;
    tc.cuda_graph = graph;
    hp::core::RunConfig rc = s.rc;
    rc.device = "cuda";
    hp::train::TrainOptions o;
    o.run_dir = resume ? std::string(HP_BINARY_DIR) + "/test_tmp/train/" + name : fresh_dir(name);
    o.config_yaml = graph ? "graph on" : "graph off";
    o.stop_after_steps = stop_after;
    o.resume = resume;
    o.forbid_host_waits = true;  // a replay, as an eager step, waits for nothing (a capture's one wait is allowed)
    const auto r = hp::train::train_model(tc, s.gc, rc, m, data, o);
    return std::make_pair(r, m);
  };
  const auto [r_off, m_off] = run("graph_off", false, 0, false);
  const auto [r_on, m_on] = run("graph_on", true, 0, false);
  REQUIRE(r_on.steps == 50);
  REQUIRE(r_off.steps == 50);
  CHECK(r_off.graphs_captured == 0);
  CHECK(r_on.graphs_captured >= 1);
  CHECK(r_on.graphs_captured + r_on.graph_replays == 49);  // every full batch: a warm-up step or a replay
  const auto dir = std::string(HP_BINARY_DIR) + "/test_tmp/train/";
  const auto l_off = hp::core::read_hdf5(dir + "graph_off/run.h5").at("train/loss");
  const auto l_on = hp::core::read_hdf5(dir + "graph_on/run.h5").at("train/loss");
  REQUIRE(l_on.size(0) == 50);
  WARN("train.cuda_graph against eager: largest loss difference "
       << max_diff(l_on, l_off) << ", " << r_on.graphs_captured << " graphs, " << r_on.graph_replays << " replays");
  CHECK(max_diff(l_on, l_off) <= kGraphLossTol);

  // Stopped after 20 steps: the saved AdamW state counts 20 steps (the replays advanced only the GPU's counts).
  REQUIRE(run("graph_part", true, 20, false).first.interrupted);
  {
    auto m = tiny_without_dropout();
    for (auto& [key, p] : m.mutable_parameters()) p.requires_grad_(true);
    hp::train::Optimizer opt(s.tc, m.parameters(), {}, 0, 50);
    opt.load(hp::train::optimizer_file(dir + "graph_part"));
    for (auto& entry : opt.adamw().state())
      CHECK(static_cast<torch::optim::AdamWParamState&>(*entry.second).step() == 20);
  }
  const auto [r_res, m_res] = run("graph_part", true, 0, true);
  REQUIRE(r_res.steps == 50);
  double worst = 0;
  for (const auto& [key, t] : m_on.parameters()) worst = std::max(worst, max_diff(t, m_res.parameters().at(key)));
  WARN("train.cuda_graph resumed after 20 steps against uninterrupted: largest weight difference " << worst);
  CHECK(worst <= kResumeTol);
}
