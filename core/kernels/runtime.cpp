// Threads and the runtime line (see core/kernels/runtime.h).
#include "core/kernels/runtime.h"

#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <algorithm>
#include <thread>

#include "core/kernels/blas.h"
#include "core/kernels/gemm.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"

namespace hp::core {

void set_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(n);
}

int thread_count() { return torch::get_num_threads(); }

std::string runtime_summary() {
  BlasInfo b = detect_blas();
  std::string s = std::string("LibTorch ") + TORCH_VERSION + " | BLAS " + b.name;
  const std::string generic =
      b.slow ? ", generic: OPENBLAS_CORETYPE is set; " + best_openblas_core() + " runs several times faster here" : "";
  if (!b.kernel.empty()) s += " (kernel " + b.kernel + generic + ")";
  if (!b.library.empty()) s += " from " + b.library;
  s += " | GEMM " + gemm_backend() + " | " + precision_backend(Precision::kBf16) + " | " +
       precision_backend(Precision::kInt8) + " | threads " + std::to_string(thread_count()) + " | " + isa::summary();
  return s;
}

}  // namespace hp::core
