// Reading and writing config.json (see core/model/bert_config.h). Torch-free.
#include "core/model/bert_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "core/base/errors.h"  // CheckpointError
#include "core/model/arch.h"
#include "core/model/bert_keys.h"

namespace hp::core {

using nlohmann::json;

int BertConfig::heads_in_layer(int l) const {
  auto it = pruned_heads.find(l);
  return num_attention_heads - (it == pruned_heads.end() ? 0 : static_cast<int>(it->second.size()));
}

std::vector<int> BertConfig::kept_heads(int l) const {
  std::vector<int> kept;
  auto it = pruned_heads.find(l);
  for (int h = 0; h < num_attention_heads; ++h) {
    bool pruned = false;
    if (it != pruned_heads.end())
      for (int p : it->second) pruned = pruned || p == h;
    if (!pruned) kept.push_back(h);
  }
  return kept;
}

namespace {

// The sum and the largest of a per-layer count over a config's layers.
template <class Count>
std::pair<int, int> sum_and_max(int layers, Count count) {
  int sum = 0, max = 0;
  for (int l = 0; l < layers; ++l) sum += count(l), max = std::max(max, count(l));
  return {sum, max};
}

}  // namespace

int BertConfig::total_heads() const {
  return sum_and_max(num_hidden_layers, [this](int l) { return heads_in_layer(l); }).first;
}

int BertConfig::max_heads() const {
  return sum_and_max(num_hidden_layers, [this](int l) { return heads_in_layer(l); }).second;
}

int BertConfig::ffn_width(int l) const {
  return intermediate_sizes.empty() ? intermediate_size : intermediate_sizes.at(static_cast<size_t>(l));
}

int BertConfig::total_neurons() const {
  return sum_and_max(num_hidden_layers, [this](int l) { return ffn_width(l); }).first;
}

int BertConfig::max_ffn_width() const {
  return sum_and_max(num_hidden_layers, [this](int l) { return ffn_width(l); }).second;
}

namespace {

// The integer sizes of config.json with the range each must lie in: checked before anything is allocated
// (a 10^9 hidden size, or 10^12 read through a 32-bit int, must fail here and not in the allocator).
struct IntField {
  const char* key;
  int BertConfig::*field;
  long long lo, hi;
  bool required;  // else the BertConfig default stays
};
const IntField kIntFields[] = {
    {"vocab_size", &BertConfig::vocab_size, 1, 10'000'000, true},
    {"hidden_size", &BertConfig::hidden_size, 1, 65'536, true},
    {"embedding_size", &BertConfig::embedding_size, 1, 65'536, false},
    {"num_hidden_layers", &BertConfig::num_hidden_layers, 1, 1'000, true},
    {"num_attention_heads", &BertConfig::num_attention_heads, 1, 4'096, true},
    {"intermediate_size", &BertConfig::intermediate_size, 1, 1'048'576, true},
    {"max_position_embeddings", &BertConfig::max_position_embeddings, 1, 1'048'576, false},
    {"type_vocab_size", &BertConfig::type_vocab_size, 1, 1'000'000, false},
    {"pad_token_id", &BertConfig::pad_token_id, 0, 9'999'999, false},
    {"head_dim", &BertConfig::attention_head_size, 1, 65'536, false},
    {"classifier_hidden_size", &BertConfig::classifier_hidden_size, 1, 65'536, false},
};

// Floating-point fields, each in [0, 1) or, when `positive`, in (0, 1).
struct RealField {
  const char* key;
  double BertConfig::*field;
  bool positive;
};
const RealField kRealFields[] = {
    {"layer_norm_eps", &BertConfig::layer_norm_eps, true},
    {"hidden_dropout_prob", &BertConfig::hidden_dropout_prob, false},
    {"attention_probs_dropout_prob", &BertConfig::attention_probs_dropout_prob, false},
};

void read_int_field(const json& j, const IntField& f, BertConfig& c, const std::string& path) {
  const char* key = config_key(arch_of(c.model_type), f.key);
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (f.required)
      throw CheckpointError(path + ": required key '" + key + "' is missing; add it from the model's config class");
    return;
  }
  const bool integral =
      it->is_number_integer() || (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>());
  if (!integral) throw CheckpointError(path + ": " + key + " = " + it->dump() + " is not an integer; fix config.json");
  const double v = it->get<double>();  // exact for every integer in range, and compares right beyond it
  if (v < static_cast<double>(f.lo) || v > static_cast<double>(f.hi))
    throw CheckpointError(path + ": " + key + " = " + it->dump() + " is outside " + std::to_string(f.lo) + ".." +
                          std::to_string(f.hi) + "; fix config.json");
  c.*f.field = static_cast<int>(v);
}

void read_real_field(const json& j, const RealField& f, BertConfig& c, const std::string& path) {
  const char* key = config_key(arch_of(c.model_type), f.key);
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number())
    throw CheckpointError(path + ": " + key + " = " + it->dump() + " is not a number; fix config.json");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || (f.positive && v == 0) || v >= 1)
    throw CheckpointError(path + ": " + key + " = " + it->dump() + " is outside " + (f.positive ? "(0, 1)" : "[0, 1)") +
                          "; fix config.json");
  c.*f.field = v;
}

// j[key] as T, `fallback` when absent or null; a value of another type is an error naming the key.
template <class T>
T get_or(const json& j, const char* key, T fallback, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw CheckpointError(path + ": " + key + " = " + it->dump() + " has the wrong type; compare with HF BertConfig");
  }
}

// A JSON object key that must be a non-negative decimal integer ("0", "11"); -1 otherwise.
long integer_key(const std::string& k) {
  if (k.empty() || k.size() > 9 || !std::all_of(k.begin(), k.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return -1;
  return std::stol(k);
}

// config.intermediate_sizes: absent, or one width in 0..intermediate_size per layer.
void check_ffn_widths(const BertConfig& c, const std::string& path) {
  if (c.intermediate_sizes.empty()) return;
  if (static_cast<int>(c.intermediate_sizes.size()) != c.num_hidden_layers)
    throw CheckpointError(path + ": intermediate_sizes has " + std::to_string(c.intermediate_sizes.size()) +
                          " entries for " + std::to_string(c.num_hidden_layers) +
                          " layers; give one FFN width per layer (or remove the key)");
  for (size_t l = 0; l < c.intermediate_sizes.size(); ++l)
    if (c.intermediate_sizes[l] < 0 || c.intermediate_sizes[l] > c.intermediate_size)
      throw CheckpointError(path + ": intermediate_sizes[" + std::to_string(l) +
                            "] = " + std::to_string(c.intermediate_sizes[l]) + " is outside 0.." +
                            std::to_string(c.intermediate_size) + " (intermediate_size); fix config.json");
}

// id2label / num_labels, and what an export records of its shape: pruned_heads and intermediate_sizes.
void read_labels_and_layout(const json& j, BertConfig& c, const std::string& path) {
  if (j.contains("id2label") && j["id2label"].is_object()) {
    c.id2label.resize(j["id2label"].size());
    for (auto& [k, v] : j["id2label"].items()) {
      const long idx = integer_key(k);
      if (idx < 0 || idx >= static_cast<long>(c.id2label.size()))
        throw CheckpointError(path + ": id2label has id '" + k + "'; use the ids 0.." +
                              std::to_string(c.id2label.size() - 1));
      c.id2label[static_cast<size_t>(idx)] = v.get<std::string>();
    }
    c.num_labels = static_cast<int>(c.id2label.size());
  }
  c.num_labels = get_or(j, "num_labels", c.num_labels, path);
  if (c.num_labels < 1 || c.num_labels > 1'000'000)
    throw CheckpointError(path + ": num_labels = " + std::to_string(c.num_labels) +
                          " is outside 1..1000000; fix config.json");
  if (j.contains("pruned_heads") && j["pruned_heads"].is_object())
    for (auto& [k, v] : j["pruned_heads"].items()) {
      const long layer = integer_key(k);
      if (layer < 0)
        throw CheckpointError(path + ": pruned_heads key '" + k + "' is not a layer number; fix config.json");
      auto heads = v.get<std::vector<int>>();
      std::sort(heads.begin(), heads.end());
      c.pruned_heads[static_cast<int>(layer)] = heads;
    }
  if (j.contains("intermediate_sizes") && !j["intermediate_sizes"].is_null())
    c.intermediate_sizes = j["intermediate_sizes"].get<std::vector<int>>();
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a.is_string() && a.get<std::string>().find("ForTokenClassification") != std::string::npos)
        c.head = Head::kToken;
}

// The checks across keys, once every key is read.
void check_consistency(const BertConfig& c, const std::string& path) {
  if (c.pad_token_id >= c.vocab_size)
    throw CheckpointError(path + ": pad_token_id " + std::to_string(c.pad_token_id) + " is not below vocab_size " +
                          std::to_string(c.vocab_size) + "; fix config.json");
  if (c.hidden_slimmed() && c.attention_head_size == 0)
    throw CheckpointError(path + ": classifier_hidden_size " + std::to_string(c.classifier_hidden_size) +
                          " differs from hidden_size " + std::to_string(c.hidden_size) +
                          " (hidden channels removed) but head_dim is missing; add head_dim (the unpruned model's hidden_size / "
                          "num_attention_heads)");
  if (c.num_attention_heads <= 0 || (c.attention_head_size == 0 && c.hidden_size % c.num_attention_heads != 0))
    throw CheckpointError(path + ": hidden_size " + std::to_string(c.hidden_size) +
                          " is not divisible by num_attention_heads " + std::to_string(c.num_attention_heads) +
                          "; fix config.json");
  // Positions that cannot hold [CLS] a [SEP] are config.json's fault, whatever --max-seq-len asks for. RoBERTa's
  // positions start after padding_idx (core/io/checkpoint.h, check_max_seq_len).
  const int offset = arch_of(c.model_type).positions == Positions::kAfterPadding ? c.pad_token_id + 1 : 0;
  if (c.max_position_embeddings - offset < 3)
    throw CheckpointError(path + ": max_position_embeddings = " + std::to_string(c.max_position_embeddings) +
                          " leaves " + std::to_string(std::max(c.max_position_embeddings - offset, 0)) +
                          " usable positions" +
                          (offset ? " (" + c.model_type + "'s positions start after padding_idx " +
                                        std::to_string(c.pad_token_id) + ")"
                                  : std::string()) +
                          ", fewer than the shortest input's 3 ([CLS] a [SEP]); set it to at least " +
                          std::to_string(offset + 3) + " in config.json (" +
                          (offset ? "roberta-base has 514" : "bert-base has 512") + ")");
  for (const auto& [l, heads] : c.pruned_heads)
    for (int h : heads)
      if (l < 0 || l >= c.num_hidden_layers || h < 0 || h >= c.num_attention_heads)
        throw CheckpointError(path + ": pruned_heads names layer " + std::to_string(l) + " head " + std::to_string(h) +
                              ", outside the model's " + std::to_string(c.num_hidden_layers) + " x " +
                              std::to_string(c.num_attention_heads) + " heads; fix config.json");
  check_ffn_widths(c, path);
}

}  // namespace

std::string head_class(const std::string& sequence_class, Head head) {
  if (head == Head::kSequence) return sequence_class;
  const std::string seq = "ForSequenceClassification";
  return sequence_class.substr(0, sequence_class.find(seq)) + "ForTokenClassification";
}

BertConfig parse_bert_config(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw CheckpointError(path + ": invalid JSON (" + std::string(e.what()) +
                          "); re-save the model with save_pretrained");
  }
  if (!j.is_object())
    throw CheckpointError(path + ": holds a JSON " + std::string(j.type_name()) +
                          ", not an object; re-save the model with save_pretrained");
  BertConfig c;
  try {
    c.model_type = get_or<std::string>(j, "model_type", "", path);
    const Arch& arch = arch_of(c.model_type, path);
    c.pad_token_id = arch.default_pad_token_id;
    c.layer_norm_eps = arch.default_layer_norm_eps;
    for (const auto& f : kIntFields) read_int_field(j, f, c, path);
    for (const auto& f : kRealFields) read_real_field(j, f, c, path);
    c.sinusoidal_pos_embds = get_or(j, "sinusoidal_pos_embds", false, path);
    // Absent or null: -1, the head takes hidden_dropout_prob. A value given must lie in [0, 1), as for
    // nn.Dropout (a negative one was taken for "unset" before).
    const char* cd_key = config_key(arch, "classifier_dropout");
    c.classifier_dropout = get_or(j, cd_key, -1.0, path);
    if (j.contains(cd_key) && !j[cd_key].is_null() && !(c.classifier_dropout >= 0 && c.classifier_dropout < 1))
      throw CheckpointError(path + ": " + cd_key + " = " + j[cd_key].dump() +
                            " is outside [0, 1); fix config.json (null: use hidden_dropout_prob)");
    c.hidden_act = get_or<std::string>(j, config_key(arch, "hidden_act"), "gelu", path);
    if (!supported_activation(c.hidden_act))
      throw CheckpointError(path + ": hidden_act '" + c.hidden_act + "' is not supported; " + kSupportedActivations);
    std::string pos = get_or<std::string>(j, "position_embedding_type", "absolute", path);
    if (pos != "absolute")
      throw CheckpointError(path + ": position_embedding_type '" + pos + "' is not supported; only \"absolute\"");
    read_labels_and_layout(j, c, path);
  } catch (const json::exception& e) {
    throw CheckpointError(path + ": a key has the wrong type (" + std::string(e.what()) +
                          "); compare with HF BertConfig");
  }
  check_consistency(c, path);
  return c;
}

BertConfig read_bert_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": cannot read config.json; point --model at a Hugging Face model folder");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_bert_config(text.str(), path);
}

namespace {

// The architecture's own description for the modeling file of a slimmed export (core/io/hf/modeling_headprune.py):
// its tensor names (the key table through stored_key) and how it differs from BERT, so that one Python file
// builds every architecture from the same rows the C++ model reads.
json layout_json(const BertConfig& c, const Arch& arch) {
  json names = json::object();
  const std::string prefix = arch.prefixes.front();
  for (const auto& spec : model_keys(c)) {
    // Per-layer names with "{}" for the layer index, as the key table writes them.
    std::string name = stored_key(arch, spec, 999999, prefix, c.head);
    if (spec.per_layer) name.replace(name.find("999999"), 6, "{}");
    names[spec.name] = name;
  }
  const json sizes = {{"vocab_size", c.vocab_size},
                      {"embedding_size", c.embedding_width()},
                      {"hidden_size", c.hidden_size},
                      {"head_dim", c.head_dim()},
                      {"classifier_hidden_size", c.classifier_width()},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"num_attention_heads", c.num_attention_heads},
                      {"intermediate_size", c.intermediate_size},
                      {"max_position_embeddings", c.max_position_embeddings},
                      {"type_vocab_size", c.type_vocab_size},
                      {"pad_token_id", c.pad_token_id},
                      {"layer_norm_eps", c.layer_norm_eps},
                      {"hidden_dropout_prob", c.hidden_dropout_prob},
                      {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
                      {"classifier_dropout", c.classifier_dropout >= 0 ? c.classifier_dropout : c.hidden_dropout_prob},
                      {"hidden_act", c.hidden_act},
                      {"num_labels", c.num_labels}};
  return {{"tensors", names},
          {"sizes", sizes},
          {"base_model_prefix", prefix.substr(0, prefix.size() - 1)},
          {"positions_after_padding", arch.positions == Positions::kAfterPadding},
          {"token_types", arch.token_types},
          {"head_act", arch.head_act},
          {"token_head", c.head == Head::kToken},
          {"dropout_before_head", arch.dropout_before_head},
          {"attention_output_dropout", arch.attention_output_dropout}};
}

}  // namespace

std::string bert_config_json(const BertConfig& c) {
  const Arch& arch = arch_of(c.model_type);
  auto key = [&](const char* field) { return config_key(arch, field); };
  json j;
  const std::string classifier = head_class(arch.classifier_class, c.head);
  j["architectures"] = {classifier};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j[key("hidden_size")] = c.hidden_size;
  if (c.embedding_size > 0) j["embedding_size"] = c.embedding_size;
  j[key("num_hidden_layers")] = c.num_hidden_layers;
  j[key("num_attention_heads")] = c.num_attention_heads;
  j[key("intermediate_size")] = c.intermediate_size;
  if (c.hidden_slimmed()) j["head_dim"] = c.head_dim(), j["classifier_hidden_size"] = c.classifier_width();
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (arch.token_types) j["type_vocab_size"] = c.type_vocab_size;
  j["pad_token_id"] = c.pad_token_id;
  j[key("layer_norm_eps")] = c.layer_norm_eps;
  j[key("hidden_dropout_prob")] = c.hidden_dropout_prob;
  j[key("attention_probs_dropout_prob")] = c.attention_probs_dropout_prob;
  if (c.classifier_dropout >= 0) j[key("classifier_dropout")] = c.classifier_dropout;
  j[key("hidden_act")] = c.hidden_act;
  if (arch.token_types) j["position_embedding_type"] = "absolute";
  if (c.sinusoidal_pos_embds) j["sinusoidal_pos_embds"] = true;
  json id2label = json::object(), label2id = json::object();
  for (int i = 0; i < c.num_labels; ++i) {
    std::string name = i < static_cast<int>(c.id2label.size()) ? c.id2label[i] : "LABEL_" + std::to_string(i);
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  if (c.num_labels == 1) j["problem_type"] = "regression";
  json pruned = json::object();
  for (const auto& [l, heads] : c.pruned_heads)
    if (!heads.empty()) pruned[std::to_string(l)] = heads;
  j["pruned_heads"] = pruned;
  // The plain per-layer shape form, for readers that do not replay pruned_heads.
  std::vector<int> per_layer;
  for (int l = 0; l < c.num_hidden_layers; ++l) per_layer.push_back(c.heads_in_layer(l));
  j["heads_per_layer"] = per_layer;
  if (c.ffn_slimmed()) {
    std::vector<int> widths;
    for (int l = 0; l < c.num_hidden_layers; ++l) widths.push_back(c.ffn_width(l));
    j["intermediate_sizes"] = widths;
  }
  // transformers 5 ignores pruned_heads: it loads a slimmed folder through the modeling file written
  // beside it (save_bert), with trust_remote_code=True. transformers 4 has BERT locally and keeps using it
  // for heads; per-layer FFN widths (intermediate_sizes) need the modeling file in both.
  if (c.slimmed()) {
    const std::string base = classifier.substr(0, classifier.find(c.head == Head::kToken ? "ForToken" : "ForSequence"));
    const char* auto_class =
        c.head == Head::kToken ? "AutoModelForTokenClassification" : "AutoModelForSequenceClassification";
    j["auto_map"] = {{"AutoModel", "modeling_headprune.Headprune" + base + "Model"},
                     {auto_class, "modeling_headprune.Headprune" + classifier}};
    j["headprune_layout"] = layout_json(c, arch);
  }
  return j.dump(2) + "\n";
}

}  // namespace hp::core
