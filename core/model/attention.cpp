// Attention cores (see core/model/attention.h).
#include "core/model/attention.h"

#include <torch/version.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <torch/autograd.h>

#include "core/kernels/attention_kernel.h"

namespace hp::core {

namespace {

using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);

// The BLAS LibTorch itself calls (core/kernels/blas.h makes sure it is a fast one); null if it has none.
SgemmFn blas_sgemm() {
  static const SgemmFn fn = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "sgemm_"));
  return fn;
}

// Row-major C[M, N] = alpha · op(A) op(B) + beta · C, op(X) = Xᵀ when the flag is set; ld* are row
// strides as stored. (Column-major BLAS computes Cᵀ = op(B)ᵀ op(A)ᵀ on the same memory.)
void gemm(SgemmFn sgemm, bool a_t, bool b_t, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc) {
  const char ta = a_t ? 'T' : 'N', tb = b_t ? 'T' : 'N';
  sgemm(&tb, &ta, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

// The [rows, Dh] matrix of head h of example b: base + b·batch_stride + h·head_stride, row stride
// `ld`, unit column stride.
struct HeadMatrix {
  float* base;
  int64_t batch_stride, head_stride;
  int ld;
  float* at(int64_t b, int64_t h) const { return base + b * batch_stride + h * head_stride; }
};

// A [B, rows, *] tensor whose head h occupies columns [col + h·Dh, col + (h+1)·Dh) of each row.
HeadMatrix rows_of(const torch::Tensor& t, int Dh, int64_t col = 0) {
  TORCH_CHECK(t.dim() == 3 && t.stride(2) == 1, "attention: expected [B, rows, columns] with unit column stride");
  return {t.data_ptr<float>() + col, t.stride(0), Dh, static_cast<int>(t.stride(1))};
}

// A [B, H, rows, Dh] view (unit last stride).
HeadMatrix heads_of(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() == 4 && t.stride(3) == 1, "attention: expected [B, H, rows, Dh] with unit last stride");
  return {t.data_ptr<float>(), t.stride(0), t.stride(1), static_cast<int>(t.stride(2))};
}

// probs [B, H, Sq, S] (unit last stride): the matrix of pair (b, h) and its row stride.
struct ProbsMatrix {
  float* base;
  int64_t s0, s1;
  int ld;
  float* at(int64_t b, int64_t h) const { return base + b * s0 + h * s1; }
};

ProbsMatrix probs_of(const torch::Tensor& t) {
  TORCH_CHECK(t.dim() == 4 && t.stride(3) == 1, "attention: probabilities need a unit last stride");
  return {t.data_ptr<float>(), t.stride(0), t.stride(1), static_cast<int>(t.stride(2))};
}

struct Dims {
  int64_t B, H;
  int Sq, S, Dh;
  float scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh))); }
};

// f(b, h) for every (batch, head) pair, the pairs split over the intra-op threads.
template <typename F>
void for_each_pair(const Dims& d, const F& f) {
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i / d.H, i % d.H);
  });
}

// Per (b, h): P = softmax(scale · Q Kᵀ + ext row of b), C = P V. ext: [B, S] contiguous. P.base may be
// null when the probabilities are not wanted: they then stay in per-thread scratch.
void attend_pairs(const Dims& d, const HeadMatrix& Q, const HeadMatrix& K, const HeadMatrix& V, const float* E,
                  const ProbsMatrix& P, const HeadMatrix& C, bool bf16 = false) {
  const float scale = d.scale();
  if (attention_kernel_available()) {  // AVX-512 register tiles (core/kernels/attention_kernel.h)
    auto pair = [&](int64_t i) {
      const int64_t b = i / d.H, h = i % d.H;
      return AttentionPair{d.Sq,       d.S,        d.Dh,       scale, Q.at(b, h),  Q.ld,
                           K.at(b, h), K.ld,       V.at(b, h), V.ld,  E + b * d.S, P.base ? P.at(b, h) : nullptr,
                           P.ld,       C.at(b, h), C.ld,       bf16};
    };
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(attention_pair_scratch(d.S, d.Dh));
      for (int64_t i = begin; i < end; ++i) {
        if (i + 1 < end) prefetch_pair(pair(i + 1));
        attend_pair(pair(i), scratch.data());
      }
    });
    return;
  }
  const SgemmFn sgemm = blas_sgemm();
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> own(P.base ? 0 : static_cast<size_t>(d.Sq) * d.S);
    const int ld = P.base ? P.ld : d.S;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / d.H, h = i % d.H;
      float* p = P.base ? P.at(b, h) : own.data();
      for (int r = 0; r < d.Sq; ++r) std::copy(E + b * d.S, E + (b + 1) * d.S, p + r * ld);
      gemm(sgemm, false, true, d.Sq, d.S, d.Dh, scale, Q.at(b, h), Q.ld, K.at(b, h), K.ld, 1.0f, p, ld);
      auto rows = torch::from_blob(p, {d.Sq, d.S}, {ld, 1}, torch::kFloat);
      at::_softmax_out(rows, rows, -1, /*half_to_float=*/false);  // ATen's vectorised exp
      gemm(sgemm, false, false, d.Sq, d.Dh, d.S, 1.0f, p, ld, V.at(b, h), V.ld, 0.0f, C.at(b, h), C.ld);
    }
  });
}

// Where one pair's input gradients go (rows of the linears' layouts).
struct PairGrads {
  const HeadMatrix *dQ, *dK, *dV;
};

// The backward of one (b, h) pair from dC [Sq, Dh]: dA = dC Vᵀ into `da` (row stride ld_da); with `g`,
// also dV = Pᵀ dC, the softmax backward dS = P ⊙ (dA − rowsum(dA ⊙ P)) into `ds` (Sq × S, may be `da`
// itself), dQ = dS K / √Dh and dK = dSᵀ Q / √Dh.
void pair_backward(SgemmFn sgemm, const Dims& d, int64_t b, int64_t h, const HeadMatrix& Q, const HeadMatrix& K,
                   const HeadMatrix& V, const ProbsMatrix& P, const HeadMatrix& dC, float* da, int ld_da, float* ds,
                   const PairGrads* g) {
  const float *p = P.at(b, h), *dc = dC.at(b, h);
  gemm(sgemm, false, true, d.Sq, d.S, d.Dh, 1.0f, dc, dC.ld, V.at(b, h), V.ld, 0.0f, da, ld_da);
  if (!g) return;
  gemm(sgemm, true, false, d.S, d.Dh, d.Sq, 1.0f, p, P.ld, dc, dC.ld, 0.0f, g->dV->at(b, h), g->dV->ld);
  for (int r = 0; r < d.Sq; ++r) {  // softmax backward, row by row
    const float* a = da + r * ld_da;
    const float* pr = p + r * P.ld;
    float* out = ds + r * d.S;
    float dot = 0;
    for (int j = 0; j < d.S; ++j) dot += a[j] * pr[j];
    for (int j = 0; j < d.S; ++j) out[j] = pr[j] * (a[j] - dot);
  }
  const float scale = d.scale();
  gemm(sgemm, false, false, d.Sq, d.Dh, d.S, scale, ds, d.S, K.at(b, h), K.ld, 0.0f, g->dQ->at(b, h), g->dQ->ld);
  gemm(sgemm, true, false, d.S, d.Dh, d.Sq, scale, ds, d.S, Q.at(b, h), Q.ld, 0.0f, g->dK->at(b, h), g->dK->ld);
}

// softmax(q kᵀ/√Dh + ext) v with q [B, Sq, D] and kv [B, S, 2D] (k then v, the output of one linear);
// returns ctx [B, Sq, D]. Differentiable in q and kv; the probabilities are kept for the backward.
struct AttentionFn : public torch::autograd::Function<AttentionFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& kv_in, const torch::Tensor& ext, int64_t heads) {
    auto q = q_in.contiguous(), kv = kv_in.contiguous();
    const int64_t D = q.size(2);
    const Dims d{q.size(0), heads, static_cast<int>(q.size(1)), static_cast<int>(kv.size(1)),
                 static_cast<int>(D / heads)};
    auto e = ext.reshape({d.B, d.S}).contiguous();
    auto probs = torch::empty({d.B, d.H, d.Sq, d.S}, q.options());
    auto out = torch::empty({d.B, d.Sq, D}, q.options());
    const HeadMatrix Q = rows_of(q, d.Dh), K = rows_of(kv, d.Dh), V = rows_of(kv, d.Dh, D);
    const ProbsMatrix P = probs_of(probs);
    attend_pairs(d, Q, K, V, e.data_ptr<float>(), P, rows_of(out, d.Dh));
    ctx->save_for_backward({q, kv});
    ctx->saved_data["probs"] = probs;
    ctx->saved_data["heads"] = heads;
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &kv = saved[1];
    const auto probs = ctx->saved_data["probs"].toTensor();
    const int64_t D = q.size(2), heads = ctx->saved_data["heads"].toInt();
    const Dims d{q.size(0), heads, static_cast<int>(q.size(1)), static_cast<int>(kv.size(1)),
                 static_cast<int>(D / heads)};
    const auto dctx = grads[0].contiguous();
    auto dq = torch::empty_like(q), dkv = torch::empty_like(kv);
    const HeadMatrix Q = rows_of(q, d.Dh), K = rows_of(kv, d.Dh), V = rows_of(kv, d.Dh, D);
    const HeadMatrix dC = rows_of(dctx, d.Dh), dQ = rows_of(dq, d.Dh), dK = rows_of(dkv, d.Dh),
                     dV = rows_of(dkv, d.Dh, D);
    const ProbsMatrix P = probs_of(probs);
    const PairGrads g{&dQ, &dK, &dV};
    const SgemmFn sgemm = blas_sgemm();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> dS(static_cast<size_t>(d.Sq) * d.S);
      for (int64_t i = begin; i < end; ++i)
        pair_backward(sgemm, d, i / d.H, i % d.H, Q, K, V, P, dC, dS.data(), d.S, dS.data(), &g);
    });
    return {dq, dkv, torch::Tensor(), torch::Tensor()};
  }
};

// ctx [B, Sq, D] = probs v with given probabilities [B, H, Sq, S] (unit last stride) and v [B, S, D].
struct ProbsTimesValuesFn : public torch::autograd::Function<ProbsTimesValuesFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& probs_in,
                               const torch::Tensor& v_in) {
    auto probs = probs_in.stride(3) == 1 ? probs_in : probs_in.contiguous();
    auto v = v_in.contiguous();
    const Dims d{probs.size(0), probs.size(1), static_cast<int>(probs.size(2)), static_cast<int>(probs.size(3)),
                 static_cast<int>(v.size(2) / probs.size(1))};
    auto out = torch::empty({d.B, d.Sq, v.size(2)}, v.options());
    const HeadMatrix V = rows_of(v, d.Dh), C = rows_of(out, d.Dh);
    const ProbsMatrix P = probs_of(probs);
    const SgemmFn sgemm = blas_sgemm();
    for_each_pair(d, [&](int64_t b, int64_t h) {
      gemm(sgemm, false, false, d.Sq, d.Dh, d.S, 1.0f, P.at(b, h), P.ld, V.at(b, h), V.ld, 0.0f, C.at(b, h), C.ld);
    });
    ctx->save_for_backward({probs, v});
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &probs = saved[0], &v = saved[1];
    const Dims d{probs.size(0), probs.size(1), static_cast<int>(probs.size(2)), static_cast<int>(probs.size(3)),
                 static_cast<int>(v.size(2) / probs.size(1))};
    const auto dctx = grads[0].contiguous();
    auto dprobs = torch::empty({d.B, d.H, d.Sq, d.S}, probs.options());
    auto dv = torch::empty_like(v);
    const HeadMatrix V = rows_of(v, d.Dh), dC = rows_of(dctx, d.Dh), dV = rows_of(dv, d.Dh);
    const ProbsMatrix P = probs_of(probs), dP = probs_of(dprobs);
    const SgemmFn sgemm = blas_sgemm();
    for_each_pair(d, [&](int64_t b, int64_t h) {
      gemm(sgemm, false, true, d.Sq, d.S, d.Dh, 1.0f, dC.at(b, h), dC.ld, V.at(b, h), V.ld, 0.0f, dP.at(b, h), dP.ld);
      gemm(sgemm, true, false, d.S, d.Dh, d.Sq, 1.0f, P.at(b, h), P.ld, dC.at(b, h), dC.ld, 0.0f, dV.at(b, h), dV.ld);
    });
    return {dprobs, dv};
  }
};

bool all_float(std::initializer_list<torch::Tensor> ts) {
  for (const auto& t : ts)
    if (t.scalar_type() != torch::kFloat) return false;
  return blas_sgemm() != nullptr;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> attention_no_grad(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& ext,
                                                          bool want_probs, bool bf16) {
  const Dims d{q.size(0), q.size(1), static_cast<int>(q.size(2)), static_cast<int>(k.size(2)),
               static_cast<int>(q.size(3))};
  if (!all_float({q, k, v, ext})) {
    auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) * d.scale() + ext, -1);
    return {want_probs ? probs : torch::Tensor(), torch::matmul(probs, v).transpose(1, 2).contiguous()};
  }
  auto unit = [](const torch::Tensor& t) { return t.stride(3) == 1 ? t : t.contiguous(); };
  auto qu = unit(q), ku = unit(k), vu = unit(v);
  auto e = ext.reshape({d.B, d.S}).contiguous();
  auto probs = want_probs ? torch::empty({d.B, d.H, d.Sq, d.S}, q.options()) : torch::Tensor();
  auto ctx = torch::empty({d.B, d.Sq, d.H, d.Dh}, q.options());
  attend_pairs(d, heads_of(qu), heads_of(ku), heads_of(vu), e.data_ptr<float>(),
               want_probs ? probs_of(probs) : ProbsMatrix{nullptr, 0, 0, 0}, heads_of(ctx.transpose(1, 2)), bf16);
  return {probs, ctx};
}

torch::Tensor attention_backward_no_grad(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                         const torch::Tensor& probs, const torch::Tensor& dctx,
                                         const AttentionInputGrads* grads) {
  const Dims d{probs.size(0), probs.size(1), static_cast<int>(probs.size(2)), static_cast<int>(probs.size(3)),
               static_cast<int>(v.size(3))};
  TORCH_CHECK(all_float({q, k, v, probs, dctx}) && dctx.dim() == 3 && dctx.size(1) == d.Sq && dctx.stride(2) == 1,
              "attention_backward_no_grad: float32 inputs, dctx [B, Sq, H·Dh] with unit last stride");
  auto da = d.Sq == d.S ? torch::empty({d.B, d.H, d.S, d.S}, probs.options())
                        : torch::zeros({d.B, d.H, d.S, d.S}, probs.options());
  const HeadMatrix Q = heads_of(q), K = heads_of(k), V = heads_of(v), dC = rows_of(dctx, d.Dh);
  const ProbsMatrix P = probs_of(probs), dA = probs_of(da);
  HeadMatrix dQ{}, dK{}, dV{};
  PairGrads g{&dQ, &dK, &dV};
  if (grads) dQ = heads_of(grads->dq), dK = heads_of(grads->dk), dV = heads_of(grads->dv);
  const SgemmFn sgemm = blas_sgemm();
  at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> dS(grads ? static_cast<size_t>(d.Sq) * d.S : 0);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / d.H, h = i % d.H;
      pair_backward(sgemm, d, b, h, Q, K, V, P, dC, dA.at(b, h), dA.ld, dS.data(), grads ? &g : nullptr);
    }
  });
  return da;
}

torch::Tensor attention_autograd(const torch::Tensor& q, const torch::Tensor& kv, const torch::Tensor& ext,
                                 int64_t heads) {
  if (all_float({q, kv, ext})) return AttentionFn::apply(q, kv, ext, heads);
  const auto B = q.size(0), D = q.size(2), Dh = D / heads;
  auto split = [&](const torch::Tensor& t) { return t.view({B, t.size(1), heads, Dh}).transpose(1, 2); };
  auto k = split(kv.narrow(2, 0, D)), v = split(kv.narrow(2, D, D));
  auto probs =
      torch::softmax(torch::matmul(split(q), k.transpose(-1, -2)) / std::sqrt(static_cast<double>(Dh)) + ext, -1);
  return torch::matmul(probs, v).transpose(1, 2).reshape({B, q.size(1), D});
}

torch::Tensor probs_times_values(const torch::Tensor& probs, const torch::Tensor& v) {
  if (all_float({probs, v})) return ProbsTimesValuesFn::apply(probs, v);
  const auto B = v.size(0), H = probs.size(1), D = v.size(2);
  auto ctx = torch::matmul(probs, v.view({B, v.size(1), H, D / H}).transpose(1, 2));
  return ctx.transpose(1, 2).reshape({B, probs.size(2), D});
}

torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& ext,
                   double dropout) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, ext.to(q.scalar_type()), dropout);
#else
  auto probs = torch::softmax(torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1))) + ext, -1);
  return torch::matmul(torch::dropout(probs, dropout, dropout > 0), v);
#endif
}

}  // namespace hp::core
