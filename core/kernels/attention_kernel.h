// One (batch, head) pair of attention on raw float rows, with AVX-512 register tiles: the GEMMs of a
// pair are too small for a BLAS (OpenBLAS packs both operands on every call and reaches ~35 GFLOP/s
// per core at 128×128×64), and here they stay in L1 together with the softmax.
//
// Per pair: P = softmax(scale · Q Kᵀ + ext) row by row, C = P V, in blocks of up to 12 query rows; the
// softmax of a block runs while its scores are in cache, and the additive mask and the scale are
// folded into the score tiles' epilogue. Any Sq, S and Dh (tails use masked loads and stores).
// Portable code never reaches the kernel: callers ask attention_kernel_available() first (the CPU has
// AVX-512F and the kernel is not switched off) and otherwise use the BLAS loop of core/model/attention.cpp.
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
};

// AVX-512F present and not disabled by set_attention_kernel_enabled(false).
bool attention_kernel_available();
// Tests and benchmarks switch the kernel off to compare with the BLAS loop.
void set_attention_kernel_enabled(bool enabled);

// Floats of scratch memory attend_pair needs (the packed Kᵀ and one block of probability rows).
std::size_t attention_pair_scratch(int S, int Dh);
// Computes one pair; only valid when attention_kernel_available().
void attend_pair(const AttentionPair& a, float* scratch);
// Asks the cache for the q, k and v rows of a pair computed next.
void prefetch_pair(const AttentionPair& a);

}  // namespace hp::core
