// Where an exported model's forward spends its time at one precision, and what int8 attention products could
// gain (#42): in interleaved rounds, (a) the whole forward of the model at --precision, (b) its attention cores
// alone (QKᵀ, softmax, AV of every layer at that layer's head count: core/model/attention.h, the kernel the
// forward runs), and (c) per (example, head) pair the two attention products as headprune's int8 GEMM computes a
// linear (PackedLinear: K and Vᵀ quantised per row as the weight, Q and the probabilities per row as the
// activation, int32 accumulation), against the same products through PackedLinear at fp32 (sampled over one layer's
// pairs). Prints the attention share f = b / a, the products' int8 / fp32 ratio r on this CPU, and the bound on the
// forward if the attention cores ran r times faster: 1 / (1 − f + f / r) (softmax and the quantisation of its
// output counted as free: optimistic). With AVX512_BF16 also (a) and (b) with the bf16 attention products
// (core/kernels/attention_bf16.cpp), (a) and (b) above being then the float32 kernel's. Not a test.
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
#include "core/kernels/attention_kernel.h"
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

// (b): every layer's attention core at its head count, on q, k, v laid out as the forward makes them (views of one
// [B, S, 3, H, Dh] product). `pairs_total` gets the model's (example, head) pairs.
std::function<void()> attention_cores(const hp::core::BertConfig& c, long B, long S, long* pairs_total, bool bf16) {
  std::vector<std::vector<torch::Tensor>> qkv;
  *pairs_total = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const long H = c.heads_in_layer(l);
    *pairs_total += B * H;
    if (H == 0) continue;
    const auto t = torch::randn({B, S, 3, H, c.head_dim()});
    qkv.push_back({t.select(2, 0).transpose(1, 2), t.select(2, 1).transpose(1, 2), t.select(2, 2).transpose(1, 2)});
  }
  const auto ext = torch::zeros({B, 1, 1, S});
  return [qkv, ext, bf16] {
    torch::NoGradGuard no_grad;
    for (const auto& l : qkv) hp::core::attention_no_grad(l[0], l[1], l[2], ext, false, bf16);
  };
}

// (c): `n` (example, head) pairs, QKᵀ [S, Dh]·[S, Dh]ᵀ and P·V [S, S]·[Dh, S]ᵀ through PackedLinear at `p`, the
// right-hand operand packed (quantised) inside the timing, as a per-forward scheme must.
std::function<void()> pair_products(int n, long S, long Dh, hp::core::Precision p) {
  std::vector<torch::Tensor> qs, ks, ps, vts;
  for (int i = 0; i < n; ++i) {
    qs.push_back(torch::randn({S, Dh}));
    ks.push_back(torch::randn({S, Dh}));
    ps.push_back(torch::softmax(torch::randn({S, S}), -1));
    vts.push_back(torch::randn({Dh, S}));
  }
  return [=] {
    torch::NoGradGuard no_grad;
    for (int i = 0; i < n; ++i) {
      auto scores = torch::empty({S, S});
      hp::core::PackedLinear::pack(ks[i], p).apply(scores, qs[i], false);
      auto ctx = torch::empty({S, Dh});
      hp::core::PackedLinear::pack(vts[i], p).apply(ctx, ps[i], false);
    }
  };
}

// Medians in ms of the forward, the cores and the products scaled to the model's pairs.
struct Result {
  double forward, cores, fp32, int8;
  double forward_bf16, cores_bf16;  // the forward and the cores with bf16 attention products (AVX512_BF16)
};

void print_report(const Options& o, const hp::core::BertConfig& c, long pairs_total, const Result& t) {
  std::printf("model %s: %d layers, %ld (example, head) pairs at B=%d S=%d, linears at %s, ISA %s\n", o.model.c_str(),
              c.num_hidden_layers, pairs_total, o.batch, o.seq, o.precision.c_str(), hp::core::isa::summary().c_str());
  std::printf("forward: %.1f ms (median of %d)\n", t.forward, o.reps);
  std::printf("attention cores (QK^T, softmax, AV; the forward's kernel): %.1f ms = %.1f%% of the forward\n", t.cores,
              100 * t.cores / t.forward);
  std::printf("attention products through PackedLinear, scaled from %d pairs: fp32 %.1f ms, int8 %.1f ms: int8 x%.2f\n",
              o.pairs, t.fp32, t.int8, t.fp32 / t.int8);
  if (hp::core::bf16_attention_available())
    std::printf("bf16 attention products (vdpbf16ps): cores %.1f ms (x%.2f), forward %.1f ms (x%.3f)%s\n", t.cores_bf16,
                t.cores / t.cores_bf16, t.forward_bf16, t.forward / t.forward_bf16,
                o.precision == "fp32" ? " (an fp32 model keeps float32 attention: the same kernel)" : "");
  else std::printf("bf16 attention products: not on this CPU or under this cap (no AVX512_BF16): the float32 kernel\n");
  const double f = t.cores / t.forward, r = t.fp32 / t.int8, need = 1 - 1 / 1.15;
  std::printf("bound: the attention cores x%.2f faster (the products' int8 gain applied to the whole core) -> "
              "forward x%.3f; forward x1.15 needs the cores x%s faster\n",
              r, 1 / (1 - f + f / r),
              f > need ? hp::core::format_number("%.2f", f / (f - need)).c_str() : "inf (share too small)");
}

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
    o.pairs = std::max(1, o.pairs);
    hp::core::set_threads(o.threads);
    std::printf("runtime: %s\n", hp::core::runtime_summary().c_str());
    hp::core::LoadOptions load;
    load.num_labels = 2;
    hp::core::Bert model = hp::core::load_bert(o.model, load);
    model.set_precision(hp::core::precision_setting(o.precision));
    const auto& c = model.config();
    torch::manual_seed(0);
    hp::core::EncoderInput in;
    in.input_ids = torch::randint(1000, c.vocab_size, {o.batch, o.seq}, torch::kLong);
    in.attention_mask = torch::ones({o.batch, o.seq}, torch::kLong);
    long pairs_total = 0;
    auto forward = [&](bool bf16) {
      return [&, bf16] {
        torch::NoGradGuard no_grad;
        hp::core::set_bf16_attention_enabled(bf16);
        model.forward(in);
        hp::core::set_bf16_attention_enabled(true);
      };
    };
    std::vector<std::function<void()>> items = {forward(false),
                                                attention_cores(c, o.batch, o.seq, &pairs_total, false),
                                                pair_products(o.pairs, o.seq, c.head_dim(), hp::core::Precision::kFp32),
                                                pair_products(o.pairs, o.seq, c.head_dim(), hp::core::Precision::kInt8),
                                                forward(true),
                                                attention_cores(c, o.batch, o.seq, &pairs_total, true)};
    std::vector<std::vector<double>> times(items.size());
    for (auto& run : items) run();  // warm-up
    for (int r = 0; r < o.reps; ++r)  // interleaved rounds
      for (size_t i = 0; i < items.size(); ++i) times[i].push_back(seconds_of(items[i]));
    const double scale = 1e3 * static_cast<double>(pairs_total) / o.pairs;  // (c) per pair → the model's pairs, ms
    print_report(o, c, pairs_total,
                 {1e3 * median(times[0]), 1e3 * median(times[1]), median(times[2]) * scale, median(times[3]) * scale,
                  1e3 * median(times[4]), 1e3 * median(times[5])});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
