// The frontiers' timing (see prune/frontier/frontier_timing.h).
#include "prune/frontier/frontier_timing.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/base/files.h"
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

void add_ort_rows(const core::Bert& base, long batch, long seq, double seconds, int heads, const std::string& dir,
                  const std::function<std::optional<OrtReference>(std::string* skipped)>& run,
                  const std::function<double(const torch::Tensor&)>& metric, Frontier& f) {
  const std::string base_file = dir + "/headprune.json";
  const auto in = eval::synthetic_input(base.config(), batch, seq);
  const bool fresh = !std::filesystem::exists(base_file);
  const double before = fresh ? eval::measure_latency(base, in, 1, 3, seconds).median_ms : 0;
  std::string skipped;
  const auto r = run(&skipped);
  if (!r) {
    f.onnxruntime = skipped;
    core::log_warn("frontier", "ONNX Runtime's reference rows " + skipped);
    return;
  }
  if (fresh) {
    const double ms = (before + eval::measure_latency(base, in, 1, 3, seconds).median_ms) / 2;
    core::write_file_atomic(base_file, nlohmann::json{{"fp32_ms", ms}}.dump() + "\n");
  }
  const double base_ms = nlohmann::json::parse(core::read_file(base_file)).at("fp32_ms").get<double>();
  f.onnxruntime = "onnxruntime " + r->version;
  for (const auto& [precision, out, ms] : {std::tuple{"fp32", r->fp32, r->fp32_ms}, {"int8", r->int8, r->int8_ms}}) {
    FrontierPoint p;
    p.method = PointMethod::kOnnxRuntime, p.precision = precision, p.heads_kept = heads;
    p.metric = metric(out);
    p.speedup = base_ms / ms;
    p.speedups[timing_key(batch, seq)] = p.speedup;
    p.reference = true;
    f.points.push_back(p);
  }
}

}  // namespace hp::prune
