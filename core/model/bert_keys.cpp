// The BERT key table (see core/model/bert_keys.h).
#include "core/model/bert_keys.h"

#include "core/model/bert_config.h"
#include "core/base/errors.h"  // InternalError

namespace hp::core {

const std::vector<KeySpec>& bert_key_table() {
  using D = Dim;
  using A = HeadAxis;
  // The order is the order of model.safetensors written by export; keep it stable.
  static const std::vector<KeySpec> table = {
      {"emb.word", "embeddings.word_embeddings.weight", false, {D::kVocab, D::kHidden}, A::kNone, Part::kEncoder, true},
      {"emb.pos",
       "embeddings.position_embeddings.weight",
       false,
       {D::kPositions, D::kHidden},
       A::kNone,
       Part::kEncoder,
       true},
      {"emb.type",
       "embeddings.token_type_embeddings.weight",
       false,
       {D::kTypes, D::kHidden},
       A::kNone,
       Part::kEncoder,
       true},
      {"emb.ln.w", "embeddings.LayerNorm.weight", false, {D::kHidden}, A::kNone, Part::kEncoder, true},
      {"emb.ln.b", "embeddings.LayerNorm.bias", false, {D::kHidden}, A::kNone, Part::kEncoder, true},
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
      {"pool.w", "pooler.dense.weight", false, {D::kHidden, D::kHidden}, A::kNone, Part::kPooler, false},
      {"pool.b", "pooler.dense.bias", false, {D::kHidden}, A::kNone, Part::kPooler, false},
      {"cls.w", "classifier.weight", false, {D::kLabels, D::kHidden}, A::kNone, Part::kClassifier, false},
      {"cls.b", "classifier.bias", false, {D::kLabels}, A::kNone, Part::kClassifier, false},
  };
  return table;
}

std::string hf_key(const KeySpec& spec, int layer) {
  std::string key = spec.hf;
  size_t at = key.find("{}");
  if (at != std::string::npos) key.replace(at, 2, std::to_string(layer));
  return key;
}

std::vector<long> key_shape(const KeySpec& spec, const BertConfig& cfg, int layer) {
  std::vector<long> shape;
  for (Dim d : spec.shape) {
    switch (d) {
      case Dim::kVocab: shape.push_back(cfg.vocab_size); break;
      case Dim::kPositions: shape.push_back(cfg.max_position_embeddings); break;
      case Dim::kTypes: shape.push_back(cfg.type_vocab_size); break;
      case Dim::kHidden: shape.push_back(cfg.hidden_size); break;
      case Dim::kInter: shape.push_back(cfg.ffn_width(layer)); break;
      case Dim::kHeads: shape.push_back(static_cast<long>(cfg.heads_in_layer(layer)) * cfg.head_dim()); break;
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

bool is_ignored_key(const std::string& key) {
  auto ends_with = [&](const std::string& s) {
    return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0;
  };
  return key.rfind("cls.predictions.", 0) == 0 || key.rfind("cls.seq_relationship.", 0) == 0 ||
         ends_with("position_ids") || ends_with("embeddings.token_type_ids");
}

const std::vector<std::string>& encoder_prefixes() {
  static const std::vector<std::string> prefixes = {"bert.", "", "0.auto_model."};
  return prefixes;
}

}  // namespace hp::core
