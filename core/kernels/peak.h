// The CPU's own limits: one product instruction in a tight loop on registers (no memory traffic), on every thread,
// as the most a GEMM of that precision can reach on this machine. Kernels' rates are quoted as a fraction of it
// (bench/lowp_gemm_bench --peak, docs/precision.md); the bf16 and int8 rates show what the ISA flags alone do not say
// (a VDPBF16PS at half the FMA rate on some Xeons).
#pragma once

namespace hp::core {

enum class PeakOp {
  kFp32Fma,  // vfmadd231ps, 512-bit with AVX-512, else 256-bit with AVX2 + FMA
  kBf16Dot,  // vdpbf16ps (AVX512_BF16): 2 bf16 products summed into each fp32 lane
  kInt8Dot,  // vpdpbusd (AVX-512 VNNI, or AVX-VNNI's 256-bit form): 4 u8·s8 products summed into each int32 lane
};

// "fp32 FMA (vfmadd231ps zmm)" and the like: the instruction and width measured.
const char* peak_op_name(PeakOp op);

// The CPU has the instruction and HEADPRUNE_MAX_ISA allows it (core/kernels/isa.h).
bool peak_op_usable(PeakOp op);

// Operations per second in G/s, a multiply-add counted as 2, over `threads` threads each looping for `seconds`.
// 0 when !peak_op_usable(op).
double peak_gops(PeakOp op, int threads, double seconds);

}  // namespace hp::core
