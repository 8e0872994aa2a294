// One (batch, head) pair of attention on raw float rows, with SIMD register tiles: the GEMMs of a pair are
// too small for a BLAS (OpenBLAS packs both operands on every call and reaches ~35 GFLOP/s per core at
// 128×128×64), and here they stay in L1 together with the softmax.
//
// Per pair: P = softmax(scale · Q Kᵀ + ext) row by row, C = P V, in blocks of query rows; the softmax of
// a block runs while its scores are in cache, and the additive mask and the scale are folded into the
// score tiles' epilogue. Any Sq, S and Dh (tails use masked loads and stores).
//
// Two kernels side by side behind this one interface, chosen per call from isa::vector_path()
// (core/kernels/isa.h), as CTranslate2 and ggml keep one kernel per ISA:
//   core/kernels/attention_avx512.cpp   AVX-512F: tiles of 12 rows × 32 columns (24 of 32 zmm accumulate);
//   core/kernels/attention_avx2.cpp     AVX2 + FMA: tiles of 6 rows × 16 columns (12 of 16 ymm accumulate);
//   core/kernels/attention_bf16.cpp     AVX512_BF16, asked for by AttentionPair::bf16: the AVX-512 tiles with
//                                       bf16 operand pairs (vdpbf16ps), two products per lane and instruction.
// The two round differently (lane count, summation order): they agree with each other and with the BLAS
// loop to float32 rounding, not bit for bit. Portable code never reaches a kernel: callers ask
// attention_kernel_available() first (the float32 path is AVX2 or AVX-512 and the kernel is not switched
// off) and otherwise use the BLAS loop of core/model/attention.cpp.
#pragma once

#include <cstddef>

namespace hp::core {

struct AttentionPair {
  int Sq, S, Dh;
  float scale;
  const float* q;  // [Sq, Dh], row stride ldq
  int ldq;
  const float* k;  // [S, Dh], row stride ldk
  int ldk;
  const float* v;  // [S, Dh], row stride ldv
  int ldv;
  const float* ext;  // [S] additive mask (0 or a large negative), shared by all rows
  float* p;  // out: [Sq, S] probabilities, row stride ldp; null when not wanted
  int ldp;
  float* c;  // out: [Sq, Dh] context, row stride ldc
  int ldc;
  // The products with bf16 operands and float32 sums where the CPU has AVX512_BF16 (bf16_attention_available()),
  // for a model whose linears run at bf16 or int8: Q, K, V and the probabilities rounded to bf16 (relative error
  // 2^-9 each, below the int8 linears' own), the scale, mask and softmax in float32. Only when p is null (the
  // probabilities someone reads stay float32); elsewhere the float32 kernel.
  bool bf16 = false;
};

// True when isa::vector_path() is kAvx2 or kAvx512 (the CPU has it and HEADPRUNE_MAX_ISA allows it) and the
// kernel is not disabled by set_attention_kernel_enabled(false); false on the scalar path.
bool attention_kernel_available();
// Tests and benchmarks switch the kernel off to compare with the BLAS loop.
void set_attention_kernel_enabled(bool enabled);

// Whether a pair asking for bf16 gets it: the float32 path is AVX-512, the CPU has AVX512_BF16 under the cap, and
// both switches are on.
bool bf16_attention_available();
// Tests and benchmarks switch the bf16 products off to compare with the float32 kernel.
void set_bf16_attention_enabled(bool enabled);
// While alive: float32 attention products whatever a pair asks (the int8 ONNX export's check: the ONNX graph
// multiplies in float32, so headprune's int8 is compared with the same arithmetic on every CPU); restored on exit.
class ScopedFloat32Attention {
 public:
  ScopedFloat32Attention();
  ~ScopedFloat32Attention();
  ScopedFloat32Attention(const ScopedFloat32Attention&) = delete;
  ScopedFloat32Attention& operator=(const ScopedFloat32Attention&) = delete;

 private:
  bool was_;
};

// Floats of scratch memory attend_pair needs on any path (the packed Kᵀ and one block of probability rows; the
// bf16 path's packed K and V too).
std::size_t attention_pair_scratch(int S, int Dh);
// Computes one pair on the kernel of isa::vector_path(); only valid when attention_kernel_available().
void attend_pair(const AttentionPair& a, float* scratch);
// Asks the cache for the q, k and v rows of a pair computed next.
void prefetch_pair(const AttentionPair& a);

// The per-ISA kernels behind attend_pair (call attend_pair, not these). Both pack Kᵀ as [Dh, packed_ld(S)]
// at the start of the scratch (the AVX2 kernel zeroes the padding columns and reads them; the AVX-512 one
// masks them), then use up to kMaxBlockRows rows of probabilities after it when a.p is null.
namespace attention_isa {

constexpr int kMaxBlockRows = 12;  // the larger block of the two (AVX-512: 12 rows; AVX2: 6)
inline int packed_ld(int S) { return (S + 15) / 16 * 16; }

void attend_avx512(const AttentionPair& a, float* scratch);
void attend_avx2(const AttentionPair& a, float* scratch);
// core/kernels/attention_bf16.cpp (AVX512_BF16): packs its own layout into `scratch`, bf16_scratch(S, Dh) floats.
void attend_bf16(const AttentionPair& a, float* scratch);
std::size_t bf16_scratch(int S, int Dh);

}  // namespace attention_isa

}  // namespace hp::core
