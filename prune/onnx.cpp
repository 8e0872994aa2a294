// ONNX export (see prune/onnx.h).
#include "prune/onnx.h"

#include <filesystem>

#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/base/process.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "eval/latency.h"
#include "eval/metrics.h"

namespace hp::prune {

namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(HP_SOURCE_DIR) + "/tools/onnx_export.py";

// The reference Python, or InputError naming the setup step.
std::string reference_python(const std::string& flag) {
  const std::string py = core::python_reference();
  if (!fs::exists(py))
    throw InputError(flag + " needs the reference Python at " + py +
                     " (torch, transformers, onnxruntime); run scripts/setup.sh");
  return py;
}

// Runs tools/onnx_export.py; 77 (no onnxruntime) becomes InputError, another failure InternalError.
void run_script(const std::string& py, std::vector<std::string> args, const std::string& what) {
  args.insert(args.begin(), {py, kScript});
  const int rc = core::run_program(args);
  if (rc == 77) throw InputError("onnxruntime is not installed in " + py + "; run scripts/setup_python.sh");
  if (rc != 0) throw InternalError(what + ": " + core::format_command(args));
}

// Every example padded to the longest, in dataset order: the rows ONNX Runtime runs in length-sorted batches.
core::TensorMap padded_examples(const core::EncodedDataset& data) {
  const long N = static_cast<long>(data.size());
  long S = 1;
  for (const auto& ids : data.ids) S = std::max<long>(S, static_cast<long>(ids.size()));
  auto ids = torch::zeros({N, S}, torch::kLong), types = torch::zeros({N, S}, torch::kLong),
       mask = torch::zeros({N, S}, torch::kLong);
  for (long i = 0; i < N; ++i)
    for (size_t t = 0; t < data.ids[i].size(); ++t) {
      ids[i][static_cast<long>(t)] = data.ids[i][t];
      types[i][static_cast<long>(t)] = data.type_ids[i][t];
      mask[i][static_cast<long>(t)] = 1;
    }
  return {{"input_ids", ids}, {"attention_mask", mask}, {"token_type_ids", types}};
}

}  // namespace

void export_onnx(const core::Bert& model, const std::string& dir) {
  const std::string py = reference_python("--onnx");
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
  try {
    run_script(py, {dir, ref, "--tol", "1e-4"}, "the ONNX export failed or differs from headprune's logits");
  } catch (...) {
    fs::remove(ref);
    throw;
  }
  fs::remove(ref);
  core::log_info("export", "wrote " + dir + "/model.onnx (checked in ONNX Runtime against our logits)");
}

Int8ExportCheck export_onnx_int8(const core::Bert& model, const std::string& dir, const core::TaskSpec& task,
                                 const core::EncodedDataset& data, const std::vector<core::Batch>& batches) {
  const std::string py = reference_python("--int8");
  const auto fp32 = eval::evaluate(model, task, data, batches, torch::Tensor());
  core::Bert int8_model = model;
  int8_model.set_precision(core::Precision::kInt8);
  const auto int8 = eval::evaluate(int8_model, task, data, batches, torch::Tensor());
  core::TensorMap ref = padded_examples(data);
  ref["logits"] = int8.logits;
  const std::string ref_path = dir + "/onnx_int8_check.h5", out_path = dir + "/onnx_int8_logits.h5";
  core::write_hdf5(ref_path, ref);
  torch::Tensor onnx_logits;
  try {
    run_script(py, {dir, ref_path, "--int8", "--logits-out", out_path}, "the int8 ONNX export failed");
    onnx_logits = core::read_hdf5(out_path).at("logits");
  } catch (...) {
    fs::remove(ref_path);
    fs::remove(out_path);
    throw;
  }
  fs::remove(ref_path);
  fs::remove(out_path);
  Int8ExportCheck c;
  c.examples = static_cast<long>(data.size());
  c.fp32 = fp32.metrics;
  c.int8 = int8.metrics;
  const bool regression = task.is_regression();
  if (data.has_labels)
    c.onnx_int8 = eval::compute_metrics(task, eval::predictions_from_logits(onnx_logits, regression), data.labels);
  c.agreement = regression ? 1.0
                           : onnx_logits.argmax(1).eq(int8.logits.argmax(1)).to(torch::kDouble).mean().item<double>();
  c.max_abs_logit_diff = (onnx_logits - int8.logits).abs().max().item<double>();
  c.tolerance = kInt8LogitTolerance * fp32.logits.abs().max().item<double>();
  core::log_info("export", "int8 ONNX against headprune int8 on " + std::to_string(c.examples) + " examples of " +
                               task.name + ": " + std::to_string(100 * c.agreement) + "% same predictions, max |logit " +
                               "difference| " + std::to_string(c.max_abs_logit_diff) + " (tolerance " +
                               std::to_string(c.tolerance) + ")");
  if (c.agreement < 0.995 || c.max_abs_logit_diff > c.tolerance) {
    fs::remove(dir + "/model.int8.onnx");
    throw InternalError("the int8 ONNX model differs from headprune's int8: " + std::to_string(100 * c.agreement) +
                        "% same predictions (need 99.5%), max |logit difference| " +
                        std::to_string(c.max_abs_logit_diff) + " (tolerance " + std::to_string(c.tolerance) + ")");
  }
  core::log_info("export", "wrote " + dir + "/model.int8.onnx (checked in ONNX Runtime against headprune's int8)");
  return c;
}

}  // namespace hp::prune
