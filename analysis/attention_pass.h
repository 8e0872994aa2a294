// The one streamed pass of `prune analyze`: a forward per batch with the attention maps kept only for
// that batch, every map handed to the per-head accumulators (analysis/head_stats.h), Voita's
// confidence through the pruning criterion's own code, and with labels one backward for Clark's no-op
// gradients (DEFINITIONS §7). Memory O(batch · L · H · S²). Resumable: the accumulators are written
// atomically every few batches and a restarted pass with the same fingerprint continues from there.
#pragma once

#include <torch/types.h>

#include <string>
#include <vector>

#include "analysis/head_stats.h"
#include "core/data/batching.h"
#include "core/model/bert.h"

namespace hp::analysis {

struct PassInput {
  const core::Bert* model = nullptr;
  const core::EncodedDataset* data = nullptr;  // encoded examples (labels used for §7)
  const std::vector<ExampleInfo>* info = nullptr;  // one per example, same order
  torch::Tensor keep;  // [L, Hmax] 1 = head analysed, 0 = masked; undefined = all
  int batch_size = 32;
  int max_len = 128;  // longest possible example (offset histograms)
  bool noop = false;  // one backward per batch for the no-op gradients
  bool regression = false;
  std::string tag = "analyze";  // progress label
  std::string checkpoint;  // file for resume ("" = none)
  std::string fingerprint;  // settings + model identity; a checkpoint with another is ignored
};

// Runs the pass (or finishes it from `checkpoint`). Progress with examples/s and ETA on stderr.
PassResult run_pass(const PassInput& in);

}  // namespace hp::analysis
