// Attention cores (see core/attention.h).
#include "core/attention.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace hp::core {

namespace {

using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);

// The BLAS LibTorch itself calls (core/blas.h makes sure it is a fast one); null if it has none.
SgemmFn blas_sgemm() {
  static const SgemmFn fn = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "sgemm_"));
  return fn;
}

// Row-major C[M, N] = alpha · op(A) op(B) + beta · C, op(X) = Xᵀ when the flag is set; ld* are row
// strides as stored. (Column-major BLAS computes Cᵀ = op(B)ᵀ op(A)ᵀ on the same memory.)
void gemm(SgemmFn sgemm, bool a_t, bool b_t, int M, int N, int K, float alpha, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc) {
  const char ta = a_t ? 'T' : 'N', tb = b_t ? 'T' : 'N';
  sgemm(&tb, &ta, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

void softmax_rows(float* p, int rows, int cols) {
  for (int i = 0; i < rows; ++i, p += cols) {
    const float top = *std::max_element(p, p + cols);
    float sum = 0;
    for (int j = 0; j < cols; ++j) sum += (p[j] = std::exp(p[j] - top));
    const float inv = 1.0f / sum;
    for (int j = 0; j < cols; ++j) p[j] *= inv;
  }
}

// Where head h of example b starts in a [B, rows, *] tensor whose head h occupies columns
// [col + h·Dh, col + (h+1)·Dh) of each row (row stride `ld`, unit column stride).
struct HeadMatrix {
  float* base;
  int64_t batch_stride;
  int ld;
  float* at(int64_t b, int64_t h, int Dh) const { return base + b * batch_stride + h * Dh; }
};

HeadMatrix rows_of(const torch::Tensor& t, int64_t col = 0) {
  TORCH_CHECK(t.dim() == 3 && t.stride(2) == 1, "attention: expected [B, rows, columns] with unit column stride");
  return {t.data_ptr<float>() + col, t.stride(0), static_cast<int>(t.stride(1))};
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
    const HeadMatrix Q = rows_of(q), K = rows_of(kv), V = rows_of(kv, D), C = rows_of(out);
    const ProbsMatrix P = probs_of(probs);
    const float* E = e.data_ptr<float>();
    const SgemmFn sgemm = blas_sgemm();
    const float scale = d.scale();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / d.H, h = i % d.H;
        float* p = P.at(b, h);
        for (int r = 0; r < d.Sq; ++r) std::copy(E + b * d.S, E + (b + 1) * d.S, p + r * P.ld);
        gemm(sgemm, false, true, d.Sq, d.S, d.Dh, scale, Q.at(b, h, d.Dh), Q.ld, K.at(b, h, d.Dh), K.ld, 1.0f, p, P.ld);
        softmax_rows(p, d.Sq, d.S);
        gemm(sgemm, false, false, d.Sq, d.Dh, d.S, 1.0f, p, P.ld, V.at(b, h, d.Dh), V.ld, 0.0f, C.at(b, h, d.Dh), C.ld);
      }
    });
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
    const HeadMatrix Q = rows_of(q), K = rows_of(kv), V = rows_of(kv, D), dC = rows_of(dctx), dQ = rows_of(dq),
                     dK = rows_of(dkv), dV = rows_of(dkv, D);
    const ProbsMatrix P = probs_of(probs);
    const SgemmFn sgemm = blas_sgemm();
    const float scale = d.scale();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> dS(static_cast<size_t>(d.Sq) * d.S);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / d.H, h = i % d.H;
        const float *p = P.at(b, h), *dc = dC.at(b, h, d.Dh);
        gemm(sgemm, true, false, d.S, d.Dh, d.Sq, 1.0f, p, P.ld, dc, dC.ld, 0.0f, dV.at(b, h, d.Dh), dV.ld);
        gemm(sgemm, false, true, d.Sq, d.S, d.Dh, 1.0f, dc, dC.ld, V.at(b, h, d.Dh), V.ld, 0.0f, dS.data(), d.S);
        for (int r = 0; r < d.Sq; ++r) {  // softmax backward, row by row
          float* g = dS.data() + r * d.S;
          const float* pr = p + r * P.ld;
          float dot = 0;
          for (int j = 0; j < d.S; ++j) dot += g[j] * pr[j];
          for (int j = 0; j < d.S; ++j) g[j] = pr[j] * (g[j] - dot);
        }
        gemm(sgemm, false, false, d.Sq, d.Dh, d.S, scale, dS.data(), d.S, K.at(b, h, d.Dh), K.ld, 0.0f,
             dQ.at(b, h, d.Dh), dQ.ld);
        gemm(sgemm, true, false, d.S, d.Dh, d.Sq, scale, dS.data(), d.S, Q.at(b, h, d.Dh), Q.ld, 0.0f,
             dK.at(b, h, d.Dh), dK.ld);
      }
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
    const HeadMatrix V = rows_of(v), C = rows_of(out);
    const ProbsMatrix P = probs_of(probs);
    const SgemmFn sgemm = blas_sgemm();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / d.H, h = i % d.H;
        gemm(sgemm, false, false, d.Sq, d.Dh, d.S, 1.0f, P.at(b, h), P.ld, V.at(b, h, d.Dh), V.ld, 0.0f,
             C.at(b, h, d.Dh), C.ld);
      }
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
    const HeadMatrix V = rows_of(v), dC = rows_of(dctx), dV = rows_of(dv);
    const ProbsMatrix P = probs_of(probs), dP = probs_of(dprobs);
    const SgemmFn sgemm = blas_sgemm();
    at::parallel_for(0, d.B * d.H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t b = i / d.H, h = i % d.H;
        gemm(sgemm, false, true, d.Sq, d.S, d.Dh, 1.0f, dC.at(b, h, d.Dh), dC.ld, V.at(b, h, d.Dh), V.ld, 0.0f,
             dP.at(b, h), dP.ld);
        gemm(sgemm, true, false, d.S, d.Dh, d.Sq, 1.0f, P.at(b, h), P.ld, dC.at(b, h, d.Dh), dC.ld, 0.0f,
             dV.at(b, h, d.Dh), dV.ld);
      }
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
                                                          const torch::Tensor& v, const torch::Tensor& ext) {
  const auto B = q.size(0), H = q.size(1), Sq = q.size(2), S = k.size(2), Dh = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(Dh));
  auto probs = torch::empty({B, H, Sq, S}, q.options());
  auto ctx = torch::empty({B, Sq, H, Dh}, q.options());
  auto ext_rows = ext.view({B, 1, S});
  at::parallel_for(0, B * H, /*grain_size=*/1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / H, h = i % H;
      auto p = probs[b][h];  // [Sq, S]
      at::addmm_out(p, ext_rows[b], q[b][h], k[b][h].t(), /*beta=*/1.0, /*alpha=*/scale);
      at::_softmax_out(p, p, -1, /*half_to_float=*/false);
      auto out = ctx.select(0, b).select(1, h);  // [Sq, Dh], row stride H * Dh
      at::mm_out(out, p, v[b][h]);
    }
  });
  return {probs, ctx};
}

torch::Tensor attention_autograd(const torch::Tensor& q, const torch::Tensor& kv, const torch::Tensor& ext,
                                 int64_t heads) {
  if (all_float({q, kv, ext})) return AttentionFn::apply(q, kv, ext, heads);
  const auto B = q.size(0), D = q.size(2), Dh = D / heads;
  auto split = [&](const torch::Tensor& t) { return t.view({B, t.size(1), heads, Dh}).transpose(1, 2); };
  auto k = split(kv.narrow(2, 0, D)), v = split(kv.narrow(2, D, D));
  auto probs = torch::softmax(torch::matmul(split(q), k.transpose(-1, -2)) / std::sqrt(static_cast<double>(Dh)) + ext, -1);
  return torch::matmul(probs, v).transpose(1, 2).reshape({B, q.size(1), D});
}

torch::Tensor probs_times_values(const torch::Tensor& probs, const torch::Tensor& v) {
  if (all_float({probs, v})) return ProbsTimesValuesFn::apply(probs, v);
  const auto B = v.size(0), H = probs.size(1), D = v.size(2);
  auto ctx = torch::matmul(probs, v.view({B, v.size(1), H, D / H}).transpose(1, 2));
  return ctx.transpose(1, 2).reshape({B, probs.size(2), D});
}

}  // namespace hp::core
