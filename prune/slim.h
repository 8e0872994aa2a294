// Physical head removal: a slimmed model whose Q, K, V rows and output-projection columns of pruned
// heads are gone (driven by the head axis column of core/model/bert_keys.h). A layer left with 0 heads keeps
// only the output bias on its residual path. config.pruned_heads records the removed heads by their
// original indices (Hugging Face re-prunes from it); core/io/checkpoint.h also writes heads_per_layer.
// dense_model goes back to the original shapes with the removed heads zeroed.
#pragma once

#include "core/model/bert.h"
#include "core/model/head_mask.h"

namespace hp::prune {

// keep[l][h] indexes the heads present in `model` (position h of layer l); entries past a layer's
// head count are ignored. The result shares no storage with `model`.
core::Bert slim_model(const core::Bert& model, const core::HeadSet& keep);

// The dense fallback of a slimmed model (`prune export --dense`): the original shapes, with each removed
// head's query, key and value rows and biases and its output-projection columns zero, and no
// pruned_heads in the config, so any BERT loader reads it. A removed head's values are zero, so its
// context is zero whatever it attends to, and its zero output columns add nothing: the logits are the
// slimmed model's. No speedup. A model without removed heads comes back unchanged.
core::Bert dense_model(const core::Bert& slim);

}  // namespace hp::prune
