// The bf16 attention kernel for one (batch, head) pair (see core/kernels/attention_kernel.h): the two products
// of the AVX-512 kernel with bf16 operands and float32 sums (vdpbf16ps, AVX512_BF16: two products per lane and
// instruction where vfmadd231ps makes one), the scale, the mask and the softmax in float32 as there. Q, K, V and
// the probabilities are rounded to bf16 (round to nearest even), as a bf16 model's attention is on any framework;
// each operand pair is packed so that one 32-bit lane holds the two bf16 values a lane's dot product takes:
//   scores  S[r, j] = Σ_d Q[r, d] K[j, d]:  Q rows as bf16 (pairs along d), K as Kp[d/2][j][2];
//   context C[r, e] = Σ_j P[r, j] V[j, e]:  P rows as bf16 (pairs along j), V as Vp[j/2][e][2].
// An odd Dh or S is padded with a zero (a zero product), never read past.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/kernels/attention_kernel.h"
#include "core/kernels/simd_avx512.h"

#define HP_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

namespace hp::core {

namespace {

using simd::exp_ps;
using simd::lanes;

constexpr int kRows = 12;  // query rows per register tile, as the float32 kernel
constexpr int kCols = 32;  // output columns per tile: two zmm of float32 sums

inline int even(int n) { return n + (n & 1); }

// C[r, 0:n) = alpha · Σ_k (A[r, 2k] B[k, c, 0] + A[r, 2k+1] B[k, c, 1]) + bias[0:n) for r < R, n ≤ 32: A bf16 rows
// (pairs read as one 32-bit word), B bf16 pairs [K2][ldb words] (a word per output column).
struct PairTile {
  int K2;  // pairs of the inner dimension
  const uint32_t* A;
  std::ptrdiff_t lda;  // words
  const uint32_t* B;
  std::ptrdiff_t ldb;  // words
  const float* alpha;  // per row
  const float* bias;  // may be null
  float* C;
  std::ptrdiff_t ldc;
  int n;
  float* row_max;  // may be null: per row, 16 lanes of the running maximum of the rows' outputs
};

template <int R>
HP_AVX512_BF16 void pair_tile(const PairTile& t) {
  const __mmask16 m0 = lanes(t.n), m1 = lanes(t.n - 16);
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  const uint32_t* b = t.B;
  for (int k = 0; k < t.K2; ++k, b += t.ldb) {
    const __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(m0, b), b1 = (__m512bh)_mm512_maskz_loadu_epi32(m1, b + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(t.A[r * t.lda + k]));
      c0[r] = _mm512_dpbf16_ps(c0[r], a, b0);
      c1[r] = _mm512_dpbf16_ps(c1[r], a, b1);
    }
  }
  const __m512 bias0 = t.bias ? _mm512_maskz_loadu_ps(m0, t.bias) : _mm512_setzero_ps();
  const __m512 bias1 = t.bias ? _mm512_maskz_loadu_ps(m1, t.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* c = t.C + r * t.ldc;
    const __m512 alpha = _mm512_set1_ps(t.alpha[r]);
    const __m512 y0 = _mm512_fmadd_ps(c0[r], alpha, bias0), y1 = _mm512_fmadd_ps(c1[r], alpha, bias1);
    _mm512_mask_storeu_ps(c, m0, y0);
    _mm512_mask_storeu_ps(c + 16, m1, y1);
    if (t.row_max) {
      float* mx = t.row_max + 16 * r;
      const __m512 cur = _mm512_loadu_ps(mx), with0 = _mm512_mask_max_ps(cur, m0, cur, y0);
      _mm512_storeu_ps(mx, _mm512_mask_max_ps(with0, m1, with0, y1));
    }
  }
}

using PairTileFn = void (*)(const PairTile&);

template <std::size_t... I>
constexpr std::array<PairTileFn, sizeof...(I)> pair_tile_table(std::index_sequence<I...>) {
  return {&pair_tile<static_cast<int>(I) + 1>...};
}

constexpr std::array<PairTileFn, kRows> kPairTiles = pair_tile_table(std::make_index_sequence<kRows>{});

// x[0:32) as 32 bf16 (lanes at or past n read as 0), in one register.
HP_AVX512_BF16 inline __m512bh round32(const float* x, int n) {
  return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(lanes(n - 16), x + 16), _mm512_maskz_loadu_ps(lanes(n), x));
}

// The store mask of the first n of 32 bf16 lanes (all for n ≥ 32).
inline __mmask32 lanes32(int n) { return n >= 32 ? ~0u : (1u << n) - 1; }

// y[0:even(n)) = bf16(x[0:n)), a zero after an odd n.
HP_AVX512_BF16 void to_bf16(const float* x, int n, uint16_t* y) {
  for (int j = 0; j < n; j += 32) _mm512_mask_storeu_epi16(y + j, lanes32(even(n) - j), (__m512i)round32(x + j, n - j));
}

// out[0:even(S)) = bf16(exp(row[0:S) − max)), a zero after an odd S; returns 1 / Σ exp(row − max) (the softmax's
// normalisation, of the float32 numerators, applied to the context rows: the probabilities are the rounded numerators
// times it). `lane_max`: the 16 lanes whose maximum is the row's.
HP_AVX512_BF16 float exp_to_bf16(const float* row, int S, const float* lane_max, uint16_t* out) {
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_loadu_ps(lane_max)));
  __m512 sum = _mm512_setzero_ps();
  for (int j = 0; j < S; j += 32) {
    const __mmask16 k0 = lanes(S - j), k1 = lanes(S - j - 16);
    const __m512 e0 = _mm512_maskz_mov_ps(k0, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k0, row + j), m)));
    const __m512 e1 = _mm512_maskz_mov_ps(k1, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k1, row + j + 16), m)));
    const __m512bh both = _mm512_cvtne2ps_pbh(e1, e0);
    sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
    _mm512_mask_storeu_epi16(out + j, lanes32(even(S) - j), (__m512i)both);
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

// Kp[d2][j] = the words (K[j, 2·d2], K[j, 2·d2 + 1]) as bf16, j < S (row stride ldkp words): 16 key rows at a time
// rounded into 16 registers of 16 words each, transposed in registers (core/kernels/simd_avx512.h).
HP_AVX512_BF16 void pack_keys(const float* k, std::ptrdiff_t ldk, int S, int Dh, uint32_t* kp, std::ptrdiff_t ldkp) {
  const int D2 = even(Dh) / 2;
  for (int j0 = 0; j0 < S; j0 += 16) {
    const int rows = std::min(16, S - j0);
    for (int w0 = 0; w0 < D2; w0 += 16) {  // words w0 … w0 + 15: floats 2·w0 … 2·w0 + 31
      const int f = 2 * w0;
      __m512 r[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < rows ? (__m512)round32(k + (j0 + i) * ldk + f, Dh - f) : _mm512_setzero_ps();
      simd::transpose16(r);
      const int wn = std::min(16, D2 - w0);
      for (int i = 0; i < wn; ++i) _mm512_mask_storeu_ps(kp + (w0 + i) * ldkp + j0, lanes(rows), r[i]);
    }
  }
}

// Vp[j2][e] = the words (V[2·j2, e], V[2·j2 + 1, e]) as bf16, a zero row after an odd S (row stride ldvp words).
HP_AVX512_BF16 void pack_values(const float* v, std::ptrdiff_t ldv, int S, int Dh, uint32_t* vp, std::ptrdiff_t ldvp) {
  // Word e of the pair interleaves lane e of the two rounded rows: vpermw from (first 16 | second 16).
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  for (int j = 0; j < S; j += 2) {
    const float* v0 = v + j * ldv;
    const float* v1 = j + 1 < S ? v0 + ldv : nullptr;
    for (int e = 0; e < Dh; e += 16) {
      const __mmask16 k = lanes(Dh - e);
      const __m512 a = _mm512_maskz_loadu_ps(k, v0 + e),
                   b = v1 ? _mm512_maskz_loadu_ps(k, v1 + e) : _mm512_setzero_ps();
      const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);
      _mm512_mask_storeu_epi32(vp + (j / 2) * ldvp + e, k, _mm512_permutexvar_epi16(idx, both));
    }
  }
}

// The scratch, in floats: Kp [D2][ld], Vp [S2][Dh], one block's scores in float32 [kRows][ld] and their exp in bf16
// [kRows][ld] (half as many floats), one block's queries in bf16 [kRows][D2], per row of the block 16 lanes of the
// scores' maximum, the scale and the normalisation.
struct Layout {
  std::ptrdiff_t ld, D2, S2;
  uint32_t* kp;
  uint32_t* vp;
  float* block;
  uint32_t* pb;
  uint32_t* qb;
  float *lane_max, *scale, *norm;
};

Layout layout(int S, int Dh, float* scratch) {
  Layout l;
  l.ld = attention_isa::packed_ld(S), l.D2 = even(Dh) / 2, l.S2 = even(S) / 2;
  auto* words = reinterpret_cast<uint32_t*>(scratch);
  l.kp = words;
  l.vp = l.kp + l.D2 * l.ld;
  l.block = reinterpret_cast<float*>(l.vp + l.S2 * Dh);
  l.pb = reinterpret_cast<uint32_t*>(l.block + kRows * l.ld);
  l.qb = l.pb + kRows * l.ld / 2;
  l.lane_max = reinterpret_cast<float*>(l.qb + kRows * l.D2);
  l.scale = l.lane_max + 16 * kRows;
  l.norm = l.scale + kRows;
  return l;
}

HP_AVX512_BF16 void attend(const AttentionPair& a, float* scratch) {
  const Layout l = layout(a.S, a.Dh, scratch);
  pack_keys(a.k, a.ldk, a.S, a.Dh, l.kp, l.ld);
  pack_values(a.v, a.ldv, a.S, a.Dh, l.vp, a.Dh);
  std::fill_n(l.scale, kRows, a.scale);
  const std::ptrdiff_t ldpb = l.ld / 2;  // words of a bf16 row (ld is a multiple of 16)
  for (int i0 = 0; i0 < a.Sq; i0 += kRows) {
    const int R = std::min(kRows, a.Sq - i0);
    const PairTileFn run = kPairTiles[R - 1];
    for (int r = 0; r < R; ++r)
      to_bf16(a.q + static_cast<std::ptrdiff_t>(i0 + r) * a.ldq, a.Dh, reinterpret_cast<uint16_t*>(l.qb + r * l.D2));
    std::fill_n(l.lane_max, 16 * R, -__builtin_inff());
    for (int j0 = 0; j0 < a.S; j0 += kCols)  // scores: scale · Q Kᵀ + ext, and each row's maximum
      run(PairTile{static_cast<int>(l.D2), l.qb, l.D2, l.kp + j0, l.ld, l.scale, a.ext + j0, l.block + j0, l.ld,
                   std::min(kCols, a.S - j0), l.lane_max});
    for (int r = 0; r < R; ++r)
      l.norm[r] =
          exp_to_bf16(l.block + r * l.ld, a.S, l.lane_max + 16 * r, reinterpret_cast<uint16_t*>(l.pb + r * ldpb));
    float* c = a.c + static_cast<std::ptrdiff_t>(i0) * a.ldc;
    for (int e0 = 0; e0 < a.Dh; e0 += kCols)  // context: exp(scores − max) V, each row times its 1 / Σ
      run(PairTile{static_cast<int>(l.S2), l.pb, ldpb, l.vp + e0, a.Dh, l.norm, nullptr, c + e0, a.ldc,
                   std::min(kCols, a.Dh - e0), nullptr});
  }
}

}  // namespace

namespace attention_isa {

std::size_t bf16_scratch(int S, int Dh) {
  const std::size_t ld = static_cast<std::size_t>(packed_ld(S)), D2 = static_cast<std::size_t>(even(Dh) / 2),
                    S2 = static_cast<std::size_t>(even(S) / 2);
  return D2 * ld + S2 * static_cast<std::size_t>(Dh) + kRows * ld + kRows * ld / 2 + kRows * D2 + 18 * kRows;
}

void attend_bf16(const AttentionPair& a, float* scratch) { attend(a, scratch); }

}  // namespace attention_isa

}  // namespace hp::core
