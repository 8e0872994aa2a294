// `prune export --onnx`: model.onnx of an exported folder (slimmed or not) through the reference
// Python's torch.onnx (tools/onnx_export.py: dynamic batch and sequence, opset 14), checked in ONNX
// Runtime against headprune's own logits before the command succeeds.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/data/batching.h"
#include "core/data/glue.h"

#include "core/io/sentence_model.h"
#include "core/model/bert.h"
#include "eval/embedding.h"

namespace hp::prune {

// `dir` holds `model` as written by core::save_bert. Writes dir/model.onnx; InputError when the reference
// Python or onnxruntime is missing (naming the setup step), InternalError when ONNX Runtime's logits differ
// from `model`'s by more than 1e-4 on a fixed batch (4 × 32 random ids, two rows half padding) or the script
// fails, the message saying which and what to try. A failure leaves no model.onnx and no check file in `dir`
// (`prune export` then discards its whole folder: cli/export_cmd.cpp).
void export_onnx(const core::Bert& model, const std::string& dir);

// `prune export --onnx` of a sentence-transformers folder: dir (written by core::save_bert and
// core::write_sentence_model_files) gets model.onnx of the folder's whole module chain as SentenceTransformer(dir)
// runs it — the encoder `model`, the pooling and Normalize of `layout` — whose output `sentence_embedding`
// [batch, width] is checked in ONNX Runtime against headprune's embeddings of the same fixed batch within 1e-4,
// failing as export_onnx fails.
void export_sentence_onnx(const core::Bert& model, const core::SentenceModel& layout, const std::string& dir);

// `prune export --int8`: dir/model.int8.onnx, dir/model.onnx with headprune's int8 scheme written in standard
// ONNX operators (tools/onnx_export.py: weights s8 per output channel in ±core::kPortableInt8WeightMax = ±63,
// activations u8 per row computed in the graph, MatMulInteger; the classifier float32), checked before the
// command succeeds on the examples `data` (the task's evaluation split) against `model` at int8 in headprune
// with the same weights (set_precision(kInt8, kPortableInt8WeightMax)): the same predictions on at least
// `limits.min_agreement` of them (classification) and logits within `limits.logit_tolerance` of the largest
// |logit| of headprune's float32 model. Returns the metrics of headprune fp32, headprune int8 (±63) and ONNX
// Runtime int8 on `data`, for the model card. A failed check throws InternalError naming the criterion that
// failed and what to try, and leaves no model.int8.onnx and no check file in `dir` (model.onnx stays).
//
// Why ±63 (7 bits) and not ±127: ONNX Runtime multiplies u8·s8 on AVX2 CPUs without VNNI with vpmaddubsw, which
// adds the two products of each pair (k, k+1) into an int16 with saturation. 255·127·2 = 64770 saturates (its
// issues #6004, #5849, #14642: the check failed on 4 of 5 small models on such a CPU); 255·63·2 = 32130 never
// does, so the file computes the exact int32 product on every CPU, as VNNI does. tools/ort_avx2_model.py checks a
// file against a numpy model of that kernel.
struct Int8ExportCheck {
  std::map<std::string, double> fp32, int8, onnx_int8;
  double agreement = 0;  // share of examples with the same prediction (1 for regression)
  double max_abs_logit_diff = 0;  // ONNX Runtime int8 against headprune int8
  double tolerance = 0;  // kInt8LogitTolerance × max |fp32 logit|
  long examples = 0;
  int weight_max = 0;  // the int8 weights' range of both models (kPortableInt8WeightMax)
};
// The two runtimes' float32 operations (LayerNorm, GELU, softmax) differ in the last bits, and where an
// activation lies on a rounding boundary of its row's int8 grid that moves it by one step. On the fine-tuned
// MiniLM (SST-2 dev) the largest logit difference measured was 2.1% of the largest |logit|; the bound is 10%.
inline constexpr double kInt8LogitTolerance = 0.1;
inline constexpr double kInt8MinAgreement = 0.995;
// The check's bounds; tests pass impossible ones to see a failed check leave nothing behind.
struct Int8CheckLimits {
  double min_agreement = kInt8MinAgreement;  // share of examples with the same prediction
  double logit_tolerance = kInt8LogitTolerance;  // × max |fp32 logit|
};
Int8ExportCheck export_onnx_int8(const core::Bert& model, const std::string& dir, const core::TaskSpec& task,
                                 const core::EncodedDataset& data, const std::vector<core::Batch>& batches,
                                 const Int8CheckLimits& limits = {});

// `prune export --int8` of a sentence-transformers folder: dir/model.int8.onnx, dir/model.onnx (the encoder with
// its pooling and Normalize, export_sentence_onnx) with the classifier's int8 scheme (above: weights s8 in ±63 per
// output channel, activations u8 per row, MatMulInteger; pooling and Normalize float32), checked before the command
// succeeds on `texts` against `enc` at int8 in headprune with the same weights: the mean cosine of their embeddings
// at least `mean_cosine`, the lowest at least `min_cosine`. Returns the cosines of both int8 models' embeddings to headprune's float32 ones, for
// the model card. A failed check throws InternalError and leaves no model.int8.onnx and no check file in `dir`.
struct SentenceInt8Check {
  long sentences = 0;
  int weight_max = 0;
  double int8_to_fp32 = 0, onnx_int8_to_fp32 = 0;  // mean cosine of each int8 model's embeddings to float32's
  double min_onnx_to_int8 = 0, mean_onnx_to_int8 = 0;  // ONNX Runtime int8 to headprune int8 (the check)
  double max_abs_diff = 0;  // ONNX Runtime int8 against headprune int8, any component
};
// The two runtimes' float32 LayerNorm, GELU and softmax differ in the last bits, moving an activation on a rounding
// boundary of its row's int8 grid by one step, and six layers carry such steps on: on all-MiniLM-L6-v2 (3,000 STS-B
// dev sentences) the lowest cosine measured was 0.996 and the mean 0.99972, where int8 against float32 is 0.9977: a
// graph left float32, or quantised another way, fails the mean.
inline constexpr double kSentenceInt8MinCosine = 0.99;
inline constexpr double kSentenceInt8MeanCosine = 0.999;
SentenceInt8Check export_sentence_onnx_int8(const eval::SentenceEncoder& enc, const std::string& dir,
                                            const std::vector<std::string>& texts,
                                            double min_cosine = kSentenceInt8MinCosine,
                                            double mean_cosine = kSentenceInt8MeanCosine);

// The frontiers' ONNX Runtime reference points (`prune --max-drop`, tools/ort_reference.py): the model folder
// `model_dir` exported to ONNX (float32; with `sentence`, the sentence-transformers chain to its embedding) and
// quantised by ONNX Runtime's own quantize_dynamic (int8 weights per output channel, u8 activations at run time),
// each run on `data`'s rows — their outputs (logits [N, C], or embeddings [N, D]) in data's order, for the caller
// to score with headprune's metric code — and timed at batch x seq (median ms). Its files go to `work_dir`, and a
// finished reference there is read back (a resumed run does not measure again). Empty, with `skipped` saying why in
// one clause, when the reference Python is missing or incomplete or has no onnxruntime; any other failure is
// InputError with the command.
struct OrtReference {
  torch::Tensor fp32, int8;  // outputs on data's rows
  double fp32_ms = 0, int8_ms = 0;
  std::string version;  // onnxruntime's
};
std::optional<OrtReference> ort_reference(const std::string& model_dir, const core::EncodedDataset& data, long batch,
                                          long seq, bool sentence, const std::string& work_dir, std::string* skipped);

}  // namespace hp::prune
