// One training step and one forward of headprune's model on a device (a GPU with --device cuda), on random weights
// of all-MiniLM-L6-v2's and BERT-base's shapes: the rows of docs/gpu.md, beside bench/gpu_step_bench.py (PyTorch +
// transformers on the same GPU, the same shapes and recipe). The step is the training loop's (train/trainer.cpp):
// forward with dropout (bf16 autocast or fp32), cross-entropy on the [CLS] logits, backward, global-norm clipping
// and AdamW (train/optim.h). The forward is the evaluator's (no gradient, [CLS] logits). Each row: the median of
// --steps timed calls after --warmup, the device synchronised around each. On a GPU the training step and the
// forward are also timed as captured CUDA graphs (the "-graph" rows).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/base/errors.h"
#include "core/kernels/device.h"
#include "core/kernels/lowp_gemm.h"  // Bf16Autocast
#include "core/kernels/runtime.h"
#include "random_model.h"
#include "timing.h"
#include "train/captured_step.h"
#include "train/optim.h"

namespace {

struct Stats {
  double median_ms, min_ms, max_ms;
};

Stats time_calls(const std::function<void()>& f, const torch::Device& device, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) f();
  hp::core::synchronize(device);
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i)
    ms.push_back(1e3 * hp::bench::seconds_of([&] {
      f();
      hp::core::synchronize(device);
    }));
  return {hp::bench::median(ms), *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end())};
}

hp::core::EncoderInput batch(const hp::core::BertConfig& cfg, long B, long S, const torch::Device& device) {
  hp::core::EncoderInput in;
  const auto o = torch::TensorOptions().dtype(torch::kLong).device(device);
  in.input_ids = torch::randint(1000, cfg.vocab_size, {B, S}, o);
  in.token_type_ids = torch::zeros({B, S}, o);
  in.attention_mask = torch::ones({B, S}, o);
  in.cls_only = true;  // what training (without layer distillation) and evaluation compute
  return in;
}

void print(const char* model, const std::string& what, long B, long S, const Stats& s, int steps) {
  std::printf("row %s %s b%ldx%ld: %.3f ms median (min %.3f, max %.3f) of %d\n", model, what.c_str(), B, S,
              s.median_ms, s.min_ms, s.max_ms, steps);
  std::fflush(stdout);
}

// The training step's model, optimiser and fixed batch of one shape.
struct StepSetup {
  hp::core::Bert model;
  std::unique_ptr<hp::train::Optimizer> opt;
  hp::core::EncoderInput in;
  torch::Tensor labels;

  StepSetup(const hp::core::BertConfig& cfg, const torch::Device& device, long B, long S, long total_steps)
      : model(hp::bench::random_bert(cfg).to(device)) {
    model.set_training(true);
    for (auto& [key, p] : model.mutable_parameters()) p.requires_grad_(true);
    opt = std::make_unique<hp::train::Optimizer>(hp::core::TrainConfig{}, model.parameters(),
                                                 std::vector<torch::Tensor>{}, 0, total_steps);
    in = batch(cfg, B, S, device);
    labels = torch::randint(0, 2, {B}, torch::TensorOptions().dtype(torch::kLong).device(device));
  }
  // Forward (bf16 autocast or fp32), cross-entropy on the [CLS] logits, backward, clipping and AdamW.
  void forward_backward_step(bool bf16) {
    torch::Tensor logits;
    {
      const hp::core::Bf16Autocast autocast(bf16, model.device());
      logits = model.forward(in).logits.to(torch::kFloat);
    }
    torch::cross_entropy_loss(logits, labels).backward();
    opt->step();
  }
};

void train_rows(const char* name, const hp::core::BertConfig& cfg, const torch::Device& device, int warmup, int steps,
                bool bf16) {
  for (long S : {128L, 64L}) {
    const long B = 32;
    StepSetup st(cfg, device, B, S, warmup + steps);
    long step = 0;
    const auto s = time_calls(
        [&] {
          st.opt->set_step(step++);
          st.opt->zero_grad();
          st.forward_backward_step(bf16);
        },
        device, warmup, steps);
    print(name, bf16 ? "headprune-train-bf16" : "headprune-train-fp32", B, S, s, steps);
  }
}

// The same step captured once as a CUDA graph (train/captured_step.h) after eager warm-up steps, and replayed: the
// batch and labels stay in their tensors, the lr is set before each replay (Optimizer's device lr). Only the
// benchmark captures: `prune train` runs the step eagerly. A capture that fails prints why.
void graph_rows(const char* name, const hp::core::BertConfig& cfg, const torch::Device& device, int warmup, int steps) {
  if (!hp::train::CapturedStep::available()) {
    std::printf("graph rows: skipped (LibTorch without CUDA)\n");
    return;
  }
  for (long S : {128L, 64L}) {
    const long B = 32;
    try {
      StepSetup st(cfg, device, B, S, warmup + steps + 3);
      long step = 0;
      hp::train::CapturedStep graph(
          [&] {
            st.opt->set_step(step++);
            st.opt->zero_grad();
            st.forward_backward_step(true);
          },
          [&] {
            st.opt->set_step(step);
            st.opt->zero_grad();
          },
          device);
      const auto s = time_calls(
          [&] {
            st.opt->set_step(step++);
            graph.replay();
          },
          device, warmup, steps);
      print(name, "headprune-train-bf16-graph", B, S, s, steps);
    } catch (const std::exception& e) {
      std::printf("row %s headprune-train-bf16-graph b%ldx%ld: capture failed: %s\n", name, B, S,
                  std::string(e.what()).substr(0, 300).c_str());
      std::fflush(stdout);
    }
  }
}

void forward_rows(const char* name, const hp::core::BertConfig& cfg, const torch::Device& device, int warmup,
                  int steps) {
  auto model = hp::bench::random_bert(cfg).to(device);
  torch::NoGradGuard no_grad;
  for (bool bf16 : {false, true})
    for (long B : {32L, 1L}) {
      const auto in = batch(cfg, B, 128, device);
      const auto forward = [&] {
        const hp::core::Bf16Autocast autocast(bf16, device);
        model.forward(in);
      };
      const std::string row = bf16 ? "headprune-forward-bf16" : "headprune-forward-fp32";
      print(name, row, B, 128, time_calls(forward, device, warmup, steps), steps);
      // The same forward as a captured CUDA graph (train/captured_step.h), replayed on the same input.
      if (device.is_cpu() || !hp::train::CapturedStep::available()) continue;
      try {
        hp::train::CapturedStep graph(forward, {}, device);
        print(name, row + "-graph", B, 128, time_calls([&] { graph.replay(); }, device, warmup, steps), steps);
      } catch (const std::exception& e) {
        std::printf("row %s %s-graph b%ldx128: capture failed: %s\n", name, row.c_str(), B,
                    std::string(e.what()).substr(0, 300).c_str());
      }
    }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string device_spec = "cuda", models = "minilm,base";
    int warmup = 5, steps = 20, threads = 0;
    bool fp32_train = false;
    CLI::App app{"gpu_step_bench: a training step and a forward of headprune's model on a device"};
    app.add_option("--device", device_spec, "cpu, cuda or cuda:N");
    app.add_option("--models", models, "minilm, base or both (comma-separated)");
    app.add_option("--warmup", warmup, "untimed calls first");
    app.add_option("--steps", steps, "timed calls (the median is reported)");
    app.add_option("--threads", threads, "CPU threads; 0 = all cores");
    app.add_flag("--fp32-train", fp32_train, "also time the training step in fp32");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(threads);
    const torch::Device device = hp::core::parse_device(device_spec);
    std::printf("runtime: %s\n%s\n", hp::core::runtime_summary().c_str(), hp::core::gpu_summary().c_str());
    for (const char* name : {"minilm", "base"}) {
      if (models.find(name) == std::string::npos) continue;
      const auto cfg = std::string(name) == "minilm" ? hp::bench::minilm_config() : hp::bench::bert_base_config();
      train_rows(name, cfg, device, warmup, steps, true);
      if (!device.is_cpu()) graph_rows(name, cfg, device, warmup, steps);
      if (fp32_train) train_rows(name, cfg, device, warmup, steps, false);
      forward_rows(name, cfg, device, warmup, steps);
    }
    return 0;
  } catch (const hp::Error& e) {
    std::fprintf(stderr, "gpu_step_bench: error: %s\n", e.what());
    return 1;
  }
}
