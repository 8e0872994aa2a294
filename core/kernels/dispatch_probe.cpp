// Measured dispatch (see core/kernels/dispatch_probe.h).
#include "core/kernels/dispatch_probe.h"

#include <ATen/Parallel.h>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/base/files.h"
#include "core/base/process.h"  // cache_dir
#include "core/base/strings.h"
#include "core/kernels/attention_kernel.h"
#include "core/kernels/gemm.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "core/kernels/runtime.h"

namespace hp::core {

namespace {

constexpr int kRuns = 3, kWarmup = 1;
// The attention shape: a batch of 2 × 12 heads of BERT-base's 64 dimensions at 128 tokens.
constexpr int kPairs = 24, kSeq = 128, kHeadDim = 64;
// The matmul shape: 4 × 128 tokens through a 768 × 768 projection.
constexpr int kRows = 512, kWidth = 768;

double fastest_ms(const std::function<void()>& run) {
  for (int i = 0; i < kWarmup; ++i) run();
  double best = 0;
  for (int i = 0; i < kRuns; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = i == 0 ? ms : std::min(best, ms);
  }
  return best;
}

// fp32 and bf16 timed in turn kProbeRounds times, the fastest of each.
ProbeTimes rounds(const ProbeTimer& time, ProbeKernel fp32, ProbeKernel bf16) {
  ProbeTimes t;
  for (int r = 0; r < kProbeRounds; ++r) {
    const double a = time(fp32), b = time(bf16);
    t.fp32_ms = r == 0 ? a : std::min(t.fp32_ms, a);
    t.bf16_ms = r == 0 ? b : std::min(t.bf16_ms, b);
  }
  return t;
}

// Operands of no particular structure, made without the global generator (a probe leaves no trace in the seeded
// numbers of the work that follows).
torch::Tensor operand(std::vector<int64_t> shape, double phase) {
  int64_t n = 1;
  for (const auto d : shape) n *= d;
  return torch::sin(torch::arange(n, torch::kFloat) * 0.37 + phase).view(shape);
}

double time_attention(bool bf16) {
  const auto q = operand({kPairs, kSeq, kHeadDim}, 0.1);
  const auto k = operand({kPairs, kSeq, kHeadDim}, 0.2);
  const auto v = operand({kPairs, kSeq, kHeadDim}, 0.3);
  const auto ext = torch::zeros({kSeq});
  auto c = torch::empty({kPairs, kSeq, kHeadDim});
  const float scale = 0.125f;
  return fastest_ms([&] {
    at::parallel_for(0, kPairs, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(attention_pair_scratch(kSeq, kHeadDim));
      for (int64_t i = begin; i < end; ++i) {
        AttentionPair a{kSeq, kSeq, kHeadDim, scale, q[i].data_ptr<float>(), kHeadDim, k[i].data_ptr<float>(),
                        kHeadDim};
        a.v = v[i].data_ptr<float>(), a.ldv = kHeadDim, a.ext = ext.data_ptr<float>();
        a.c = c[i].data_ptr<float>(), a.ldc = kHeadDim;
        if (bf16) attention_isa::attend_bf16(a, scratch.data());
        else attention_isa::attend_avx512(a, scratch.data());
      }
    });
  });
}

double time_matmul(Precision p) {
  const auto x = operand({kRows, kWidth}, 0.4);
  const auto w = operand({kWidth, kWidth}, 0.5) * 0.03;
  const PackedLinear packed = PackedLinear::pack(w, p);
  auto out = torch::empty({kRows, kWidth});
  return fastest_ms([&] { packed.apply(out, x, false); });
}

// Training's products as autocast runs them: fp32 activations and weights cast to bf16, then LibTorch's mm (1,024
// tokens through a 768 × 768 projection).
double time_training(bool bf16) {
  const auto x = operand({2 * kRows, kWidth}, 0.6);
  const auto w = operand({kWidth, kWidth}, 0.7) * 0.03;
  return fastest_ms([&] {
    if (bf16) torch::mm(x.to(torch::kBFloat16), w.to(torch::kBFloat16));
    else torch::mm(x, w);
  });
}

std::string ms(double v) { return format_number("%.3g ms", v); }

// "x2.06 the speed of fp32's (1.36 ms vs 2.81 ms)": bf16 against fp32.
std::string ratio_words(const ProbeTimes& t) {
  return "x" + format_number("%.2f", t.fp32_ms / t.bf16_ms) + " the speed of fp32's (" + ms(t.bf16_ms) + " vs " +
         ms(t.fp32_ms) + ")";
}

}  // namespace

double time_probe_kernel(ProbeKernel k) {
  switch (k) {
    case ProbeKernel::kAttentionFp32: return time_attention(false);
    case ProbeKernel::kAttentionBf16: return time_attention(true);
    case ProbeKernel::kMatmulFp32: return time_matmul(Precision::kFp32);
    case ProbeKernel::kMatmulBf16: return time_matmul(Precision::kBf16);
    case ProbeKernel::kTrainingFp32: return time_training(false);
    case ProbeKernel::kTrainingBf16: return time_training(true);
  }
  return 0;
}

ProbeCandidates probe_candidates() {
  ProbeCandidates c;
  c.attention_bf16 = isa::vector_path() == isa::Level::kAvx512 && isa::usable(isa::Level::kAvx512Bf16);
  c.matmul_bf16 = lowp_native(Precision::kBf16);
  c.training_bf16 = c.matmul_bf16;
  return c;
}

MeasuredDispatch probe_dispatch(const std::string& key, const ProbeCandidates& can, const ProbeTimer& time) {
  MeasuredDispatch d;
  d.key = key;
  if (can.attention_bf16) d.attention = rounds(time, ProbeKernel::kAttentionFp32, ProbeKernel::kAttentionBf16);
  if (can.matmul_bf16) d.matmul = rounds(time, ProbeKernel::kMatmulFp32, ProbeKernel::kMatmulBf16);
  if (can.training_bf16) d.training = rounds(time, ProbeKernel::kTrainingFp32, ProbeKernel::kTrainingBf16);
  return d;
}

MeasuredDispatch cached_dispatch(const std::string& cache_file, const std::string& key, const ProbeCandidates& can,
                                 const ProbeTimer& time, bool* probed) {
  if (probed) *probed = false;
  if (std::filesystem::exists(cache_file)) {
    try {
      const auto all = nlohmann::json::parse(read_file(cache_file));
      if (all.contains(key)) return all.at(key).get<MeasuredDispatch>();
    } catch (const std::exception&) {  // unreadable: probed over below
    }
  }
  const MeasuredDispatch d = probe_dispatch(key, can, time);
  if (probed) *probed = true;
  nlohmann::json all = nlohmann::json::object();
  try {
    if (std::filesystem::exists(cache_file)) all = nlohmann::json::parse(read_file(cache_file));
  } catch (const std::exception&) {
    all = nlohmann::json::object();
  }
  if (!all.is_object()) all = nlohmann::json::object();
  all[key] = d;
  try {
    std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path());
    write_file_atomic(cache_file, all.dump(2) + "\n");
  } catch (const std::exception&) {  // a read-only cache: probed again next time, nothing lost
  }
  return d;
}

std::string dispatch_key() {
  return isa::cpu_model() + " | " + isa::summary() + " | threads " + std::to_string(thread_count()) + " | LibTorch " +
         TORCH_VERSION + " | GEMM " + gemm_backend();
}

std::string dispatch_cache_file() { return core::cache_dir() + "/dispatch.json"; }

const MeasuredDispatch& apply_measured_dispatch() {
  static MeasuredDispatch d;
  static std::once_flag once;
  std::call_once(once, [] {
    d = cached_dispatch(dispatch_cache_file(), dispatch_key(), probe_candidates(), time_probe_kernel);
    if (d.attention.measured()) set_bf16_attention_enabled(d.attention_bf16());
  });
  return d;
}

std::string dispatch_summary(const MeasuredDispatch& d) {
  auto one = [](const std::string& what, const ProbeTimes& t) {
    return what + " bf16 " + ms(t.bf16_ms) + " vs fp32 " + ms(t.fp32_ms) + ": " + (t.bf16_faster() ? "bf16" : "fp32");
  };
  std::string parts;
  if (d.attention.measured()) parts = one("attention products", d.attention);
  if (d.matmul.measured()) parts += (parts.empty() ? "" : "; ") + one("matmul", d.matmul);
  if (d.training.measured()) parts += (parts.empty() ? "" : "; ") + one("training products", d.training);
  if (parts.empty()) return "dispatch: nothing to measure (no bf16 path on this CPU under the cap)";
  return "dispatch (measured, cached in " + dispatch_cache_file() + "): " + parts;
}

std::string slower_bf16_warning(const MeasuredDispatch& d, const std::string& key) {
  const bool training = key == "train.precision";  // training's products, not inference's matmuls
  const ProbeTimes& t = training ? d.training : d.matmul;
  if (!t.measured() || t.bf16_ms < t.fp32_ms) return "";
  return key + " = bf16 runs as asked, but this CPU's bf16 " + (training ? "training products" : "matmuls") +
         " ran at " + ratio_words(t) + " in the dispatch probe: fp32 is faster here";
}

std::string auto_training_precision(const MeasuredDispatch& d, std::string* why) {
  const bool bf16 = d.training_bf16();
  if (why)
    *why = !d.training.measured()
               ? "fp32: this CPU has no native bf16 products under HEADPRUNE_MAX_ISA"
               : std::string(bf16 ? "bf16" : "fp32") + ": the dispatch probe measured training's bf16 products at " +
                     ratio_words(d.training);
  return bf16 ? "bf16" : "fp32";
}

}  // namespace hp::core
