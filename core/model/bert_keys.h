// The checkpoint key table: every tensor of a BERT-family encoder + classifier, its Hugging Face BERT name
// (the name the model computes with, whatever the architecture), shape (in symbolic dims) and which axis holds
// the heads. The loader (core/io/checkpoint), the model (core/model/bert), slimming and export all iterate this
// one table; another architecture's names are its row of core/model/arch.h (stored_key), not new code.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/model/bert_config.h"  // Head

namespace hp::core {

struct Arch;

// Symbolic dimensions. kEmbed = the embeddings' width (ELECTRA's embedding_size; hidden_size elsewhere). kHeads = this layer's heads × head_dim (shrinks when heads are pruned); kInter = this
// layer's FFN width (shrinks when neurons are pruned).
// kPooled = the classification head's inner width (BERT's pooler output; hidden_size unless hidden channels were
// removed: BertConfig::classifier_width).
enum class Dim { kVocab, kPositions, kTypes, kEmbed, kHidden, kInter, kHeads, kPooled, kLabels };
// Which axis of a tensor indexes heads: rows (Q/K/V weight and bias), columns (output projection).
enum class HeadAxis { kNone, kRows, kCols };
// Encoder keys carry the checkpoint's prefix ("bert." or none); classifier keys never do.
enum class Part { kEncoder, kPooler, kClassifier };

struct KeySpec {
  const char* name;  // short name used in code and messages, e.g. "attn.q.w"
  const char* hf;  // Hugging Face name without prefix; "{}" = layer index
  bool per_layer;
  std::vector<Dim> shape;
  HeadAxis head_axis;
  Part part;
  bool required;  // missing optional keys (pooler, classifier) are initialised fresh
};

const std::vector<KeySpec>& bert_key_table();

// The rows of bert_key_table() that a model of `cfg` holds: no token types where its architecture has none,
// the embedding projection only where embedding_size differs from hidden_size, no pooler under a token head.
std::vector<KeySpec> model_keys(const BertConfig& cfg);

// The name of `spec` (layer `layer`) in a checkpoint of architecture `arch` whose encoder prefix is `prefix`:
// "roberta.encoder.layer.0.attention.self.query.weight", "classifier.out_proj.weight". A token head's classifier is
// "classifier.weight" and "classifier.bias" in every architecture.
std::string stored_key(const Arch& arch, const KeySpec& spec, int layer, const std::string& prefix,
                       Head head = Head::kSequence);

// The HF name of `spec` for layer `layer` (ignored when !per_layer).
std::string hf_key(const KeySpec& spec, int layer);

// Concrete shape of `spec` in layer `layer` under `cfg`.
std::vector<long> key_shape(const KeySpec& spec, const BertConfig& cfg, int layer);

// The axis of `spec` that has dimension `d` (0 rows, 1 columns), or -1: the FFN tensors' neuron axis is
// axis_of(spec, Dim::kInter).
int axis_of(const KeySpec& spec, Dim d);

// Legacy names mapped to current ones (TF-era "LayerNorm.gamma" → "LayerNorm.weight").
const std::vector<std::pair<std::string, std::string>>& legacy_renames();

// Keys a checkpoint of `arch` may hold that the classifier does not use (pretraining heads, position_ids
// buffers).
bool is_ignored_key(const Arch& arch, const std::string& key);

}  // namespace hp::core
