// Σ_k m_k ln m_k with m = (p + q) / 2: the sum the Jensen-Shannon divergence of two probability maps reads
// (analysis/head_stats.cpp), on the float32 path of this process (isa::vector_path(): AVX-512, AVX2 or scalar).
#pragma once

namespace hp::core {

// The kernel for this process's path. Every entry of p and q must be a positive normal float; on the vector paths
// len is a multiple of 16 (pad both maps with 1: 1 ln 1 = 0). ln is Cephes' single-precision polynomial (relative
// error ~1e-7), summed in double.
using SumMLogM = double (*)(const float* p, const float* q, long len);
SumMLogM sum_m_log_m_kernel();

}  // namespace hp::core
