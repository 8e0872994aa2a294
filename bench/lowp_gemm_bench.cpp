// The inference linears at fp32, bf16 and int8 (core/kernels/lowp_gemm.h) as the model runs them, per shape:
// GFLOP/s (GOP/s for int8: 2 per multiply-add) of the whole product (int8: with the per-row quantisation of
// the activations and the conversion back to float32) and of the raw oneDNN GEMM alone, at M = B·S rows of
// MiniLM's and BERT-base's shapes. In interleaved rounds, medians; the same machine state for every row.
// With --peak, first the CPU's own limits (core/kernels/peak.h): each product instruction in a loop on registers, on
// every thread, the rates the rows are read against.
// Run: ./build/bench/lowp_gemm_bench [--rounds 7] [--threads 0] [--rows 4096,128] [--peak [--peak-seconds 1]]
#include <CLI/CLI.hpp>
#include <oneapi/dnnl/dnnl.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/kernels/blas.h"
#include "core/kernels/lowp_gemm.h"
#include "core/kernels/peak.h"
#include "core/kernels/runtime.h"

namespace {

using hp::core::PackedLinear;
using hp::core::Precision;

double seconds(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Row {
  std::string name;
  double flops;
  std::function<void()> run;
  std::vector<double> times;
};

}  // namespace

int main(int argc, char** argv) {
  hp::core::ensure_fast_blas(argc, argv);
  CLI::App app("bf16 and int8 inference linears against fp32, per shape");
  int rounds = 7, threads = 0;
  std::vector<int> rows = {4096, 128};
  app.add_option("--rounds", rounds, "interleaved rounds (median)");
  app.add_option("--threads", threads, "threads; 0 = all cores");
  app.add_option("--rows", rows, "M = batch x sequence");
  std::vector<std::string> shape_args;
  app.add_option("--shapes", shape_args, "N:K pairs to time instead of MiniLM's and BERT-base's, e.g. 960:384 384:1315");
  bool peak = false;
  double peak_seconds = 1;
  app.add_flag("--peak", peak, "first the peak rate of each product instruction on every thread");
  app.add_option("--peak-seconds", peak_seconds, "how long each instruction's loop runs");
  CLI11_PARSE(app, argc, argv);
  hp::core::set_threads(threads);
  std::printf("%s\n", hp::core::runtime_summary().c_str());
  if (peak) {
    const int n = torch::get_num_threads();
    for (const auto op : {hp::core::PeakOp::kFp32Fma, hp::core::PeakOp::kBf16Dot, hp::core::PeakOp::kInt8Dot})
      if (hp::core::peak_op_usable(op))
        std::printf("peak %-36s %8.1f G/s on %d threads\n", hp::core::peak_op_name(op),
                    hp::core::peak_gops(op, n, peak_seconds), n);
      else std::printf("peak %-36s not on this CPU under HEADPRUNE_MAX_ISA\n", hp::core::peak_op_name(op));
  }
  torch::manual_seed(0);
  // (N, K): MiniLM's fused QKV, FFN in, FFN out; BERT-base's FFN in and out.
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1152, 384}, {1536, 384}, {384, 1536}, {3072, 768}, {768, 3072}};
  if (!shape_args.empty()) {
    shapes.clear();
    for (const auto& a : shape_args) {
      const auto colon = a.find(':');
      if (colon == std::string::npos) throw CLI::ValidationError("--shapes", a + ": give N:K, e.g. 960:384");
      shapes.emplace_back(std::stoll(a.substr(0, colon)), std::stoll(a.substr(colon + 1)));
    }
  }
  std::vector<Row> table;
  std::vector<torch::Tensor> keep;  // inputs, outputs and buffers alive for the whole run
  for (int M : rows)
    for (auto [N, K] : shapes) {
      const auto x = torch::randn({M, K}), w = torch::randn({N, K}) * 0.05;
      auto out = torch::empty({M, N});
      keep.insert(keep.end(), {x, w, out});
      const std::string shape = "[" + std::to_string(M) + "x" + std::to_string(K) + "]x[" + std::to_string(K) + "x" +
                                std::to_string(N) + "]";
      const double flops = 2.0 * M * N * K;
      for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kInt8}) {
        auto packed = std::make_shared<PackedLinear>(PackedLinear::pack(w, p));
        table.push_back({shape + " " + hp::core::precision_name(p) + " linear", flops,
                         [packed, x, out]() mutable { packed->apply(out, x, false); }, {}});
      }
      // int8 calibrated (SmoothQuant factors): the activations' extra product per element.
      auto smoothed =
          std::make_shared<PackedLinear>(PackedLinear::pack(w, Precision::kInt8, torch::rand({K}) + 0.5));
      table.push_back({shape + " int8 smoothed linear", flops,
                       [smoothed, x, out]() mutable { smoothed->apply(out, x, false); }, {}});
      // The raw int8 GEMM, operands already quantised: what the product would cost without the conversions.
      auto a = torch::randint(0, 255, {M, K}, torch::kUInt8), b = torch::randint(-127, 127, {N, K}, torch::kInt8);
      auto c = torch::empty({M, N}, torch::kInt);
      keep.insert(keep.end(), {a, b, c});
      table.push_back({shape + " int8 GEMM only", flops, [=]() {
                         const int32_t co = 0;
                         dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.0f, a.data_ptr<uint8_t>(), K, 0,
                                           b.data_ptr<int8_t>(), K, 0, 0.0f, c.data_ptr<int32_t>(), N, &co);
                       }, {}});
    }
  for (auto& r : table) r.run();  // warm-up: oneDNN's kernels are generated on first use
  for (int round = 0; round < rounds; ++round)
    for (auto& r : table) r.times.push_back(seconds(r.run));
  for (auto& r : table) {
    std::sort(r.times.begin(), r.times.end());
    const double t = r.times[r.times.size() / 2];
    std::printf("%-44s %9.3f ms  %7.1f G(FL)OP/s\n", r.name.c_str(), t * 1e3, r.flops / t / 1e9);
  }
  return 0;
}
