// The device of a run (run.device): the CPU, or a CUDA GPU through LibTorch's CUDA build. On a GPU the model's
// products are ATen's (core/model/bert.h Bert::to); the CPU kernels of this folder (oneDNN, the SIMD attention and
// epilogues, bf16/int8 packs) stay the CPU's. What runs where: docs/gpu.md.
#pragma once

#include <torch/types.h>

#include <string>

namespace hp::core {

// "cpu", "cuda" (the first GPU) or "cuda:N" as a device, checked against this build and machine: anything else, a
// build without CUDA or a GPU index that is not there is a ConfigError naming run.device and the fix.
torch::Device parse_device(const std::string& spec);

// Whether this build of LibTorch has CUDA and how many GPUs it sees.
bool cuda_built();
int cuda_devices();

// One line for --version and run logs: "GPU 0: NVIDIA H200 (139.8 GiB, sm_90) | CUDA 13.0 | cuDNN …", or why there
// is none ("GPU: none (LibTorch 1.13.1 built without CUDA)").
std::string gpu_summary();

// The random generator of a GPU (its dropout masks) as bytes, for resumable state; undefined for the CPU, whose
// generator train/run_state.h saves itself. Setting an undefined state does nothing.
torch::Tensor device_rng_state(const torch::Device& device);
void set_device_rng_state(const torch::Device& device, const torch::Tensor& state);

// Waits for the work queued on `device` (timings); nothing on the CPU.
void synchronize(const torch::Device& device);

// `t` on `device`. A host tensor bound for a GPU goes through pinned memory as an asynchronous copy (as PyTorch's
// pin_memory + non_blocking), so that the host does not wait for the queued steps before it can send the next batch;
// a tensor that needs a gradient, or any other move, is an ordinary (differentiable) `to`.
torch::Tensor to_device(const torch::Tensor& t, const torch::Device& device);

// While a HostWaits(kForbidden) lives, a CUDA operation by which the host waits for a GPU (a read of a value, a
// blocking copy, a synchronisation) throws: c10's sync debug mode "error", process-wide. Tests hold one over training
// steps to prove that the steps queue without waiting; a HostWaits(kAllowed) (the deliberate reads:
// train/pending_steps.h) lifts it for its scope. Both do nothing in a build without CUDA.
class HostWaits {
 public:
  enum Mode { kForbidden, kAllowed };
  explicit HostWaits(Mode mode);
  ~HostWaits();
  HostWaits(const HostWaits&) = delete;
  HostWaits& operator=(const HostWaits&) = delete;

 private:
  int previous_ = 0;  // the sync debug mode to restore
};

}  // namespace hp::core
