// The compute runtime of this process: LibTorch's intra-op threads, and one line naming LibTorch, the
// BLAS and its kernel, the GEMM backend and the thread count (for --version and run logs).
#pragma once

#include <string>

namespace hp::core {

// Sets LibTorch intra-op threads (and with them OpenMP/OpenBLAS); n <= 0 means all cores.
void set_threads(int n);
int thread_count();

// One line for --version and logs: "LibTorch 1.13.1 | BLAS OpenBLAS (SkylakeX) … | GEMM oneDNN 2.6.3 sgemm |
// bf16: … | int8: … | threads 2 | ISA: CPU avx2 …, cap …": each precision's path and why (core/kernels/lowp_gemm.h).
std::string runtime_summary();

// Passes HEADPRUNE_MAX_ISA (core/kernels/isa.h) on to oneDNN (dnnl_set_max_cpu_isa, and ONEDNN_MAX_CPU_ISA for a
// copy loaded later) before its first kernel; called by main and by the first product, idempotent. Defined in
// core/kernels/lowp_gemm.cpp, beside the other oneDNN calls.
void apply_isa_cap_to_onednn();

}  // namespace hp::core
