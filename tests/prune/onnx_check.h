// What the int8 ONNX export tests share (tests/prune/slim_test.cpp, export_folder_test.cpp): examples to check
// on, and tools/ort_avx2_model.py's report on a written model.int8.onnx.
#pragma once

#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/base/files.h"
#include "core/base/process.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "core/model/bert.h"
#include "eval/evaluator.h"
#include "fixtures.h"

namespace hp::test {

// `n` examples of 3 to 40 tokens (random ids, one or two segments), labelled with `model`'s own predictions.
inline hp::core::EncodedDataset int8_check_data(const hp::core::Bert& model, int n) {
  torch::manual_seed(5);
  hp::core::EncodedDataset data;
  for (int i = 0; i < n; ++i) {
    const int len = 3 + i % 38;
    auto ids = torch::randint(5, model.config().vocab_size, {len}, torch::kInt);
    ids[0] = 2;
    data.ids.emplace_back(ids.data_ptr<int32_t>(), ids.data_ptr<int32_t>() + len);
    data.type_ids.emplace_back(len, 0);
    for (int t = len / 2; i % 2 && t < len; ++t) data.type_ids.back()[t] = 1;
  }
  data.labels.assign(n, 0.0f);
  hp::core::BatchOptions bo;
  bo.batch_size = 32;
  const auto fp32 = hp::eval::evaluate(model, hp::core::find_task("mnli_subset"), data,
                                       hp::core::make_batches(data, bo));
  data.labels.assign(fp32.predictions.begin(), fp32.predictions.end());
  data.has_labels = true;
  return data;
}

// tools/ort_avx2_model.py's report (--json) on an int8 ONNX file, run on 32 random sequences of ids below
// `vocab`; null when it could not run (no reference Python or onnxruntime).
inline nlohmann::json avx2_model_report(const std::filesystem::path& onnx, int vocab) {
  const std::string py = hp::core::python_reference();
  if (!std::filesystem::exists(py)) return nullptr;
  const std::string out = onnx.string() + ".avx2.json";
  const int rc = hp::core::run_program({py, kSourceDir + "/tools/ort_avx2_model.py", onnx.string(), "--vocab",
                                        std::to_string(vocab), "--seq", "40", "--json", out});
  if (rc != 0 && rc != 1) return nullptr;
  auto report = nlohmann::json::parse(hp::core::read_file(out));
  std::filesystem::remove(out);
  return report;
}

}  // namespace hp::test
