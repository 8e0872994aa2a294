// The checkpoint key table: every tensor of a BERT encoder + classifier, its Hugging Face name,
// shape (in symbolic dims) and which axis holds the heads. The loader (core/checkpoint), the model
// (core/bert), slimming and export all iterate this one table; a BERT variant is new rows, not new code.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hp::core {

struct BertConfig;

// Symbolic dimensions. kHeads = this layer's heads × head_dim (shrinks when heads are pruned); kInter = this
// layer's FFN width (shrinks when neurons are pruned).
enum class Dim { kVocab, kPositions, kTypes, kHidden, kInter, kHeads, kLabels };
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

// The HF name of `spec` for layer `layer` (ignored when !per_layer).
std::string hf_key(const KeySpec& spec, int layer);

// Concrete shape of `spec` in layer `layer` under `cfg`.
std::vector<long> key_shape(const KeySpec& spec, const BertConfig& cfg, int layer);

// The axis of `spec` that has dimension `d` (0 rows, 1 columns), or -1: the FFN tensors' neuron axis is
// axis_of(spec, Dim::kInter).
int axis_of(const KeySpec& spec, Dim d);

// Legacy names mapped to current ones (TF-era "LayerNorm.gamma" → "LayerNorm.weight").
const std::vector<std::pair<std::string, std::string>>& legacy_renames();

// Keys a BERT checkpoint may hold that the encoder does not use (MLM/NSP heads, position_ids buffers).
bool is_ignored_key(const std::string& key);

// Prefixes under which encoder keys appear, tried in this order: BertForX ("bert."), BertModel and
// sentence-transformers (""), and sentence-transformers' nested layout ("0.auto_model.").
const std::vector<std::string>& encoder_prefixes();

}  // namespace hp::core
