// Measured dispatch: where the faster of two kernels depends on the CPU and not on its ISA flags alone, both are
// timed on this machine and the faster one taken. An AVX512_BF16 flag says vdpbf16ps exists, not that it is fast:
// on some Xeons it runs at half the fp32 FMA rate, so bf16 products lose to fp32 ones there.
//
// The choices: the attention products of an int8 or bf16 model (AttentionPair::bf16, vdpbf16ps, against the
// float32 kernel), the bf16 matmul (oneDNN's, against the fp32 GEMM) and training's products (LibTorch's bf16 mm with
// the casts autocast makes, against its fp32 mm: what train.precision: auto reads), each probed only where the CPU has
// the bf16 path under HEADPRUNE_MAX_ISA (elsewhere there is nothing to choose). The probe takes tens of milliseconds and is
// cached in HEADPRUNE_CACHE (default ~/.cache/headprune)/dispatch.json under the machine key: the CPU's model, the ISA
// cap, the thread count and the libraries; a key that differs probes again.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace hp::core {

enum class ProbeKernel { kAttentionFp32, kAttentionBf16, kMatmulFp32, kMatmulBf16, kTrainingFp32, kTrainingBf16 };

// bf16 is taken when it takes under this fraction of fp32's time: where the two are within the timing's noise, fp32
// (the exact one) stays.
constexpr double kBf16Margin = 0.95;

// One choice's two timings (the fastest of its rounds, ms); both 0 when it was not measured.
struct ProbeTimes {
  double fp32_ms = 0, bf16_ms = 0;
  bool measured() const { return fp32_ms > 0 && bf16_ms > 0; }
  bool bf16_faster() const { return measured() && bf16_ms < kBf16Margin * fp32_ms; }
};

struct MeasuredDispatch {
  std::string key;  // the machine key it was measured under
  ProbeTimes attention, matmul, training;
  bool attention_bf16() const { return attention.bf16_faster(); }
  bool matmul_bf16() const { return matmul.bf16_faster(); }
  bool training_bf16() const { return training.bf16_faster(); }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ProbeTimes, fp32_ms, bf16_ms)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MeasuredDispatch, key, attention, matmul, training)

// The time in ms of one kernel on a fixed shape, the fastest of a few runs (the real timer; tests pass a fake one).
using ProbeTimer = std::function<double(ProbeKernel)>;
// The rounds of a choice: fp32 and bf16 timed in turn this many times, the fastest of each kept (a passing load on
// the machine slows one round, not all).
constexpr int kProbeRounds = 3;
double time_probe_kernel(ProbeKernel k);

// What the CPU can run: the bf16 attention products, the native bf16 matmul (under the current cap).
struct ProbeCandidates {
  bool attention_bf16 = false, matmul_bf16 = false, training_bf16 = false;
};
ProbeCandidates probe_candidates();

// The choices timed with `time` (each only where `can` has its bf16 side), under `key`.
MeasuredDispatch probe_dispatch(const std::string& key, const ProbeCandidates& can, const ProbeTimer& time);

// The dispatch in `cache_file` when its key is `key`, else probed and written there (atomically; an unreadable file
// is probed over). `probed` says which happened.
MeasuredDispatch cached_dispatch(const std::string& cache_file, const std::string& key, const ProbeCandidates& can,
                                 const ProbeTimer& time, bool* probed = nullptr);

// This machine's key and cache file.
std::string dispatch_key();
std::string dispatch_cache_file();

// The process's dispatch: cached_dispatch of this machine with the real timer, once; then applied (the bf16
// attention products on or off). Called by the CLI after the thread count is set, and by benchmarks.
const MeasuredDispatch& apply_measured_dispatch();

// "dispatch: attention products bf16 (0.81 ms) vs fp32 (1.10 ms): bf16; bf16 matmul (…) vs fp32 (…): fp32" or what
// there was to choose from, for --version and the run log.
std::string dispatch_summary(const MeasuredDispatch& d);

// The warning for a bf16 precision asked for explicitly (`key` = value) where the probe measured bf16 slower than
// fp32 (train.precision: training's products; else the matmuls), saying by how much; empty where it is not (or was
// not measured).
std::string slower_bf16_warning(const MeasuredDispatch& d, const std::string& key);

// What train.precision: auto trains at on this CPU: bf16 where the probe measured training's bf16 products faster
// than fp32's (by kBf16Margin), fp32 elsewhere; `why` gets the log's clause saying which and by how much.
std::string auto_training_precision(const MeasuredDispatch& d, std::string* why);

}  // namespace hp::core
