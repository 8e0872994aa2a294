// The compute runtime of this process: LibTorch's intra-op threads, and one line naming LibTorch, the
// BLAS and its kernel, the GEMM backend and the thread count (for --version and run logs).
#pragma once

#include <string>

namespace hp::core {

// Sets LibTorch intra-op threads (and with them OpenMP/OpenBLAS); n <= 0 means all cores.
void set_threads(int n);
int thread_count();

// One line for --version and logs: "LibTorch 1.13.1 | BLAS OpenBLAS (SkylakeX) … | GEMM oneDNN 2.6.3 sgemm | threads 2".
std::string runtime_summary();

}  // namespace hp::core
