// sentence-transformers' Pooling module as data (torch-free): which modes it concatenates, in its order, and the
// width it was made for. Read from a folder by core/io/sentence_model.h; computed by core/model/pooling.h.
#pragma once

#include <vector>

namespace hp::core {

// sentence-transformers' pooling modes, in the order its Pooling module concatenates them.
enum class PoolingMode { kCls, kMax, kMean, kMeanSqrtLen, kWeightedMean, kLastToken };
// "cls", "max", "mean", "mean_sqrt_len", "weightedmean", "lasttoken".
inline const char* pooling_mode_name(PoolingMode m) {
  switch (m) {
    case PoolingMode::kCls: return "cls";
    case PoolingMode::kMax: return "max";
    case PoolingMode::kMean: return "mean";
    case PoolingMode::kMeanSqrtLen: return "mean_sqrt_len";
    case PoolingMode::kWeightedMean: return "weightedmean";
    case PoolingMode::kLastToken: return "lasttoken";
  }
  return "?";
}

struct SentencePooling {
  std::vector<PoolingMode> modes;  // at least one, in concatenation order
  int dimension = 0;  // word_embedding_dimension: the encoder's hidden size it was made for
  bool include_prompt = true;
};

}  // namespace hp::core
