// A training step as a CUDA graph (see train/captured_step.h).
#include "train/captured_step.h"

#include "core/base/errors.h"
#include "core/kernels/device.h"  // synchronize

#ifdef HP_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace hp::train {

#ifdef HP_WITH_CUDA
struct CapturedStep::Impl {
  at::cuda::CUDAGraph graph;
};

bool CapturedStep::available() { return true; }

CapturedStep::CapturedStep(const std::function<void()>& step, const std::function<void()>& before_capture,
                           const torch::Device& device, int warmup)
    : impl_(std::make_unique<Impl>()) {
  if (!device.is_cuda()) throw ConfigError("a captured step needs a CUDA device, not " + device.str());
  core::synchronize(device);  // the side stream starts after everything queued before
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device.index());
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < warmup; ++i) step();
    side.synchronize();
    if (before_capture) before_capture();
    impl_->graph.capture_begin();
    step();
    impl_->graph.capture_end();
  }
  core::synchronize(device);
}

void CapturedStep::replay() { impl_->graph.replay(); }
#else
struct CapturedStep::Impl {};

bool CapturedStep::available() { return false; }

CapturedStep::CapturedStep(const std::function<void()>&, const std::function<void()>&, const torch::Device&, int) {
  throw ConfigError("a captured training step (CUDA graph) needs a LibTorch built with CUDA (docs/gpu.md)");
}

void CapturedStep::replay() { throw InternalError("CapturedStep::replay without CUDA"); }
#endif

CapturedStep::~CapturedStep() = default;

}  // namespace hp::train
