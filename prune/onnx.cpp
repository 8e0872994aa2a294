// ONNX export (see prune/onnx.h).
#include "prune/onnx.h"

#include <filesystem>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/base/process.h"
#include "core/io/tensor_io.h"
#include "eval/latency.h"

namespace hp::prune {

void export_onnx(const core::Bert& model, const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string py = core::python_reference(), script = std::string(HP_SOURCE_DIR) + "/tools/onnx_export.py";
  if (!fs::exists(py))
    throw InputError("--onnx needs the reference Python at " + py +
                     " (torch, transformers, onnxruntime); run scripts/setup.sh");
  core::EncoderInput in = eval::synthetic_input(model.config(), 4, 32, 7);
  in.attention_mask = torch::ones({4, 32}, torch::kLong);
  in.attention_mask.narrow(0, 2, 2).narrow(1, 16, 16).zero_();  // two rows padded after 16 tokens
  in.token_type_ids = torch::zeros({4, 32}, torch::kLong);
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = model.forward(in).logits;
  }
  const std::string ref = dir + "/onnx_check.h5";
  core::write_hdf5(ref, {{"input_ids", in.input_ids},
                         {"attention_mask", in.attention_mask},
                         {"token_type_ids", in.token_type_ids},
                         {"logits", logits}});
  const std::vector<std::string> cmd = {py, script, dir, ref, "--tol", "1e-4"};
  const int rc = core::run_program(cmd);
  fs::remove(ref);
  if (rc == 77) throw InputError("onnxruntime is not installed in " + py + "; run scripts/setup_python.sh");
  if (rc != 0)
    throw InternalError("the ONNX export failed or differs from headprune's logits: " + core::format_command(cmd));
  core::log_info("export", "wrote " + dir + "/model.onnx (checked in ONNX Runtime against our logits)");
}

}  // namespace hp::prune
