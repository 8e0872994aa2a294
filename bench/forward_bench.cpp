// Forward-pass throughput: (a) the measured fp32 matmul peak at BERT-base GEMM shapes, (b) the BERT
// forward (random BERT-base weights, and the real model folder if present) in GFLOP/s and as a share of
// that peak, (c) a per-op breakdown of one layer. Python reference: bench/forward_bench.py. Not a test.
#include <CLI/CLI.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/attention.h"
#include "core/kernels/attention_kernel.h"
#include "core/model/bert.h"
#include "core/model/bert_keys.h"
#include "core/kernels/blas.h"
#include "core/kernels/dispatch_probe.h"
#include "core/kernels/runtime.h"
#include "core/io/checkpoint.h"
#include "core/base/errors.h"  // Error
#include "core/kernels/epilogue.h"
#include "core/kernels/gemm.h"
#include "eval/flops.h"
#include "random_model.h"
#include "timing.h"

namespace {

using hp::bench::bert_base_config;
using hp::bench::median;
using hp::bench::random_bert;
using hp::bench::seconds_of;

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
  int reps = 7;
  int batch = 32;
  int seq = 128;
  int threads = 0;
  std::string model = "checkpoints/all-MiniLM-L6-v2";
  bool skip_base = false;
  bool profile = true;
  bool blas_forward = false;
  bool aten_epilogues = false;
  bool no_kernels = false;
  std::string precision = "fp32";
};

// One timed thing of a round: a GEMM at a BERT-base shape or a whole forward.
struct Timed {
  std::string label;
  double flops;
  std::function<void()> run;
  bool gemm;  // counts towards the matmul peak
  std::vector<double> times;  // one per round
  double rate(size_t r) const { return flops / times[r] / 1e9; }
};

// Interleaved rounds: every round times each GEMM shape once and each forward once, so the peak and
// the forward see the same machine state (this VM's GEMM rate drifts by ±20% between minutes).
void run_rounds(std::vector<Timed>& items, const Options& o) {
  for (int w = 0; w < o.warmup; ++w)
    for (auto& it : items) it.run();
  for (int r = 0; r < o.reps; ++r)
    for (auto& it : items) it.times.push_back(seconds_of(it.run));
}

// GEMM shapes [M, K] x [K, N] of BERT-base at B×S = M tokens: Q/K/V/O, FFN in, FFN out, fused QKV —
// as torch::mm and as torch::linear computes them (weight [N, K] transposed, bias added).
void add_gemms(std::vector<Timed>& items, const Options& o) {
  const long M = static_cast<long>(o.batch) * o.seq;
  const std::vector<std::pair<long, long>> kn = {{768, 768}, {768, 3072}, {3072, 768}, {768, 2304}};
  for (auto [K, N] : kn) {
    auto a = torch::randn({M, K}), b = torch::randn({K, N});
    auto w = torch::randn({N, K}), bias = torch::randn({N});
    const double flops = 2.0 * M * K * N;
    char label[96];
    std::snprintf(label, sizeof label, "matmul [%ld,%ld]x[%ld,%ld]", M, K, K, N);
    items.push_back({label, flops, [a, b] { torch::mm(a, b); }, true, {}});
    std::snprintf(label, sizeof label, "addmm  [%ld,%ld]x[%ld,%ld]^T+b", M, K, N, K);
    items.push_back({label, flops, [a, w, bias] { torch::addmm(bias, a, w.t()); }, false, {}});
    std::snprintf(label, sizeof label, "oneDNN [%ld,%ld]x[%ld,%ld]^T (+=)", M, K, N, K);
    auto out = std::make_shared<torch::Tensor>(torch::zeros({M, N}));
    items.push_back({label, flops, [a, w, out] { hp::core::accumulate_linear(*out, a, w); }, true, {}});
  }
}

hp::core::EncoderInput random_input(const hp::core::BertConfig& cfg, long B, long S) {
  hp::core::EncoderInput in;
  in.input_ids = torch::randint(1000, cfg.vocab_size, {B, S}, torch::kLong);
  in.token_type_ids = torch::zeros({B, S}, torch::kLong);
  in.attention_mask = torch::ones({B, S}, torch::kLong);
  return in;
}

// The forward as the product runs it, or with pieces switched back to ATen for comparison: kNoKernels is the
// fallback of the scalar path (the BLAS attention loop and ATen's epilogues) with the product's linears.
enum class Variant { kProduct, kBlasLinears, kAtenEpilogues, kNoKernels };

Timed forward_item(const std::string& label, std::shared_ptr<const hp::core::Bert> model, const Options& o,
                   Variant variant = Variant::kProduct) {
  auto in = random_input(model->config(), o.batch, o.seq);
  const double flops = hp::eval::forward_flops(model->config(), o.batch, o.seq);
  const char* suffix = variant == Variant::kBlasLinears     ? " (BLAS linears)"
                       : variant == Variant::kAtenEpilogues ? " (ATen epilogues)"
                       : variant == Variant::kNoKernels     ? " (no kernels: BLAS attention, ATen epilogues)"
                                                            : "";
  char text[160];
  std::snprintf(text, sizeof text, "forward %s%s B=%d S=%d (%.1f GFLOP)", label.c_str(), suffix, o.batch, o.seq,
                flops / 1e9);
  return {text,
          flops,
          [model, in, variant] {
            torch::NoGradGuard no_grad;
            hp::core::set_onednn_gemm_enabled(variant != Variant::kBlasLinears);
            const bool kernels = variant != Variant::kNoKernels;
            hp::core::set_epilogue_kernels_enabled(kernels && variant != Variant::kAtenEpilogues);
            hp::core::set_attention_kernel_enabled(kernels);
            model->forward(in);
            hp::core::set_onednn_gemm_enabled(true);
            hp::core::set_epilogue_kernels_enabled(true);
            hp::core::set_attention_kernel_enabled(true);
          },
          false,
          {}};
}

// Medians over rounds; the peak is the GEMM shape with the best median rate. Each forward is also given
// per round, against that shape's rate in the same round (median over rounds: drift between rounds
// cancels), and for the best round of each (fastest forward against that shape's fastest run). Taking
// the maximum over all shapes within a round instead would pick the luckiest of several noisy samples.
void report(const std::vector<Timed>& items) {
  const Timed* peak_item = nullptr;
  double peak = 0;
  for (const auto& it : items)
    if (it.gemm && it.flops / median(it.times) / 1e9 > peak) {
      peak = it.flops / median(it.times) / 1e9;
      peak_item = &it;
    }
  if (!peak_item) return;
  const double best_peak = peak_item->flops / *std::min_element(peak_item->times.begin(), peak_item->times.end()) / 1e9;
  for (const auto& it : items) {
    const double t = median(it.times), rate = it.flops / t / 1e9;
    if (it.label.rfind("forward", 0) != 0) {
      std::printf("%s: %.4f s, %.1f GFLOP/s\n", it.label.c_str(), t, rate);
      continue;
    }
    std::vector<double> share;
    for (size_t r = 0; r < it.times.size(); ++r) share.push_back(it.rate(r) / peak_item->rate(r));
    const double best = it.flops / *std::min_element(it.times.begin(), it.times.end()) / 1e9;
    std::printf(
        "%s: %.3f s, %.1f GFLOP/s, %.0f%% of matmul peak; per round %.0f%% median (%.0f%%..%.0f%%); "
        "best round %.1f GFLOP/s, %.0f%% of the peak shape's best\n",
        it.label.c_str(), t, rate, 100.0 * rate / peak, 100.0 * median(share),
        100.0 * *std::min_element(share.begin(), share.end()), 100.0 * *std::max_element(share.begin(), share.end()),
        best, 100.0 * best / best_peak);
  }
  std::printf("matmul peak: %.1f GFLOP/s, %s (the best median over the GEMM shapes); its best round %.1f GFLOP/s\n",
              peak, peak_item->label.c_str(), best_peak);
}

// Where one layer's time goes: each op of core/model/bert.cpp's inference path timed alone on inputs of its
// real shape; `alt:` rows are alternatives that lost (not counted in the sum).
void profile_layer(const hp::core::BertConfig& cfg, const Options& o) {
  torch::NoGradGuard no_grad;
  const long B = o.batch, S = o.seq, D = cfg.hidden_size, H = cfg.num_attention_heads, Dh = D / H,
             I = cfg.intermediate_size, M = B * S;
  auto x = torch::randn({B, S, D});
  auto w = torch::randn({D, D}) * 0.02, b = torch::zeros({D});
  auto wi = torch::randn({I, D}) * 0.02, bi = torch::zeros({I});
  auto wo = torch::randn({D, I}) * 0.02;
  auto wqkv = torch::randn({3 * D, D}) * 0.02, bqkv = torch::zeros({3 * D});
  auto ln_w = torch::ones({D}), ln_b = torch::zeros({D});
  auto ext = torch::zeros({B, 1, 1, S});
  auto heads = [&](const torch::Tensor& t) { return t.view({B, S, H, Dh}).transpose(1, 2); };
  auto q = heads(torch::randn({B, S, D})), k = heads(torch::randn({B, S, D})), v = heads(torch::randn({B, S, D}));
  auto ctx = torch::randn({M, D});
  auto inter = torch::randn({M, I});
  auto residual_addmm = [&](const torch::Tensor& a, const torch::Tensor& weight) {
    auto r = x + b;
    auto rows = r.view({M, D});
    hp::core::accumulate_linear(rows, a, weight);
  };
  // The GEMM and the pass after it are timed together, as they run, so each pass sees fresh GEMM output
  // (repeating GELU on its own output drifts into denormals).
  auto out_d = torch::empty({M, D}), out_i = torch::empty({M, I});
  auto x2 = x.view({M, D});
  auto gemm_add_norm = [&](const torch::Tensor& a, const torch::Tensor& weight) {
    hp::core::matmul_nt(out_d, a, weight);
    hp::core::bias_residual_layer_norm_rows(out_d.data_ptr<float>(), D, x2.data_ptr<float>(), D, b.data_ptr<float>(),
                                            ln_w.data_ptr<float>(), ln_b.data_ptr<float>(), M, D, 1e-12f);
  };
  auto aten_add_norm = [&](const torch::Tensor& a, const torch::Tensor& weight) {
    residual_addmm(a, weight);
    torch::layer_norm(x, {D}, ln_w, ln_b, 1e-12);
  };
  struct Op {
    const char* name;
    int per_layer;  // how many times layer_forward runs it
    std::function<void()> f;
  };
  std::vector<Op> ops = {
      {"linear D->D (Q, K, V)", 3, [&] { hp::core::linear_no_grad(x, w, b); }},
      {"attention core (kernel)", 1, [&] { hp::core::attention_no_grad(q, k, v, ext, false); }},
      {"GEMM (O), then bias+residual+LN pass", 1, [&] { gemm_add_norm(ctx, w); }},
      {"GEMM (FFN in), then bias+GELU pass", 1,
       [&] {
         hp::core::matmul_nt(out_i, x2, wi);
         hp::core::bias_activation_rows(out_i.data_ptr<float>(), M, I, I, bi.data_ptr<float>(),
                                        hp::core::EpilogueActivation::kGeluErf);
       }},
      {"GEMM (FFN out), then bias+res+LN pass", 1, [&] { gemm_add_norm(inter, wo); }},
      {"alt: fused QKV linear D->3D", 0, [&] { hp::core::linear_no_grad(x, wqkv, bqkv); }},
      {"alt: linear D->D on ATen's BLAS", 0, [&] { torch::linear(x, w, b); }},
      {"alt: attention, BLAS loop", 0,
       [&] {
         hp::core::set_attention_kernel_enabled(false);
         hp::core::attention_no_grad(q, k, v, ext, false);
         hp::core::set_attention_kernel_enabled(true);
       }},
      {"alt: ATen O: res+bias, GEMM +=, LN", 0, [&] { aten_add_norm(ctx, w); }},
      {"alt: ATen FFN in: bias, GEMM +=, gelu_", 0,
       [&] {
         auto y = hp::core::linear_no_grad(x, wi, bi);
         torch::gelu_(y);
       }},
      {"alt: ATen FFN out: res+bias, GEMM +=, LN", 0, [&] { aten_add_norm(inter, wo); }},
      {"alt: GEMM (FFN in) alone", 0, [&] { hp::core::matmul_nt(out_i, x2, wi); }},
  };
  double total = 0;
  std::vector<double> times;
  for (const auto& op : ops) {
    times.push_back(median_seconds(op.f, o.warmup, o.reps));
    total += times.back() * op.per_layer;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    std::printf("profile layer B=%ld S=%ld %-40s %8.2f ms x%d", B, S, ops[i].name, times[i] * 1e3, ops[i].per_layer);
    if (ops[i].per_layer > 0) std::printf("  %5.1f%% of layer", 100.0 * times[i] * ops[i].per_layer / total);
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
    app.add_option("--warmup", o.warmup, "untimed rounds before timing");
    app.add_option("--reps", o.reps, "timed rounds (medians are reported)");
    app.add_option("--batch", o.batch, "batch size B");
    app.add_option("--seq", o.seq, "sequence length S");
    app.add_option("--threads", o.threads, "intra-op threads; 0 = all cores");
    app.add_option("--model", o.model, "a real model folder to time as well (skipped if absent)");
    app.add_flag("--skip-base", o.skip_base, "skip the random BERT-base forward");
    app.add_flag("!--no-profile", o.profile, "skip the per-op profile of one layer");
    app.add_flag("--blas-forward", o.blas_forward, "also time BERT-base with its linears on ATen's BLAS");
    app.add_flag("--aten-epilogues", o.aten_epilogues,
                 "also time BERT-base with bias, activation, residual and LayerNorm as ATen ops");
    app.add_option("--precision", o.precision, "the forwards' precision: fp32, bf16 or int8 (the GEMMs stay fp32)");
    app.add_flag("--no-kernels", o.no_kernels,
                 "also time each forward without the SIMD attention kernel and epilogues (the BLAS loop and ATen's "
                 "ops, as on the scalar path), in the same interleaved rounds");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(o.threads);
    const auto& dispatch = hp::core::apply_measured_dispatch();  // the attention products prune takes
    std::printf("runtime: %s\n%s\n", hp::core::runtime_summary().c_str(), hp::core::dispatch_summary(dispatch).c_str());

    std::vector<Timed> items;
    add_gemms(items, o);
    auto base_cfg = bert_base_config();
    const hp::core::Precision precision = hp::core::precision_setting(o.precision, "--precision");
    auto at_precision = [&](hp::core::Bert m) {
      m.set_precision(precision);
      return std::make_shared<const hp::core::Bert>(std::move(m));
    };
    if (!o.skip_base) {
      auto base = at_precision(random_bert(base_cfg));
      items.push_back(forward_item("bert-base", base, o));
      if (o.blas_forward) items.push_back(forward_item("bert-base", base, o, Variant::kBlasLinears));
      if (o.aten_epilogues) items.push_back(forward_item("bert-base", base, o, Variant::kAtenEpilogues));
      if (o.no_kernels) items.push_back(forward_item("bert-base", base, o, Variant::kNoKernels));
    }
    if (!o.model.empty() && std::filesystem::exists(o.model + "/config.json")) {
      hp::core::LoadOptions load;
      load.num_labels = 2;
      auto model = at_precision(hp::core::load_bert(o.model, load));
      const std::string name = std::filesystem::path(o.model).filename().string();
      items.push_back(forward_item(name, model, o));
      if (o.no_kernels) items.push_back(forward_item(name, model, o, Variant::kNoKernels));
    } else {
      std::printf("forward %s: skipped (no config.json)\n", o.model.c_str());
    }
    run_rounds(items, o);
    report(items);
    if (o.profile) profile_layer(base_cfg, o);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
