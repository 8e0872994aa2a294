// The AVX2 + FMA attention kernel for one (batch, head) pair (see core/kernels/attention_kernel.h): the same
// steps as attention_avx512.cpp with 16 ymm registers instead of 32 zmm. Every function carries the target
// attribute, so this file builds with the project's portable flags; attend_pair enters it only when
// isa::vector_path() is kAvx2.
#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "core/kernels/attention_kernel.h"
#include "core/kernels/simd_avx2.h"

namespace hp::core {

namespace {

using attention_isa::packed_ld;
using simd::exp_nonpositive_ps;
using simd::lanes8;
using simd::load8;
using simd::load_first;
using simd::store8;
using simd::store_first;

// A register tile of 6 rows × 16 columns: 6 × 2 accumulators + 2 rows of B + 1 broadcast = 15 of the 16
// ymm registers. Each step of k loads 2 vectors of B and broadcasts 6 elements of A for 12 FMAs (BLIS's
// Haswell shape); 4 × 24 would load 3 + 4 for the same 12, but at Dh = 32 the context's second tile would
// use 8 of its 24 columns (a third of the work wasted), and blocks of 4 rows read Kᵀ 1.5 times as often.
constexpr int kRows = 6;
constexpr int kCols = 16;
static_assert(kRows <= attention_isa::kMaxBlockRows, "the scratch holds kMaxBlockRows probability rows");

// C[r, 0:n) = alpha · Σ_k A[r, k] B[k, 0:n) + bias[0:n) for r < R, n ≤ 16. A is read one element at a
// time (broadcast), B a row of 16 floats at a time.
struct Tile {
  int K;
  const float* A;
  std::ptrdiff_t lda;
  const float* B;
  std::ptrdiff_t ldb;
  float alpha;
  const float* bias;  // may be null; read only in [0, n)
  float* C;
  std::ptrdiff_t ldc;
  int n;
};

// kMaskB: B's rows may end before 16 columns (the last columns of V), so they are read with masked loads;
// without it they are read whole (the packed Kᵀ, zero-padded to a multiple of 16 columns). C is always
// written only in [0, n).
template <int R, bool kMaskB>
HP_AVX2 void tile(const Tile& t) {
  const __m256i m0 = lanes8(t.n), m1 = lanes8(t.n - 8);
  __m256 c0[R], c1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
  const float* a = t.A;
  const float* b = t.B;
  for (int k = 0; k < t.K; ++k, ++a, b += t.ldb) {
    const __m256 b0 = kMaskB ? load8(b, m0) : _mm256_loadu_ps(b);
    const __m256 b1 = kMaskB ? load8(b + 8, m1) : _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * t.lda);
      c0[r] = _mm256_fmadd_ps(x, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(x, b1, c1[r]);
    }
  }
  const __m256 alpha = _mm256_set1_ps(t.alpha);
  const __m256 bias0 = t.bias ? load8(t.bias, m0) : _mm256_setzero_ps();
  const __m256 bias1 = t.bias ? load8(t.bias + 8, m1) : _mm256_setzero_ps();
  const int n = t.n;  // locals: the stores below may alias `t` as far as the compiler knows
  float* const C = t.C;
  const std::ptrdiff_t ldc = t.ldc;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    store_first(C + r * ldc, n, _mm256_fmadd_ps(c0[r], alpha, bias0));
    if (n > 8) store_first(C + r * ldc + 8, n - 8, _mm256_fmadd_ps(c1[r], alpha, bias1));
  }
}

using TileFn = void (*)(const Tile&);

template <bool kMaskB, std::size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tile_table(std::index_sequence<I...>) {
  return {&tile<static_cast<int>(I) + 1, kMaskB>...};
}

// [R - 1] handles R rows: B read whole, and B read through masks.
constexpr std::array<TileFn, kRows> kWholeTiles = tile_table<false>(std::make_index_sequence<kRows>{});
constexpr std::array<TileFn, kRows> kMaskedTiles = tile_table<true>(std::make_index_sequence<kRows>{});

// In place: row[0:S) = softmax(row[0:S)), as torch computes it: exp(x − max), divided by the sum (x − max ≤
// 0: exp_nonpositive_ps). Whole vectors first, then the tail (masked lanes take −∞ for the maximum and 0
// for the sum).
HP_AVX2 void softmax_row(float* row, int S) {
  const int whole = S / 8 * 8;
  const __m256i tail = lanes8(S - whole);
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = neg_inf;
  for (int j = 0; j < whole; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(row + j));
  if (whole < S) mx = _mm256_max_ps(mx, _mm256_blendv_ps(neg_inf, load8(row + whole, tail), _mm256_castsi256_ps(tail)));
  const __m256 m = _mm256_set1_ps(simd::reduce_max(mx));
  __m256 sum = _mm256_setzero_ps();
  for (int j = 0; j < whole; j += 8) {
    const __m256 e = exp_nonpositive_ps(_mm256_sub_ps(_mm256_loadu_ps(row + j), m));
    _mm256_storeu_ps(row + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (whole < S) {
    const __m256 e =
        _mm256_and_ps(_mm256_castsi256_ps(tail), exp_nonpositive_ps(_mm256_sub_ps(load8(row + whole, tail), m)));
    store8(row + whole, tail, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / simd::reduce_add(sum));
  for (int j = 0; j < whole; j += 8) _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
  if (whole < S) store8(row + whole, tail, _mm256_mul_ps(load8(row + whole, tail), inv));
}

// Transposes the 8×8 block in r[0..7] in registers (row i of the result is column i of the input).
HP_AVX2 inline void transpose8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 s[8];
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x20);
    r[j + 4] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x31);
  }
}

// kt[d, j] = k[j, d] for j < S, d < Dh, and 0 for S ≤ j < ldkt (the padding the score tiles read whole), in
// 8×8 register blocks.
HP_AVX2 void pack_transposed(const float* k, std::ptrdiff_t ldk, int S, int Dh, float* kt, std::ptrdiff_t ldkt) {
  for (int j0 = 0; j0 < ldkt; j0 += 8) {
    const int rows = std::clamp(S - j0, 0, 8);
    for (int d0 = 0; d0 < Dh; d0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = i < rows ? load_first(k + (j0 + i) * ldk + d0, Dh - d0) : _mm256_setzero_ps();
      transpose8(r);
      const int dn = std::min(8, Dh - d0);
      for (int i = 0; i < dn; ++i) _mm256_storeu_ps(kt + (d0 + i) * ldkt + j0, r[i]);
    }
  }
}

HP_AVX2 void attend(const AttentionPair& a, float* scratch) {
  // Kᵀ packed [Dh, S] so that a score tile reads 16 keys of one dimension as two vectors.
  const int ldkt = packed_ld(a.S);
  float* kt = scratch;
  pack_transposed(a.k, a.ldk, a.S, a.Dh, kt, ldkt);
  // Without an output for the probabilities, each block's rows live in the scratch after Kᵀ.
  float* const block = a.p ? nullptr : scratch + static_cast<std::ptrdiff_t>(a.Dh) * ldkt;
  const std::ptrdiff_t ldp = a.p ? a.ldp : ldkt;
  for (int i0 = 0; i0 < a.Sq; i0 += kRows) {
    const int R = std::min(kRows, a.Sq - i0);
    const float* q = a.q + static_cast<std::ptrdiff_t>(i0) * a.ldq;
    float* p = a.p ? a.p + i0 * ldp : block;
    const TileFn whole = kWholeTiles[R - 1], masked = kMaskedTiles[R - 1];
    for (int j0 = 0; j0 < a.S; j0 += kCols)  // scores: scale · Q Kᵀ + ext
      whole(Tile{a.Dh, q, a.ldq, kt + j0, ldkt, a.scale, a.ext + j0, p + j0, ldp, std::min(kCols, a.S - j0)});
    for (int r = 0; r < R; ++r) softmax_row(p + r * ldp, a.S);
    float* c = a.c + static_cast<std::ptrdiff_t>(i0) * a.ldc;
    for (int e0 = 0; e0 < a.Dh; e0 += kCols) {  // context: P V
      const int n = std::min(kCols, a.Dh - e0);
      (n == kCols ? whole : masked)(Tile{a.S, p, ldp, a.v + e0, a.ldv, 1.0f, nullptr, c + e0, a.ldc, n});
    }
  }
}

}  // namespace

namespace attention_isa {

void attend_avx2(const AttentionPair& a, float* scratch) { attend(a, scratch); }

}  // namespace attention_isa

}  // namespace hp::core
