// Forward-pass throughput: (a) the measured fp32 matmul peak at BERT-base GEMM shapes, (b) the BERT
// forward (random BERT-base weights, and the real model folder if present) in GFLOP/s and as a share of
// that peak, (c) a per-op breakdown of one layer. Python reference: bench/forward_bench.py. Not a test.
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/bert.h"
#include "core/bert_keys.h"
#include "core/blas.h"
#include "core/checkpoint.h"
#include "core/errors.h"  // Error
#include "eval/flops.h"

namespace {

using Clock = std::chrono::steady_clock;

// Median seconds of `reps` calls of `f` after `warmup` untimed calls.
double median_seconds(const std::function<void()>& f, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Options {
  int warmup = 1;
  int reps = 5;
  int batch = 32;
  int seq = 128;
  int threads = 0;
  std::string model = "checkpoints/all-MiniLM-L6-v2";
  bool skip_base = false;
  bool profile = true;
};

// GEMM shapes [M, K] x [K, N] of BERT-base at B×S = M tokens: Q/K/V/O, FFN in, FFN out.
double matmul_peak(const Options& o) {
  const long M = static_cast<long>(o.batch) * o.seq;
  const std::vector<std::pair<long, long>> kn = {{768, 768}, {768, 3072}, {3072, 768}, {768, 2304}};
  double peak = 0;
  for (auto [K, N] : kn) {
    auto a = torch::randn({M, K}), b = torch::randn({K, N});
    auto t = median_seconds([&] { torch::mm(a, b); }, o.warmup + 1, o.reps);
    double gflops = 2.0 * M * K * N / t / 1e9;
    peak = std::max(peak, gflops);
    std::printf("matmul [%ld,%ld]x[%ld,%ld]: %.4f s, %.1f GFLOP/s\n", M, K, K, N, t, gflops);
    // The same product as torch::linear computes it (weight [N, K] transposed, bias added).
    auto w = torch::randn({N, K}), bias = torch::randn({N});
    t = median_seconds([&] { torch::addmm(bias, a, w.t()); }, o.warmup, o.reps);
    std::printf("addmm  [%ld,%ld]x[%ld,%ld]^T+b: %.4f s, %.1f GFLOP/s\n", M, K, N, K, t, 2.0 * M * K * N / t / 1e9);
  }
  std::printf("matmul peak: %.1f GFLOP/s\n", peak);
  return peak;
}

hp::core::BertConfig bert_base_config() {
  hp::core::BertConfig cfg;
  cfg.vocab_size = 30522;
  cfg.hidden_size = 768;
  cfg.num_hidden_layers = 12;
  cfg.num_attention_heads = 12;
  cfg.intermediate_size = 3072;
  cfg.num_labels = 2;
  return cfg;
}

// Random weights under the HF names: normal × 0.02, LayerNorm weight 1 and bias 0 (HF's init).
hp::core::Bert random_bert(const hp::core::BertConfig& cfg) {
  torch::manual_seed(0);
  std::map<std::string, torch::Tensor> params;
  for (const auto& spec : hp::core::bert_key_table()) {
    for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l) {
      std::string key = hp::core::hf_key(spec, l);
      auto shape = hp::core::key_shape(spec, cfg, l);
      bool ln = key.find("LayerNorm") != std::string::npos;
      bool weight = key.size() >= 6 && key.compare(key.size() - 6, 6, "weight") == 0;
      params[key] = ln ? (weight ? torch::ones(shape) : torch::zeros(shape)) : torch::randn(shape) * 0.02;
    }
  }
  return hp::core::Bert(cfg, std::move(params));
}

hp::core::EncoderInput random_input(const hp::core::BertConfig& cfg, long B, long S) {
  hp::core::EncoderInput in;
  in.input_ids = torch::randint(1000, cfg.vocab_size, {B, S}, torch::kLong);
  in.token_type_ids = torch::zeros({B, S}, torch::kLong);
  in.attention_mask = torch::ones({B, S}, torch::kLong);
  return in;
}

void bench_forward(const std::string& label, const hp::core::Bert& model, const Options& o, double peak) {
  torch::NoGradGuard no_grad;
  auto in = random_input(model.config(), o.batch, o.seq);
  double t = median_seconds([&] { model.forward(in); }, o.warmup, o.reps);
  double flops = hp::eval::forward_flops(model.config(), o.batch, o.seq);
  double gflops = flops / t / 1e9;
  std::printf("forward %s B=%d S=%d: %.3f s, %.1f GFLOP/s, %.0f%% of matmul peak (%.1f GFLOP per forward)\n",
              label.c_str(), o.batch, o.seq, t, gflops, 100.0 * gflops / peak, flops / 1e9);
}

// Where one layer's time goes: each op of core/bert.cpp's layer_forward timed alone on its real inputs.
void profile_layer(const hp::core::BertConfig& cfg, const Options& o) {
  torch::NoGradGuard no_grad;
  const long B = o.batch, S = o.seq, D = cfg.hidden_size, H = cfg.num_attention_heads, Dh = D / H,
             I = cfg.intermediate_size;
  auto x = torch::randn({B, S, D});
  auto w = torch::randn({D, D}) * 0.02, b = torch::zeros({D});
  auto wi = torch::randn({I, D}) * 0.02, bi = torch::zeros({I});
  auto wo = torch::randn({D, I}) * 0.02;
  auto ln_w = torch::ones({D}), ln_b = torch::zeros({D});
  auto ext = torch::zeros({B, 1, 1, S});
  auto q = torch::randn({B, S, D}).view({B, S, H, Dh}).transpose(1, 2);
  auto k = torch::randn({B, S, D}).view({B, S, H, Dh}).transpose(1, 2);
  auto v = torch::randn({B, S, D}).view({B, S, H, Dh}).transpose(1, 2);
  auto scores = torch::matmul(q, k.transpose(-1, -2));
  auto probs = torch::softmax(scores, -1);
  auto ctx = torch::matmul(probs, v);
  auto inter = torch::randn({B, S, I});
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  struct Op {
    const char* name;
    int per_layer;  // how many times layer_forward runs it
    std::function<void()> f;
  };
  std::vector<Op> ops = {
      {"linear D->D (Q,K,V,O)", 4, [&] { torch::linear(x, w, b); }},
      {"linear D->I (FFN in)", 1, [&] { torch::linear(x, wi, bi); }},
      {"linear I->D (FFN out)", 1, [&] { torch::linear(inter, wo, b); }},
      {"matmul q.k^T (scores)", 1, [&] { torch::matmul(q, k.transpose(-1, -2)); }},
      {"scores / sqrt(Dh)", 1, [&] { scores / std::sqrt(static_cast<double>(Dh)); }},
      {"softmax(scores + mask)", 1, [&] { torch::softmax(scores + ext, -1); }},
      {"matmul probs.v (context)", 1, [&] { torch::matmul(probs, v); }},
      {"ctx transpose+reshape", 1, [&] { ctx.transpose(1, 2).reshape({B, S, D}); }},
      {"layer_norm(a + b)", 2, [&] { torch::layer_norm(x + x, {D}, ln_w, ln_b, 1e-12); }},
      {"gelu [B,S,I]", 1, [&] { torch::gelu(inter); }},
      {"q/k/v head view (x3)", 0, [&] { x.view({B, S, H, Dh}).transpose(1, 2); }},
      {"alt: baddbmm scores, scale folded", 1,
       [&] {
         torch::baddbmm(ext.expand({B, H, S, S}).reshape({B * H, S, S}), q.reshape({B * H, S, Dh}),
                        k.reshape({B * H, S, Dh}).transpose(1, 2), 1.0, scale);
       }},
      {"alt: _softmax in place of softmax", 1, [&] { at::_softmax(scores, -1, false); }},
  };
  double total = 0;
  std::vector<double> times;
  for (const auto& op : ops) {
    double t = median_seconds(op.f, o.warmup, o.reps);
    times.push_back(t);
    if (std::string(op.name).rfind("alt:", 0) != 0) total += t * op.per_layer;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    bool alt = std::string(ops[i].name).rfind("alt:", 0) == 0;
    std::printf("profile layer B=%ld S=%ld %-34s %8.2f ms x%d", B, S, ops[i].name, times[i] * 1e3, ops[i].per_layer);
    if (!alt) std::printf("  %5.1f%% of layer", 100.0 * times[i] * ops[i].per_layer / total);
    std::printf("\n");
  }
  std::printf("profile layer B=%ld S=%ld sum of ops: %.2f ms per layer\n", B, S, total * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    hp::core::ensure_fast_blas(argc, argv);
    Options o;
    CLI::App app{"forward_bench: matmul peak and BERT forward GFLOP/s"};
    app.add_option("--warmup", o.warmup, "untimed runs before timing");
    app.add_option("--reps", o.reps, "timed runs (the median is reported)");
    app.add_option("--batch", o.batch, "batch size B");
    app.add_option("--seq", o.seq, "sequence length S");
    app.add_option("--threads", o.threads, "intra-op threads; 0 = all cores");
    app.add_option("--model", o.model, "a real model folder to time as well (skipped if absent)");
    app.add_flag("--skip-base", o.skip_base, "skip the random BERT-base forward");
    app.add_flag("!--no-profile", o.profile, "skip the per-op profile of one layer");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(o.threads);
    std::printf("runtime: %s\n", hp::core::runtime_summary().c_str());

    double peak = matmul_peak(o);
    auto base_cfg = bert_base_config();
    if (!o.skip_base) bench_forward("bert-base", random_bert(base_cfg), o, peak);
    if (!o.model.empty() && std::filesystem::exists(o.model + "/config.json")) {
      hp::core::LoadOptions load;
      load.num_labels = 2;
      auto model = hp::core::load_bert(o.model, load);
      bench_forward(std::filesystem::path(o.model).filename().string(), model, o, peak);
    } else {
      std::printf("forward %s: skipped (no config.json)\n", o.model.c_str());
    }
    if (o.profile) profile_layer(base_cfg, o);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
