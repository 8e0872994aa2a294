// The inputs of a Hugging Face golden file (tests/golden/make_goldens.py) as an encoded dataset: padding
// stripped, with the golden labels (or another dataset of the file named by `labels`).
#pragma once

#include <string>
#include <vector>

#include "core/data/batching.h"
#include "core/io/tensor_io.h"

namespace hp::test {

inline core::EncodedDataset golden_dataset(core::TensorMap& g, const std::string& labels = "labels") {
  core::EncodedDataset d;
  auto ids = g.at("input_ids"), types = g.at("token_type_ids"), mask = g.at("attention_mask");
  for (int64_t i = 0; i < ids.size(0); ++i) {
    const long n = mask[i].sum().item<long>();
    std::vector<int32_t> a, t;
    for (long j = 0; j < n; ++j)
      a.push_back(static_cast<int32_t>(ids[i][j].item<long>())),
          t.push_back(static_cast<int32_t>(types[i][j].item<long>()));
    d.ids.push_back(a);
    d.type_ids.push_back(t);
    d.labels.push_back(static_cast<float>(g.at(labels)[i].item<double>()));
  }
  d.has_labels = true;
  return d;
}

}  // namespace hp::test
