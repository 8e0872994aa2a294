// ONNX export (see prune/export/onnx.h).
#include "prune/export/onnx.h"

#include <cstring>  // strsignal

#include <filesystem>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/base/process.h"
#include "core/base/strings.h"
#include "core/base/version.h"
#include "core/kernels/attention_kernel.h"
#include "core/kernels/lowp_gemm.h"
#include "core/model/pooling.h"
#include "eval/embedding.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"
#include "eval/latency.h"
#include "eval/metrics.h"
#include "prune/export/slim.h"

namespace hp::prune {

namespace {

namespace fs = std::filesystem;

const std::string kScript = core::source_dir() + "/tools/onnx_export.py";

// The reference Python, or InputError naming the setup step.
std::string reference_python(const std::string& flag) {
  const std::string py = core::python_reference();
  if (!fs::exists(py))
    throw InputError(flag + " needs the reference Python at " + py +
                     " (torch, transformers, onnxruntime); run scripts/setup.sh");
  return py;
}

// Runs tools/onnx_export.py; returns its exit status, 77 (no onnxruntime) as InputError.
int run_script(const std::string& py, std::vector<std::string> args) {
  args.insert(args.begin(), {py, kScript});
  const int rc = core::run_program(args);
  if (rc == 77) throw InputError("onnxruntime is not installed in " + py + "; run scripts/setup_python.sh");
  return rc;
}

// A child's exit status as a person reads it: "exit 3", or "killed by Floating point exception" (128 + the signal).
std::string exit_text(int rc) {
  return rc > 128 ? "killed by " + std::string(strsignal(rc - 128)) : "exit " + std::to_string(rc);
}

// Removes the files of a check (and on failure the file it made); never throws.
void remove_files(const std::vector<std::string>& paths) {
  std::error_code ec;
  for (const auto& p : paths) fs::remove(p, ec);
}

// The fp32 script's verdict from its --result file: its max |ONNX Runtime - headprune|, or -1 when it wrote none
// (it failed before comparing).
double script_max_diff(const std::string& result) {
  std::error_code ec;
  if (!fs::exists(result, ec)) return -1;
  try {
    return nlohmann::json::parse(core::read_file(result)).at("max_abs_diff").get<double>();
  } catch (const std::exception&) {
    return -1;
  }
}

std::string g3(double v) { return core::format_number("%.3g", v); }

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

// The fixed batch every fp32 ONNX file is checked on: 4 × 32 random ids, two rows padded after 16 tokens.
core::EncoderInput check_input(const core::BertConfig& config) {
  core::EncoderInput in = eval::synthetic_input(config, 4, 32, 7);
  in.attention_mask = torch::ones({4, 32}, torch::kLong);
  in.attention_mask.narrow(0, 2, 2).narrow(1, 16, 16).zero_();
  in.token_type_ids = torch::zeros({4, 32}, torch::kLong);
  return in;
}

// Writes dir/model.onnx through the script (`flags`: --sentence for a sentence-transformers folder) and checks ONNX
// Runtime's output against `want` (headprune's `what`: "logits" or "embeddings") on `in` within kOnnxTolerance.
void write_checked_onnx(const std::string& dir, const core::EncoderInput& in, const std::string& what,
                        const torch::Tensor& want, const std::vector<std::string>& flags) {
  const std::string py = reference_python("--onnx");
  const std::string ref = dir + "/onnx_check.h5", result = dir + "/onnx_check.json", out = dir + "/model.onnx";
  const std::string tol = tolerance_text(kOnnxTolerance);
  core::write_hdf5(ref, {{"input_ids", in.input_ids},
                         {"attention_mask", in.attention_mask},
                         {"token_type_ids", in.token_type_ids},
                         {what, want}});
  int rc = 0;
  try {
    std::vector<std::string> args = {dir, ref, "--tol", tol, "--result", result};
    args.insert(args.end(), flags.begin(), flags.end());
    rc = run_script(py, args);
  } catch (...) {
    remove_files({ref, result, out});
    throw;
  }
  const double diff = script_max_diff(result);
  remove_files({ref, result});
  if (rc == 0) {
    core::log_info("export", "model.onnx: ONNX Runtime's " + what + " within " + (diff >= 0 ? g3(diff) : tol) +
                                 " of headprune's (tolerance " + tol + ")");
    return;
  }
  remove_files({out});
  if (diff > kOnnxTolerance)
    throw InternalError(out + ": ONNX Runtime's " + what + " differ from headprune's by up to " + g3(diff) +
                        " (tolerance " + tol +
                        ") on 4 × 32 random ids; export without --onnx and --int8 (the Hugging "
                        "Face folder alone), and report it with the model's config.json");
  throw InternalError("model.onnx: tools/onnx_export.py failed (" + exit_text(rc) + ", its output is above) and no model.onnx "
                      "was written; export without --onnx and --int8 (the Hugging Face folder alone), and report it "
                      "with the model's config.json");
}

}  // namespace

void export_onnx(const core::Bert& model, const std::string& dir) {
  const core::EncoderInput in = check_input(model.config());
  torch::NoGradGuard no_grad;
  write_checked_onnx(dir, in, "logits", model.forward(in).logits, {});
}

void export_sentence_onnx(const core::Bert& model, const core::SentenceModel& layout, const std::string& dir) {
  const core::EncoderInput in = check_input(model.config());
  torch::NoGradGuard no_grad;
  const auto hidden = model.forward(in).last_hidden;
  write_checked_onnx(dir, in, "embeddings",
                     core::pool_sentences(layout.pooling, layout.normalize, hidden, in.attention_mask), {"--sentence"});
}

namespace {

// The share of predictions (a tagger's: of scored tags) that are equal.
double agreement(const std::vector<float>& a, const std::vector<float>& b) {
  long same = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != core::kSentenceEnd) same += a[i] == b[i], ++n;
  return n ? static_cast<double>(same) / static_cast<double>(n) : 1.0;
}

// Why the int8 check failed: the criteria it missed, e.g. "97.3% the same predictions (need 99.5%)".
std::string int8_check_failure(const Int8ExportCheck& c, const Int8CheckLimits& limits) {
  std::string why;
  if (c.agreement < limits.min_agreement)
    why = g3(100 * c.agreement) + "% the same predictions (need " + g3(100 * limits.min_agreement) + "%)";
  if (c.max_abs_logit_diff > c.tolerance)
    why += (why.empty() ? "" : ", ") + std::string("max |logit difference| ") + g3(c.max_abs_logit_diff) +
           " > tolerance " + g3(c.tolerance) + " (" + g3(100 * limits.logit_tolerance) +
           "% of the largest |float32 logit|)";
  return why;
}

// ONNX Runtime's int8 logits for every example of `ref` (tools/onnx_export.py --int8 at the portable weight range).
torch::Tensor onnx_int8_logits(const std::string& dir, const core::TensorMap& ref) {
  const std::string py = reference_python("--int8");
  const std::string ref_path = dir + "/onnx_int8_check.h5", out_path = dir + "/onnx_int8_logits.h5",
                    onnx_path = dir + "/model.int8.onnx";
  try {
    core::write_hdf5(ref_path, ref);
    const int rc = run_script(py, {dir, ref_path, "--int8", "--logits-out", out_path, "--weight-max",
                                   std::to_string(core::kPortableInt8WeightMax)});
    if (rc != 0)
      throw InternalError("model.int8.onnx: tools/onnx_export.py --int8 failed (" + exit_text(rc) +
                          ", its output is above) and no model.int8.onnx was written; export without --int8 "
                          "(model.onnx alone), and report it with the model's config.json");
    torch::Tensor logits = core::read_hdf5(out_path).at("logits");
    remove_files({ref_path, out_path});
    return logits;
  } catch (...) {
    remove_files({ref_path, out_path, onnx_path});
    throw;
  }
}

}  // namespace

Int8ExportCheck export_onnx_int8(const core::Bert& model, const std::string& dir, const core::TaskSpec& task,
                                 const core::EncodedDataset& data, const std::vector<core::Batch>& batches,
                                 const Int8CheckLimits& limits) {
  reference_python("--int8");  // before the evaluations: a missing venv is said at once
  const auto fp32 = eval::evaluate(model, task, data, batches);
  // headprune's int8 with the file's weights (±63, dynamic) and float32 attention: the graph's arithmetic up to
  // float32 rounding, on every CPU.
  core::Bert int8_model = model;
  int8_model.set_precision(core::Precision::kInt8, core::kPortableInt8WeightMax);
  const core::ScopedFloat32Attention float32_attention;
  const auto int8 = eval::evaluate(int8_model, task, data, batches);
  core::TensorMap ref = padded_examples(data);
  ref["logits"] = int8.logits;
  const torch::Tensor onnx_logits = onnx_int8_logits(dir, ref);
  Int8ExportCheck c;
  c.examples = static_cast<long>(data.size());
  c.weight_max = core::kPortableInt8WeightMax;
  c.fp32 = fp32.metrics;
  c.int8 = int8.metrics;
  const bool regression = task.is_regression();
  if (data.has_labels)
    c.onnx_int8 =
        eval::compute_metrics(task, eval::predictions_of(onnx_logits, data, regression), core::gold_labels(data));
  c.agreement = regression ? 1.0 : agreement(eval::predictions_of(onnx_logits, data, false),
                                             eval::predictions_of(int8.logits, data, false));
  // A tagger's logits at its real tokens only: each side pads its batches to its own widths.
  const auto real = [&](const torch::Tensor& t) {
    return t.dim() == 3 ? t * ref.at("attention_mask").unsqueeze(2).to(t.scalar_type()) : t;
  };
  c.max_abs_logit_diff = (real(onnx_logits) - real(int8.logits)).abs().max().item<double>();
  c.tolerance = limits.logit_tolerance * real(fp32.logits).abs().max().item<double>();
  core::log_info("export", "int8 ONNX against headprune int8 (weights ±" + std::to_string(c.weight_max) + ") on " +
                               std::to_string(c.examples) + " examples of " + task.name + ": " +
                               g3(100 * c.agreement) + "% same predictions, max |logit difference| " +
                               g3(c.max_abs_logit_diff) + " (tolerance " + g3(c.tolerance) + ")");
  const std::string why = int8_check_failure(c, limits);
  if (!why.empty()) {
    remove_files({dir + "/model.int8.onnx"});
    throw InternalError(dir + "/model.int8.onnx: ONNX Runtime's int8 differs from headprune's int8 (weights ±" +
                        std::to_string(c.weight_max) + ") on " + std::to_string(c.examples) + " examples of " +
                        task.name + ": " + why + "; export without --int8 (model.onnx alone), or compare headprune's " +
                        "int8 on your data with `prune eval --precision int8 --calibrate 0`");
  }
  core::log_info("export", "model.int8.onnx checked in ONNX Runtime against headprune's int8");
  return c;
}

SentenceInt8Check export_sentence_onnx_int8(const eval::SentenceEncoder& enc, const std::string& dir,
                                            const std::vector<std::string>& texts, double min_cosine,
                                            double mean_cosine) {
  reference_python("--int8");  // before the embeddings: a missing venv is said at once
  const int len = eval::embedding_length(enc, 0), batch = 32;
  const torch::Tensor fp32 = eval::embed_texts(enc, texts, batch, len, false);
  eval::SentenceEncoder int8_enc = enc;  // headprune's int8 with the file's weights (±63, dynamic)
  int8_enc.model.set_precision(core::Precision::kInt8, core::kPortableInt8WeightMax);
  const core::ScopedFloat32Attention float32_attention;  // the graph's arithmetic (above)
  const torch::Tensor int8 = eval::embed_texts(int8_enc, texts, batch, len, false);
  std::vector<core::Example> rows(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) rows[i].text_a = texts[i];
  core::TensorMap ref = padded_examples(core::encode_examples(enc.tokenizer, rows, len));
  ref["logits"] = int8;
  const torch::Tensor onnx = onnx_int8_logits(dir, ref);
  SentenceInt8Check c;
  c.sentences = static_cast<long>(texts.size());
  c.weight_max = core::kPortableInt8WeightMax;
  c.int8_to_fp32 = eval::paired_cosine(int8, fp32).mean().item<double>();
  c.onnx_int8_to_fp32 = eval::paired_cosine(onnx, fp32).mean().item<double>();
  const torch::Tensor to_int8 = eval::paired_cosine(onnx, int8);
  c.min_onnx_to_int8 = to_int8.min().item<double>();
  c.mean_onnx_to_int8 = to_int8.mean().item<double>();
  c.max_abs_diff = (onnx - int8).abs().max().item<double>();
  core::log_info("export", "int8 ONNX against headprune int8 (weights ±" + std::to_string(c.weight_max) + ") on " +
                               std::to_string(c.sentences) + " sentences: mean cosine " +
                               core::format_number("%.6f", c.mean_onnx_to_int8) + " (need " + g3(mean_cosine) +
                               "), lowest " + core::format_number("%.4f", c.min_onnx_to_int8) + " (need " +
                               g3(min_cosine) + "), max |difference| " + g3(c.max_abs_diff));
  if (c.min_onnx_to_int8 < min_cosine || c.mean_onnx_to_int8 < mean_cosine) {
    remove_files({dir + "/model.int8.onnx"});
    throw InternalError(dir +
                        "/model.int8.onnx: ONNX Runtime's int8 embeddings differ from headprune's int8 (weights ±" +
                        std::to_string(c.weight_max) + "): mean cosine " +
                        core::format_number("%.6f", c.mean_onnx_to_int8) + ", lowest " +
                        core::format_number("%.4f", c.min_onnx_to_int8) + " (need " + g3(mean_cosine) + " and " +
                        g3(min_cosine) + ") over " + std::to_string(c.sentences) +
                        " sentences; export without --int8 (model.onnx alone), or embed at int8 in headprune with "
                        "`prune embed --precision int8`");
  }
  core::log_info("export", "model.int8.onnx checked in ONNX Runtime against headprune's int8");
  return c;
}

std::optional<OrtReference> ort_reference(const std::string& model_dir, const core::EncodedDataset& data, long batch,
                                          long seq, bool sentence, const std::string& work_dir, std::string* skipped) {
  const std::string done = work_dir + "/ort.json",
                    outputs_h5 = work_dir + (sentence ? "/ort_embeddings.h5" : "/ort_logits.h5");
  if (!fs::exists(done)) {
    const std::string py = core::python_reference();
    if (!fs::exists(py)) {
      *skipped = "skipped: no reference Python at " + py + " (scripts/setup.sh makes it)";
      return std::nullopt;
    }
    if (const std::string why = core::python_reference_incomplete(py, core::PythonRef::kTransformers4); !why.empty()) {
      *skipped = "skipped: " + why;
      return std::nullopt;
    }
    fs::create_directories(work_dir);
    const std::string inputs = work_dir + "/inputs.h5";
    core::write_hdf5(inputs, padded_examples(data));
    std::vector<std::string> cmd = {py,        core::source_dir() + "/tools/ort_reference.py",
                                    model_dir, inputs,
                                    "--batch", std::to_string(batch),
                                    "--seq",   std::to_string(seq),
                                    "--out",   work_dir};
    if (sentence) cmd.push_back("--sentence");
    const int rc = core::run_program(cmd);
    if (rc == 77) {
      *skipped = std::string("skipped: onnxruntime") + (sentence ? " or sentence-transformers" : "") +
                 " is not installed in " + py + " (scripts/setup_python.sh installs it)";
      return std::nullopt;
    }
    if (rc != 0 || !fs::exists(done))
      throw InputError("tools/ort_reference.py failed (exit " + std::to_string(rc) +
                       ", its output is above); run it by hand to see why: " + core::format_command(cmd));
    remove_files({inputs, work_dir + "/ort.fp32.onnx", work_dir + "/ort.int8.onnx"});  // ort.json and outputs stay
  }
  const auto j = nlohmann::json::parse(core::read_file(done));
  const auto outputs = core::read_hdf5(outputs_h5);
  OrtReference r;
  r.fp32 = outputs.at("fp32"), r.int8 = outputs.at("int8");
  r.fp32_ms = j.at("fp32").at("ms").get<double>();
  r.int8_ms = j.at("int8").at("ms").get<double>();
  r.version = j.value("onnxruntime", "");
  return r;
}

}  // namespace hp::prune
