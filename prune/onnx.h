// `prune export --onnx`: model.onnx of an exported folder (slimmed or not) through the reference
// Python's torch.onnx (tools/onnx_export.py: dynamic batch and sequence, opset 14), checked in ONNX
// Runtime against headprune's own logits before the command succeeds.
#pragma once

#include <string>

#include "core/model/bert.h"

namespace hp::prune {

// `dir` holds `model` as written by core::save_bert. Writes dir/model.onnx; InputError when the reference
// Python or onnxruntime is missing (naming the setup step), InternalError when ONNX Runtime's logits differ
// from `model`'s by more than 1e-4 on a fixed batch (4 × 32 random ids, two rows half padding).
void export_onnx(const core::Bert& model, const std::string& dir);

}  // namespace hp::prune
