// Inference GEMM backend (see core/kernels/gemm.h).
#include "core/kernels/gemm.h"

#include <torch/version.h>

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>  // Debian libdnnl-dev: the prototypes only; the library itself is dlopen'ed

#include <atomic>
#include <cstdint>
#include <torch/autograd.h>

#include "core/base/errors.h"  // InternalError
#include "core/kernels/runtime.h"  // apply_isa_cap_to_onednn

namespace hp::core {

namespace {

// The types of the functions looked up, from oneDNN's own declarations (row-major sgemm). decltype does not
// odr-use them, so nothing links against libdnnl.
using DnnlSgemm = decltype(&dnnl_sgemm);
using DnnlVersionFn = decltype(&dnnl_version);

struct OneDnn {
  DnnlSgemm sgemm = nullptr;
  std::string version;
};

const OneDnn& onednn() {
  static const OneDnn lib = [] {
    apply_isa_cap_to_onednn();  // before oneDNN's first kernel: HEADPRUNE_MAX_ISA caps its sgemm too
    OneDnn d;
#if TORCH_VERSION_MAJOR >= 2
    // LibTorch 2.x carries oneDNN 3 inside libtorch_cpu, and its function-local statics (the GEMM kernels' one-time
    // initialisation) take the place of oneDNN 2's in one process: dnnl_sgemm then answers "unimplemented". ATen's
    // GEMM (the same oneDNN/MKL inside LibTorch) does the products there.
    return d;
#endif
    void* handle = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!handle) return d;
    d.sgemm = reinterpret_cast<DnnlSgemm>(dlsym(handle, "dnnl_sgemm"));
    if (auto version = reinterpret_cast<DnnlVersionFn>(dlsym(handle, "dnnl_version")))
      d.version = std::to_string(version()->major) + "." + std::to_string(version()->minor) + "." +
                  std::to_string(version()->patch);
    return d;
  }();
  return lib;
}

std::atomic<bool> g_enabled{true};

bool use_onednn() { return g_enabled.load(std::memory_order_relaxed) && onednn().sgemm; }

// out = x · wᵀ + beta · out (beta 0 or 1), through oneDNN when the operands allow, else ATen.
void gemm_nt(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w_in, float beta, const char* caller) {
  TORCH_CHECK(out.dim() == 2 && x.dim() == 2 && w_in.dim() == 2 && x.size(1) == w_in.size(1) &&
                  out.size(0) == x.size(0) && out.size(1) == w_in.size(0),
              caller, ": shapes ", out.sizes(), " = ", x.sizes(), " x ", w_in.sizes(), "^T");
  const bool plain = out.scalar_type() == torch::kFloat && x.scalar_type() == torch::kFloat &&
                     w_in.scalar_type() == torch::kFloat && out.stride(1) == 1 && x.stride(1) == 1 &&
                     x.stride(0) >= x.size(1) && out.stride(0) >= out.size(1) && out.device().is_cpu();
  if (!plain || !use_onednn() || out.numel() == 0 || x.size(1) == 0) {
    if (beta == 0.0f) out.zero_();
    out.addmm_(x, w_in.t());
    return;
  }
  const auto w = w_in.contiguous();
  const int64_t M = x.size(0), N = w.size(0), K = x.size(1);
  const dnnl_status_t status = onednn().sgemm('N', 'T', M, N, K, 1.0f, x.data_ptr<float>(), x.stride(0),
                                              w.data_ptr<float>(), K, beta, out.data_ptr<float>(), out.stride(0));
  if (status != dnnl_success)
    throw InternalError("core/kernels/gemm.cpp: dnnl_sgemm failed with status " + std::to_string(status) + " for " +
                        std::to_string(M) + "x" + std::to_string(K) + " . " + std::to_string(K) + "x" +
                        std::to_string(N));
}

// out[M, K] = dy[M, N] · w[N, K] (the input gradient of a linear), through oneDNN when it can.
void gemm_nn(torch::Tensor& out, const torch::Tensor& dy, const torch::Tensor& w_in) {
  const bool plain = dy.scalar_type() == torch::kFloat && w_in.scalar_type() == torch::kFloat && dy.device().is_cpu() &&
                     dy.is_contiguous() && out.is_contiguous();
  if (!plain || !use_onednn() || out.numel() == 0 || dy.size(1) == 0) {
    torch::mm_out(out, dy, w_in);
    return;
  }
  const auto w = w_in.contiguous();
  const int64_t M = dy.size(0), N = dy.size(1), K = w.size(1);
  const dnnl_status_t status = onednn().sgemm('N', 'N', M, K, N, 1.0f, dy.data_ptr<float>(), N, w.data_ptr<float>(), K,
                                              0.0f, out.data_ptr<float>(), K);
  if (status != dnnl_success)
    throw InternalError("core/kernels/gemm.cpp: dnnl_sgemm failed with status " + std::to_string(status) + " for " +
                        std::to_string(M) + "x" + std::to_string(N) + " . " + std::to_string(N) + "x" +
                        std::to_string(K));
}

// x · wᵀ + b differentiable in x only: the no-grad GEMM forward and backward.
struct FrozenLinearFn : public torch::autograd::Function<FrozenLinearFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
    ctx->saved_data["w"] = w;
    ctx->saved_data["sizes"] = x.sizes().vec();
    return linear_no_grad(x, w, b);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto w = ctx->saved_data["w"].toTensor();
    return {linear_input_grad(grads[0], w).view(ctx->saved_data["sizes"].toIntVector()), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor linear_input_grad(const torch::Tensor& dy, const torch::Tensor& w) {
  auto sizes = dy.sizes().vec();
  sizes.back() = w.size(1);
  const auto rows = dy.reshape({-1, w.size(0)}).contiguous();
  auto dx = torch::empty({rows.size(0), w.size(1)}, dy.options());
  gemm_nn(dx, rows, w);
  return dx.view(sizes);
}

torch::Tensor linear_frozen(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (w.requires_grad() || (b.defined() && b.requires_grad()) || !b.defined()) return torch::linear(x, w, b);
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return linear_no_grad(x, w, b);
  if (x.scalar_type() != torch::kFloat || !x.device().is_cpu()) return torch::linear(x, w, b);
  return FrozenLinearFn::apply(x, w, b);
}

void accumulate_linear(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w) {
  gemm_nt(out, x, w, 1.0f, "accumulate_linear");
}

void matmul_nt(torch::Tensor& out, const torch::Tensor& x, const torch::Tensor& w) {
  gemm_nt(out, x, w, 0.0f, "matmul_nt");
}

torch::Tensor linear_no_grad(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  auto out = torch::empty({x.numel() / std::max<int64_t>(x.size(-1), 1), w.size(0)}, x.options());
  out.copy_(b.expand_as(out));
  accumulate_linear(out, x.reshape({-1, x.size(-1)}), w);
  return out.view(sizes);
}

std::string gemm_backend() {
  if (!use_onednn()) return "ATen addmm (BLAS)";
  return "oneDNN " + (onednn().version.empty() ? std::string("(version unknown)") : onednn().version) + " sgemm";
}

void set_onednn_gemm_enabled(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

}  // namespace hp::core
