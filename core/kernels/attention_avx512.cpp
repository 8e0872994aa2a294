// The AVX-512 attention kernel for one (batch, head) pair (see core/kernels/attention_kernel.h). Every
// function that uses AVX-512 intrinsics carries the target attribute, so this file builds with the project's
// portable flags; attend_pair enters it only when isa::vector_path() is kAvx512.
#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "core/kernels/attention_kernel.h"
#include "core/kernels/simd_avx512.h"

namespace hp::core {

namespace {

using attention_isa::packed_ld;
using simd::exp_ps;
using simd::lanes;
using simd::transpose16;

constexpr int kRows = 12;  // query rows per register tile: 12 × 2 accumulators + 2 loads fit 32 zmm
static_assert(kRows <= attention_isa::kMaxBlockRows, "the scratch holds kMaxBlockRows probability rows");
constexpr int kCols = 32;  // columns per tile: two zmm

// C[r, 0:n) = alpha · Σ_k A[r, k] B[k, 0:n) + bias[0:n) for r < R, n ≤ 32. A is read one element at a
// time (broadcast), B a row of up to 32 floats at a time (masked, so nothing past n is touched).
struct Tile {
  int K;
  const float* A;
  std::ptrdiff_t lda;
  const float* B;
  std::ptrdiff_t ldb;
  float alpha;
  const float* bias;  // may be null
  float* C;
  std::ptrdiff_t ldc;
  int n;
};

template <int R>
HP_AVX512 void tile(const Tile& t) {
  const __mmask16 m0 = lanes(t.n), m1 = lanes(t.n - 16);
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  const float* b = t.B;
  for (int k = 0; k < t.K; ++k, b += t.ldb) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(t.A[r * t.lda + k]);
      c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(t.alpha);
  const __m512 bias0 = t.bias ? _mm512_maskz_loadu_ps(m0, t.bias) : _mm512_setzero_ps();
  const __m512 bias1 = t.bias ? _mm512_maskz_loadu_ps(m1, t.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* c = t.C + r * t.ldc;
    _mm512_mask_storeu_ps(c, m0, _mm512_fmadd_ps(c0[r], alpha, bias0));
    _mm512_mask_storeu_ps(c + 16, m1, _mm512_fmadd_ps(c1[r], alpha, bias1));
  }
}

using TileFn = void (*)(const Tile&);

template <std::size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_table(std::index_sequence<I...>) {
  return {&tile<static_cast<int>(I) + 1>...};
}

// kTiles[R - 1] handles R rows.
constexpr std::array<TileFn, kRows> kTiles = tile_table(std::make_index_sequence<kRows>{});

// In place: row[0:S) = softmax(row[0:S)), as torch computes it: exp(x − max), divided by the sum.
HP_AVX512 void softmax_row(float* row, int S) {
  __m512 mx = _mm512_set1_ps(-__builtin_inff());
  for (int j = 0; j < S; j += 16) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, lanes(S - j), row + j));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < S; j += 16) {
    const __mmask16 k = lanes(S - j);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), m));
    _mm512_mask_storeu_ps(row + j, k, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(k, e));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int j = 0; j < S; j += 16) {
    const __mmask16 k = lanes(S - j);
    _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + j), inv));
  }
}

// kt[d, j] = k[j, d] for j < S, d < Dh, in 16×16 register blocks (masked at the edges).
HP_AVX512 void pack_transposed(const float* k, std::ptrdiff_t ldk, int S, int Dh, float* kt, std::ptrdiff_t ldkt) {
  for (int j0 = 0; j0 < S; j0 += 16) {
    const int rows = std::min(16, S - j0);
    for (int d0 = 0; d0 < Dh; d0 += 16) {
      const __mmask16 cols = lanes(Dh - d0);
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(cols, k + (j0 + i) * ldk + d0) : _mm512_setzero_ps();
      transpose16(r);
      const int dn = std::min(16, Dh - d0);
      for (int i = 0; i < dn; ++i) _mm512_mask_storeu_ps(kt + (d0 + i) * ldkt + j0, lanes(rows), r[i]);
    }
  }
}

HP_AVX512 void attend(const AttentionPair& a, float* scratch) {
  // Kᵀ packed [Dh, S] so that a score tile reads 32 keys of one dimension as two vectors.
  const int ldkt = packed_ld(a.S);
  float* kt = scratch;
  pack_transposed(a.k, a.ldk, a.S, a.Dh, kt, ldkt);
  // Without an output for the probabilities, each block's rows live in the scratch after Kᵀ.
  float* const block = a.p ? nullptr : scratch + static_cast<std::ptrdiff_t>(a.Dh) * ldkt;
  const std::ptrdiff_t ldp = a.p ? a.ldp : ldkt;
  for (int i0 = 0; i0 < a.Sq; i0 += kRows) {
    const int R = std::min(kRows, a.Sq - i0);
    const TileFn run = kTiles[R - 1];
    const float* q = a.q + static_cast<std::ptrdiff_t>(i0) * a.ldq;
    float* p = a.p ? a.p + i0 * ldp : block;
    for (int j0 = 0; j0 < a.S; j0 += kCols)  // scores: scale · Q Kᵀ + ext
      run(Tile{a.Dh, q, a.ldq, kt + j0, ldkt, a.scale, a.ext + j0, p + j0, ldp, std::min(kCols, a.S - j0)});
    for (int r = 0; r < R; ++r) softmax_row(p + r * ldp, a.S);
    float* c = a.c + static_cast<std::ptrdiff_t>(i0) * a.ldc;
    for (int e0 = 0; e0 < a.Dh; e0 += kCols)  // context: P V
      run(Tile{a.S, p, ldp, a.v + e0, a.ldv, 1.0f, nullptr, c + e0, a.ldc, std::min(kCols, a.Dh - e0)});
  }
}

}  // namespace

namespace attention_isa {

void attend_avx512(const AttentionPair& a, float* scratch) { attend(a, scratch); }

}  // namespace attention_isa

}  // namespace hp::core
