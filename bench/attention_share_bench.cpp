// Where an exported model's forward spends its time at one precision, and what int8 attention products could
// gain (#42): in interleaved rounds, (a) the whole forward of the model at --precision, (b) its attention cores
// alone (QKᵀ, softmax, AV of every layer at that layer's head count: core/model/attention.h, the kernel the
// forward runs), and (c) per (example, head) pair the two attention products as headprune's int8 GEMM computes a
// linear (PackedLinear: K and Vᵀ quantised per row as the weight, Q and the probabilities per row as the
// activation, int32 accumulation), against the same products through PackedLinear at fp32 (sampled over one layer's
// pairs). Prints the attention share f = b / a, the products' int8 / fp32 ratio r on this CPU, and the bound on the
// forward if the attention cores ran r times faster: 1 / (1 − f + f / r) (softmax and the quantisation of its
// output counted as free: optimistic). Not a test.
#include <CLI/CLI.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/base/strings.h"
#include "core/io/checkpoint.h"
#include "core/kernels/blas.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "core/kernels/runtime.h"
#include "core/model/attention.h"
#include "core/model/bert.h"
#include "timing.h"

namespace {

using hp::bench::median;
using hp::bench::seconds_of;

struct Options {
  std::string model = "runs/frontier_sst2/budget_recover/2/best";
  std::string precision = "int8";
  int batch = 32, seq = 128, reps = 7, threads = 0, pairs = 64;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    hp::core::ensure_fast_blas(argc, argv);
    Options o;
    CLI::App app{"attention_share_bench: the attention cores' share of a forward, and int8 attention products"};
    app.add_option("--model", o.model, "the model folder (an export, e.g. a 50%-FLOPs one)");
    app.add_option("--precision", o.precision, "fp32, bf16 or int8: the linears' precision in (a)");
    app.add_option("--batch", o.batch, "batch size B");
    app.add_option("--seq", o.seq, "sequence length S");
    app.add_option("--reps", o.reps, "timed rounds (medians are reported)");
    app.add_option("--threads", o.threads, "intra-op threads; 0 = all cores");
    app.add_option("--pairs", o.pairs, "(example, head) pairs timed in (c), scaled to the model's count");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(o.threads);
    std::printf("runtime: %s\n", hp::core::runtime_summary().c_str());
    hp::core::LoadOptions load;
    load.num_labels = 2;
    hp::core::Bert model = hp::core::load_bert(o.model, load);
    model.set_precision(hp::core::precision_setting(o.precision));
    const auto& c = model.config();
    const long B = o.batch, S = o.seq, Dh = c.head_dim();
    torch::manual_seed(0);
    hp::core::EncoderInput in;
    in.input_ids = torch::randint(1000, c.vocab_size, {B, S}, torch::kLong);
    in.attention_mask = torch::ones({B, S}, torch::kLong);
    const auto ext = torch::zeros({B, 1, 1, S});
    // Per layer, q, k, v as the forward makes them: views of one [B, S, 3, H, Dh] product.
    std::vector<std::vector<torch::Tensor>> qkv;
    long pairs_total = 0;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      const long H = c.heads_in_layer(l);
      pairs_total += B * H;
      if (H == 0) continue;
      const auto t = torch::randn({B, S, 3, H, Dh});
      qkv.push_back({t.select(2, 0).transpose(1, 2), t.select(2, 1).transpose(1, 2), t.select(2, 2).transpose(1, 2)});
    }
    // (c): `pairs` (example, head) pairs: QKᵀ [S, Dh]·[S, Dh]ᵀ and P·V [S, S]·[Dh, S]ᵀ through PackedLinear, the
    // right-hand operand packed (quantised) inside the timing, as a per-forward scheme must.
    const int n = std::max(1, o.pairs);
    std::vector<torch::Tensor> qs, ks, ps, vts;
    for (int i = 0; i < n; ++i) {
      qs.push_back(torch::randn({S, Dh}));
      ks.push_back(torch::randn({S, Dh}));
      ps.push_back(torch::softmax(torch::randn({S, S}), -1));
      vts.push_back(torch::randn({Dh, S}));
    }
    auto products = [&](hp::core::Precision p) {
      return [&, p] {
        torch::NoGradGuard no_grad;
        for (int i = 0; i < n; ++i) {
          auto scores = torch::empty({S, S});
          hp::core::PackedLinear::pack(ks[i], p).apply(scores, qs[i], false);
          auto ctx = torch::empty({S, Dh});
          hp::core::PackedLinear::pack(vts[i], p).apply(ctx, ps[i], false);
        }
      };
    };
    struct Item {
      const char* label;
      std::function<void()> run;
      std::vector<double> times;
    };
    std::vector<Item> items = {
        {"forward", [&] {
           torch::NoGradGuard no_grad;
           model.forward(in);
         }, {}},
        {"attention cores", [&] {
           torch::NoGradGuard no_grad;
           for (const auto& l : qkv) hp::core::attention_no_grad(l[0], l[1], l[2], ext, false);
         }, {}},
        {"products fp32 (PackedLinear)", products(hp::core::Precision::kFp32), {}},
        {"products int8 (PackedLinear, packing included)", products(hp::core::Precision::kInt8), {}},
    };
    for (auto& it : items) it.run();  // warm-up
    for (int r = 0; r < o.reps; ++r)
      for (auto& it : items) it.times.push_back(seconds_of(it.run));
    const double fwd = median(items[0].times), att = median(items[1].times);
    const double scale = static_cast<double>(pairs_total) / n;  // (c) per pair → the model's pairs
    const double p32 = median(items[2].times) * scale, p8 = median(items[3].times) * scale;
    std::printf("model %s: %d layers, %ld (example, head) pairs at B=%ld S=%ld, linears at %s, ISA %s\n",
                o.model.c_str(), c.num_hidden_layers, pairs_total, B, S, o.precision.c_str(),
                hp::core::isa::summary().c_str());
    std::printf("forward: %.1f ms (median of %d)\n", 1e3 * fwd, o.reps);
    std::printf("attention cores (QK^T, softmax, AV; the forward's kernel): %.1f ms = %.1f%% of the forward\n", 1e3 * att,
                100 * att / fwd);
    std::printf("attention products through PackedLinear, scaled from %d pairs: fp32 %.1f ms, int8 %.1f ms: int8 x%.2f\n",
                n, 1e3 * p32, 1e3 * p8, p32 / p8);
    const double f = att / fwd, r = p32 / p8;
    std::printf("bound: the attention cores x%.2f faster (the products' int8 gain applied to the whole core) -> "
                "forward x%.3f; forward x1.15 needs the cores x%s faster\n",
                r, 1 / (1 - f + f / r), f > 1 - 1 / 1.15 ? hp::core::format_number("%.2f", f / (f - (1 - 1 / 1.15))).c_str()
                                                         : "inf (share too small)");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
