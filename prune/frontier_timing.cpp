// The frontiers' timing (see prune/frontier_timing.h).
#include "prune/frontier_timing.h"

#include <algorithm>
#include <sstream>

#include "core/base/log.h"
#include "core/kernels/lowp_gemm.h"
#include "eval/latency.h"

namespace hp::prune {

std::vector<core::Precision> native_precisions(const core::PruneConfig& P) {
  std::vector<core::Precision> v = {core::Precision::kFp32};
  for (auto p : {core::Precision::kBf16, core::Precision::kInt8}) {
    const bool asked = std::count(P.frontier_precisions.begin(), P.frontier_precisions.end(), core::precision_name(p));
    if (asked && core::lowp_native(p)) v.push_back(p);
  }
  return v;
}

std::string timing_key(long batch, long seq) { return "b" + std::to_string(batch) + "_" + std::to_string(seq); }

double speedup_against(const core::Bert& base, const core::Bert& model, long batch, long seq, const std::string& what,
                       double seconds) {
  const auto in = eval::synthetic_input(base.config(), batch, seq);
  std::vector<double> ratios;
  for (int round = 0; round < 3; ++round) {
    const double b = eval::measure_latency(base, in, 1, 3, seconds).median_ms;
    ratios.push_back(b / eval::measure_latency(model, in, 1, 3, seconds).median_ms);
  }
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  if (*hi > 2 * *lo) {
    std::ostringstream w;
    w << what << " at batch " << batch << " x " << seq << ": the rounds' speedups range from x" << *lo << " to x" << *hi
      << " (other work shares the cores?): this speedup is their median, not a figure to quote";
    core::log_warn("frontier", w.str());
  }
  std::sort(ratios.begin(), ratios.end());
  return ratios[ratios.size() / 2];
}

}  // namespace hp::prune
