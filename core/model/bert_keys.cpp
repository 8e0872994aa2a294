// The BERT key table (see core/model/bert_keys.h).
#include "core/model/bert_keys.h"

#include "core/model/arch.h"
#include "core/model/bert_config.h"
#include "core/base/errors.h"  // InternalError

namespace hp::core {

namespace {

using D = Dim;
using A = HeadAxis;

// The embeddings (and ELECTRA's projection up to the encoder's width).
std::vector<KeySpec> embedding_keys() {
  return {
      {"emb.word", "embeddings.word_embeddings.weight", false, {D::kVocab, D::kEmbed}, A::kNone, Part::kEncoder, true},
      {"emb.pos",
       "embeddings.position_embeddings.weight",
       false,
       {D::kPositions, D::kEmbed},
       A::kNone,
       Part::kEncoder,
       true},
      {"emb.type",
       "embeddings.token_type_embeddings.weight",
       false,
       {D::kTypes, D::kEmbed},
       A::kNone,
       Part::kEncoder,
       true},
      {"emb.ln.w", "embeddings.LayerNorm.weight", false, {D::kEmbed}, A::kNone, Part::kEncoder, true},
      {"emb.ln.b", "embeddings.LayerNorm.bias", false, {D::kEmbed}, A::kNone, Part::kEncoder, true},
      // ELECTRA: embeddings narrower than the encoder, projected up after their LayerNorm.
      {"emb.proj.w", "embeddings_project.weight", false, {D::kHidden, D::kEmbed}, A::kNone, Part::kEncoder, true},
      {"emb.proj.b", "embeddings_project.bias", false, {D::kHidden}, A::kNone, Part::kEncoder, true},
  };
}

// One encoder layer's tensors ("{}" = the layer index).
std::vector<KeySpec> layer_keys() {
  return {
      {"attn.q.w",
       "encoder.layer.{}.attention.self.query.weight",
       true,
       {D::kHeads, D::kHidden},
       A::kRows,
       Part::kEncoder,
       true},
      {"attn.q.b", "encoder.layer.{}.attention.self.query.bias", true, {D::kHeads}, A::kRows, Part::kEncoder, true},
      {"attn.k.w",
       "encoder.layer.{}.attention.self.key.weight",
       true,
       {D::kHeads, D::kHidden},
       A::kRows,
       Part::kEncoder,
       true},
      {"attn.k.b", "encoder.layer.{}.attention.self.key.bias", true, {D::kHeads}, A::kRows, Part::kEncoder, true},
      {"attn.v.w",
       "encoder.layer.{}.attention.self.value.weight",
       true,
       {D::kHeads, D::kHidden},
       A::kRows,
       Part::kEncoder,
       true},
      {"attn.v.b", "encoder.layer.{}.attention.self.value.bias", true, {D::kHeads}, A::kRows, Part::kEncoder, true},
      {"attn.o.w",
       "encoder.layer.{}.attention.output.dense.weight",
       true,
       {D::kHidden, D::kHeads},
       A::kCols,
       Part::kEncoder,
       true},
      {"attn.o.b", "encoder.layer.{}.attention.output.dense.bias", true, {D::kHidden}, A::kNone, Part::kEncoder, true},
      {"attn.ln.w",
       "encoder.layer.{}.attention.output.LayerNorm.weight",
       true,
       {D::kHidden},
       A::kNone,
       Part::kEncoder,
       true},
      {"attn.ln.b",
       "encoder.layer.{}.attention.output.LayerNorm.bias",
       true,
       {D::kHidden},
       A::kNone,
       Part::kEncoder,
       true},
      {"ffn.in.w",
       "encoder.layer.{}.intermediate.dense.weight",
       true,
       {D::kInter, D::kHidden},
       A::kNone,
       Part::kEncoder,
       true},
      {"ffn.in.b", "encoder.layer.{}.intermediate.dense.bias", true, {D::kInter}, A::kNone, Part::kEncoder, true},
      {"ffn.out.w",
       "encoder.layer.{}.output.dense.weight",
       true,
       {D::kHidden, D::kInter},
       A::kNone,
       Part::kEncoder,
       true},
      {"ffn.out.b", "encoder.layer.{}.output.dense.bias", true, {D::kHidden}, A::kNone, Part::kEncoder, true},
      {"ffn.ln.w", "encoder.layer.{}.output.LayerNorm.weight", true, {D::kHidden}, A::kNone, Part::kEncoder, true},
      {"ffn.ln.b", "encoder.layer.{}.output.LayerNorm.bias", true, {D::kHidden}, A::kNone, Part::kEncoder, true},
  };
}

// The classification head: BERT's pooler and classifier.
std::vector<KeySpec> head_keys() {
  return {
      {"pool.w", "pooler.dense.weight", false, {D::kPooled, D::kHidden}, A::kNone, Part::kPooler, false},
      {"pool.b", "pooler.dense.bias", false, {D::kPooled}, A::kNone, Part::kPooler, false},
      {"cls.w", "classifier.weight", false, {D::kLabels, D::kPooled}, A::kNone, Part::kClassifier, false},
      {"cls.b", "classifier.bias", false, {D::kLabels}, A::kNone, Part::kClassifier, false},
  };
}

}  // namespace

const std::vector<KeySpec>& bert_key_table() {
  // The order is the order of model.safetensors written by export; keep it stable.
  static const std::vector<KeySpec> table = [] {
    std::vector<KeySpec> t = embedding_keys();
    for (auto part : {layer_keys(), head_keys()}) t.insert(t.end(), part.begin(), part.end());
    return t;
  }();
  return table;
}

namespace {
// `pattern` with its "{}" replaced by the layer index.
std::string with_layer(std::string pattern, int layer) {
  size_t at = pattern.find("{}");
  if (at != std::string::npos) pattern.replace(at, 2, std::to_string(layer));
  return pattern;
}
}  // namespace

std::string hf_key(const KeySpec& spec, int layer) { return with_layer(spec.hf, layer); }

std::vector<long> key_shape(const KeySpec& spec, const BertConfig& cfg, int layer) {
  std::vector<long> shape;
  for (Dim d : spec.shape) {
    switch (d) {
      case Dim::kVocab: shape.push_back(cfg.vocab_size); break;
      case Dim::kPositions: shape.push_back(cfg.max_position_embeddings); break;
      case Dim::kTypes: shape.push_back(cfg.type_vocab_size); break;
      case Dim::kEmbed: shape.push_back(cfg.embedding_width()); break;
      case Dim::kHidden: shape.push_back(cfg.hidden_size); break;
      case Dim::kInter: shape.push_back(cfg.ffn_width(layer)); break;
      case Dim::kHeads: shape.push_back(static_cast<long>(cfg.heads_in_layer(layer)) * cfg.head_dim()); break;
      case Dim::kPooled: shape.push_back(cfg.classifier_width()); break;
      case Dim::kLabels: shape.push_back(cfg.num_labels); break;
    }
  }
  return shape;
}

int axis_of(const KeySpec& spec, Dim d) {
  for (size_t i = 0; i < spec.shape.size(); ++i)
    if (spec.shape[i] == d) return static_cast<int>(i);
  return -1;
}

const std::vector<std::pair<std::string, std::string>>& legacy_renames() {
  static const std::vector<std::pair<std::string, std::string>> renames = {
      {"LayerNorm.gamma", "LayerNorm.weight"},
      {"LayerNorm.beta", "LayerNorm.bias"},
  };
  return renames;
}

bool is_ignored_key(const Arch& arch, const std::string& key) {
  auto ends_with = [&](const std::string& s) {
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  };
  for (const auto& head : arch.ignored_prefixes)
    if (key.rfind(head, 0) == 0) return true;
  return ends_with("position_ids") || ends_with("embeddings.token_type_ids");
}

std::vector<KeySpec> model_keys(const BertConfig& cfg) {
  const Arch& arch = arch_of(cfg.model_type);
  std::vector<KeySpec> keys;
  for (const auto& spec : bert_key_table()) {
    const std::string name = spec.name;
    if (name == "emb.type" && !arch.token_types) continue;
    if (name.rfind("emb.proj.", 0) == 0 && cfg.embedding_width() == cfg.hidden_size) continue;
    if (spec.part == Part::kPooler && cfg.head == Head::kToken) continue;
    keys.push_back(spec);
  }
  return keys;
}

std::string stored_key(const Arch& arch, const KeySpec& spec, int layer, const std::string& prefix, Head head) {
  if (head == Head::kToken && spec.part == Part::kClassifier) return hf_key(spec, layer);
  for (const auto& k : arch.keys)
    if (std::string(k.name) == spec.name) return (k.prefixed ? prefix : "") + with_layer(k.hf, layer);
  return (spec.part == Part::kClassifier ? "" : prefix) + hf_key(spec, layer);
}

}  // namespace hp::core
