// The run's device (see core/kernels/device.h).
#include "core/kernels/device.h"

#include <torch/version.h>

#include <cstdio>
#include <mutex>

#ifdef HP_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAFunctions.h>  // warning_state: the sync debug mode
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "core/base/config.h"  // device_spec_index
#include "core/base/errors.h"

namespace hp::core {

bool cuda_built() {
#ifdef HP_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_devices() {
#ifdef HP_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;  // no driver or no GPU: the CPU build's answer
  return n;
#else
  return 0;
#endif
}

torch::Device parse_device(const std::string& spec) {
  const int index = device_spec_index(spec);
  if (index < 0) return torch::kCPU;
  if (!cuda_built())
    throw ConfigError("run.device = " + spec + ", but this build of headprune is on LibTorch " + TORCH_VERSION +
                      " without CUDA; build against a CUDA LibTorch (scripts/setup.sh --torch, docs/gpu.md) or use "
                      "run.device: cpu");
  const int n = cuda_devices();
  if (index >= n)
    throw ConfigError("run.device = " + spec + ", but " +
                      (n == 0 ? std::string("no CUDA GPU is visible (driver, CUDA_VISIBLE_DEVICES)")
                              : std::to_string(n) + " GPU(s) are visible (cuda:0.." + std::to_string(n - 1) + ")") +
                      "; use run.device: cpu or a GPU that is there");
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

std::string gpu_summary() {
#ifdef HP_WITH_CUDA
  const int n = cuda_devices();
  if (n == 0) return "GPU: none visible (LibTorch " TORCH_VERSION " with CUDA; no driver or no device)";
  std::string s;
  for (int i = 0; i < n; ++i) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(i);
    char line[256];
    std::snprintf(line, sizeof line, "%sGPU %d: %s (%.1f GiB, sm_%d%d)", i ? " | " : "", i, p->name,
                  static_cast<double>(p->totalGlobalMem) / (1024.0 * 1024 * 1024), p->major, p->minor);
    s += line;
  }
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  char tail[128];
  std::snprintf(tail, sizeof tail, " | CUDA runtime %d.%d, driver %d.%d | LibTorch %s", runtime / 1000,
                (runtime % 1000) / 10, driver / 1000, (driver % 1000) / 10, TORCH_VERSION);
  return s + tail;
#else
  return "GPU: none (LibTorch " TORCH_VERSION " built without CUDA)";
#endif
}

torch::Tensor device_rng_state(const torch::Device& device) {
#ifdef HP_WITH_CUDA
  if (device.is_cuda()) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.get_state();
  }
#else
  (void)device;
#endif
  return {};
}

void set_device_rng_state(const torch::Device& device, const torch::Tensor& state) {
  if (!state.defined()) return;
#ifdef HP_WITH_CUDA
  if (device.is_cuda()) {
    auto gen = at::cuda::detail::getDefaultCUDAGenerator(device.index() < 0 ? 0 : device.index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state.to(torch::kCPU, torch::kUInt8).contiguous());
  }
#else
  (void)device;
#endif
}

void synchronize(const torch::Device& device) {
#ifdef HP_WITH_CUDA
  if (device.is_cuda()) {
    const c10::cuda::CUDAGuard guard(device.index());
    cudaDeviceSynchronize();
  }
#else
  (void)device;
#endif
}

torch::Tensor to_device(const torch::Tensor& t, const torch::Device& device) {
  if (!t.defined() || t.device() == device) return t;
  if (device.is_cuda() && t.device().is_cpu() && !t.requires_grad())
    return t.pin_memory().to(device, /*non_blocking=*/true);
  return t.to(device);
}

#ifdef HP_WITH_CUDA
HostWaits::HostWaits(Mode mode) {
  auto& state = c10::cuda::warning_state();
  previous_ = static_cast<int>(state.get_sync_debug_mode());
  state.set_sync_debug_mode(mode == kForbidden ? c10::cuda::SyncDebugMode::L_ERROR
                                               : c10::cuda::SyncDebugMode::L_DISABLED);
}
HostWaits::~HostWaits() {
  c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(previous_));
}
#else
HostWaits::HostWaits(Mode) {}
HostWaits::~HostWaits() = default;
#endif

}  // namespace hp::core
