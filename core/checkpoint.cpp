// Reading and writing Hugging Face BERT folders (see core/checkpoint.h).
#include "core/checkpoint.h"
#include "core/glue.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/bert_keys.h"
#include "core/errors.h"  // CheckpointError
#include "core/files.h"
#include "core/log.h"
#include "core/hf_modeling.h"  // generated from core/hf/modeling_headprune.py
#include "core/tensor_io.h"

namespace hp::core {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// BERT-architecture model types we load. Anything else (roberta, distilbert, …) differs in layout.
const std::set<std::string> kSupportedTypes = {"bert"};

std::string shape_str(const std::vector<long>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string apply_renames(std::string key) {
  for (const auto& [from, to] : legacy_renames()) {
    size_t at = key.find(from);
    if (at != std::string::npos) key.replace(at, from.size(), to);
  }
  return key;
}

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
    {"num_hidden_layers", &BertConfig::num_hidden_layers, 1, 1'000, true},
    {"num_attention_heads", &BertConfig::num_attention_heads, 1, 4'096, true},
    {"intermediate_size", &BertConfig::intermediate_size, 1, 1'048'576, true},
    {"max_position_embeddings", &BertConfig::max_position_embeddings, 1, 1'048'576, false},
    {"type_vocab_size", &BertConfig::type_vocab_size, 1, 1'000'000, false},
    {"pad_token_id", &BertConfig::pad_token_id, 0, 9'999'999, false},
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
  auto it = j.find(f.key);
  if (it == j.end() || it->is_null()) {
    if (f.required) throw CheckpointError(path + ": required key '" + f.key + "' is missing; add it from the model's BertConfig");
    return;
  }
  const bool integral = it->is_number_integer() || (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>());
  if (!integral)
    throw CheckpointError(path + ": " + f.key + " = " + it->dump() + " is not an integer; fix config.json");
  const double v = it->get<double>();  // exact for every integer in range, and compares right beyond it
  if (v < static_cast<double>(f.lo) || v > static_cast<double>(f.hi))
    throw CheckpointError(path + ": " + f.key + " = " + it->dump() + " is outside " + std::to_string(f.lo) + ".." +
                          std::to_string(f.hi) + "; fix config.json");
  c.*f.field = static_cast<int>(v);
}

void read_real_field(const json& j, const RealField& f, BertConfig& c, const std::string& path) {
  auto it = j.find(f.key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_number()) throw CheckpointError(path + ": " + f.key + " = " + it->dump() + " is not a number; fix config.json");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0 || (f.positive && v == 0) || v >= 1)
    throw CheckpointError(path + ": " + f.key + " = " + it->dump() + " is outside " + (f.positive ? "(0, 1)" : "[0, 1)") +
                          "; fix config.json");
  c.*f.field = v;
}

// The first five names, then "… (N in all)": tensor lists in one-line errors.
// "int64 (I64)" for the integer dtypes a checkpoint may hold, as safetensors names them too.
std::string integer_dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kLong: return "int64 (I64)";
    case torch::kInt: return "int32 (I32)";
    case torch::kShort: return "int16 (I16)";
    case torch::kByte: return "uint8 (U8)";
    case torch::kChar: return "int8 (I8)";
    case torch::kBool: return "bool (BOOL)";
    default: return c10::toString(t);
  }
}

std::string first_names(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 5) list += ", … (" + std::to_string(names.size()) + " in all)";
  return list;
}

template <class T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? fallback : it->get<T>();
}

}  // namespace

BertConfig read_bert_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CheckpointError(path + ": cannot read config.json; point --model at a Hugging Face model folder");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw CheckpointError(path + ": invalid JSON (" + std::string(e.what()) + "); re-save the model with save_pretrained");
  }
  BertConfig c;
  c.model_type = get_or<std::string>(j, "model_type", "");
  if (!kSupportedTypes.count(c.model_type))
    throw CheckpointError(path + ": model_type '" + c.model_type +
                          "' is not supported; headprune loads BERT-architecture models (model_type \"bert\")");
  try {
    for (const auto& f : kIntFields) read_int_field(j, f, c, path);
    for (const auto& f : kRealFields) read_real_field(j, f, c, path);
    c.classifier_dropout = get_or(j, "classifier_dropout", -1.0);
    if (c.classifier_dropout >= 1.0 || !std::isfinite(c.classifier_dropout))
      throw CheckpointError(path + ": classifier_dropout = " + std::to_string(c.classifier_dropout) +
                            " is outside [0, 1); fix config.json (null: use hidden_dropout_prob)");
    c.hidden_act = get_or<std::string>(j, "hidden_act", "gelu");
    if (!supported_activation(c.hidden_act))
      throw CheckpointError(path + ": hidden_act '" + c.hidden_act + "' is not supported; " + kSupportedActivations);
    std::string pos = get_or<std::string>(j, "position_embedding_type", "absolute");
    if (pos != "absolute")
      throw CheckpointError(path + ": position_embedding_type '" + pos + "' is not supported; only \"absolute\"");
    if (j.contains("id2label") && j["id2label"].is_object()) {
      c.id2label.resize(j["id2label"].size());
      for (auto& [k, v] : j["id2label"].items()) {
        size_t idx = std::stoul(k);
        if (idx >= c.id2label.size()) throw CheckpointError(path + ": id2label has non-contiguous id " + k + "; use ids 0..N-1");
        c.id2label[idx] = v.get<std::string>();
      }
      c.num_labels = static_cast<int>(c.id2label.size());
    }
    c.num_labels = get_or(j, "num_labels", c.num_labels);
    if (c.num_labels < 1 || c.num_labels > 1'000'000)
      throw CheckpointError(path + ": num_labels = " + std::to_string(c.num_labels) + " is outside 1..1000000; fix config.json");
    if (j.contains("pruned_heads") && j["pruned_heads"].is_object())
      for (auto& [k, v] : j["pruned_heads"].items()) {
        auto heads = v.get<std::vector<int>>();
        std::sort(heads.begin(), heads.end());
        c.pruned_heads[std::stoi(k)] = heads;
      }
  } catch (const json::exception& e) {
    throw CheckpointError(path + ": a key has the wrong type (" + std::string(e.what()) + "); compare with HF BertConfig");
  }
  if (c.pad_token_id >= c.vocab_size)
    throw CheckpointError(path + ": pad_token_id " + std::to_string(c.pad_token_id) + " is not below vocab_size " +
                          std::to_string(c.vocab_size) + "; fix config.json");
  if (c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0)
    throw CheckpointError(path + ": hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
                          std::to_string(c.num_attention_heads) + "; fix config.json");
  for (const auto& [l, heads] : c.pruned_heads)
    for (int h : heads)
      if (l < 0 || l >= c.num_hidden_layers || h < 0 || h >= c.num_attention_heads)
        throw CheckpointError(path + ": pruned_heads names layer " + std::to_string(l) + " head " + std::to_string(h) +
                              ", outside the model's " + std::to_string(c.num_hidden_layers) + " x " +
                              std::to_string(c.num_attention_heads) + " heads; fix config.json");
  return c;
}

std::string bert_config_json(const BertConfig& c) {
  json j;
  j["architectures"] = {"BertForSequenceClassification"};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["type_vocab_size"] = c.type_vocab_size;
  j["pad_token_id"] = c.pad_token_id;
  j["layer_norm_eps"] = c.layer_norm_eps;
  j["hidden_dropout_prob"] = c.hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = c.attention_probs_dropout_prob;
  if (c.classifier_dropout >= 0) j["classifier_dropout"] = c.classifier_dropout;
  j["hidden_act"] = c.hidden_act;
  j["position_embedding_type"] = "absolute";
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
  // transformers 5 ignores pruned_heads: it loads a slimmed folder through the modeling file written
  // beside it (save_bert), with trust_remote_code=True. transformers 4 has BERT locally and keeps using it.
  if (c.slimmed())
    j["auto_map"] = {{"AutoModel", "modeling_headprune.HeadpruneBertModel"},
                     {"AutoModelForSequenceClassification", "modeling_headprune.HeadpruneBertForSequenceClassification"}};
  return j.dump(2) + "\n";
}

Bert load_bert(const std::string& dir, const LoadOptions& opts, LoadReport* report) {
  if (!fs::is_directory(dir))
    throw CheckpointError(dir + ": model folder not found; pass --model DIR with config.json and model.safetensors "
                                "(run scripts/setup.sh to link the real model under checkpoints/)");
  BertConfig cfg = read_bert_config(dir + "/config.json");
  LoadReport rep;
  TensorMap raw;
  if (fs::exists(dir + "/model.safetensors")) {
    rep.weights_file = dir + "/model.safetensors";
    raw = read_safetensors(rep.weights_file);
  } else if (fs::exists(dir + "/pytorch_model.bin")) {
    rep.weights_file = dir + "/pytorch_model.bin";
    raw = read_torch_bin(rep.weights_file);
  } else {
    throw CheckpointError(dir + ": no model.safetensors or pytorch_model.bin; save the model with save_pretrained");
  }
  raw = to_float32(raw);
  const std::string& file = rep.weights_file;

  // Normalise names: legacy renames, then find the encoder prefix.
  TensorMap named;
  for (auto& [k, v] : raw) named[apply_renames(k)] = v;
  bool found_prefix = false;
  for (const auto& prefix : encoder_prefixes())
    if (named.count(prefix + "embeddings.word_embeddings.weight")) {
      rep.prefix = prefix;
      found_prefix = true;
      break;
    }
  if (!found_prefix)
    throw CheckpointError(file + ": no embeddings.word_embeddings.weight under any known prefix (bert., none, 0.auto_model.); "
                                 "is this a BERT checkpoint?");

  // The checkpoint decides num_labels when it has a classifier; the task must agree.
  int ckpt_labels = named.count("classifier.weight") ? static_cast<int>(named["classifier.weight"].size(0)) : 0;
  if (ckpt_labels > 0) {
    if (opts.num_labels > 0 && opts.num_labels != ckpt_labels)
      throw CheckpointError(file + ": classifier.weight has " + std::to_string(ckpt_labels) + " labels, the task needs " +
                            std::to_string(opts.num_labels) + "; use a model fine-tuned for this task, or the pretrained encoder");
    cfg.num_labels = ckpt_labels;
  } else if (opts.num_labels > 0) {
    cfg.num_labels = opts.num_labels;
  }
  if (static_cast<int>(cfg.id2label.size()) != cfg.num_labels) cfg.id2label.clear();
  bool generic = true;
  for (size_t i = 0; i < cfg.id2label.size(); ++i) generic = generic && cfg.id2label[i] == "LABEL_" + std::to_string(i);
  if (generic && static_cast<int>(opts.label_names.size()) == cfg.num_labels) cfg.id2label = opts.label_names;

  std::map<std::string, torch::Tensor> params;
  std::set<std::string> consumed;
  std::vector<std::string> missing;
  // A private generator: loading a model must not reset the global RNG that dropout and gates use.
  at::Generator init_gen = at::detail::createCPUGenerator(opts.seed);
  for (const auto& spec : bert_key_table()) {
    for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l) {
      std::string key = hf_key(spec, l);
      std::string stored = (spec.part == Part::kClassifier ? "" : rep.prefix) + key;
      auto expected = key_shape(spec, cfg, l);
      auto it = named.find(stored);
      if (it == named.end()) {
        if (spec.required) {
          missing.push_back(stored);
          continue;
        }
        // Fresh init as HF's _init_weights: normal(0, 0.02) weights, zero biases.
        params[key] = spec.shape.size() == 2 ? torch::randn(expected, init_gen) * 0.02 : torch::zeros(expected);
        (spec.part == Part::kClassifier ? rep.classifier_initialized : rep.pooler_initialized) = true;
        continue;
      }
      std::vector<long> got(it->second.sizes().begin(), it->second.sizes().end());
      if (got != expected)
        throw CheckpointError(file + ": " + stored + " has shape " + shape_str(got) + ", expected " + shape_str(expected) +
                              " from config.json; the weights and config.json do not belong together");
      if (!at::isFloatingType(it->second.scalar_type()))
        throw CheckpointError(file + ": " + stored + " is stored as " + integer_dtype_name(it->second.scalar_type()) +
                              ", and a weight must be floating point (F32, F16, BF16 or F64); re-export the checkpoint "
                              "from the model in Python");
      params[key] = it->second.contiguous();
      consumed.insert(stored);
    }
  }
  // Non-finite weights make every output meaningless, and the masked or skipped parts of the computation can
  // hide them behind finite logits: name them at load.
  std::vector<std::string> non_finite;
  for (const auto& [key, t] : params) {
    const auto bad = (~torch::isfinite(t)).sum().item<int64_t>();
    if (bad > 0) non_finite.push_back(key + " (" + std::to_string(bad) + " of " + std::to_string(t.numel()) + ")");
  }
  if (!non_finite.empty()) {
    log_warn("load", file + ": non-finite weights (NaN/Inf) in " + first_names(non_finite) +
                         "; outputs and metrics will be meaningless");
    rep.non_finite = non_finite;
  }
  if (!missing.empty()) {
    throw CheckpointError(file + ": missing required tensors " + first_names(missing) + " (key prefix found: '" + rep.prefix +
                          "'); the checkpoint is incomplete or not a BERT encoder");
  }
  std::vector<std::string> unexpected;
  for (const auto& [k, v] : named)
    if (!consumed.count(k) && !is_ignored_key(k)) unexpected.push_back(k);
  if (!unexpected.empty()) {
    throw CheckpointError(file + ": " + std::to_string(unexpected.size()) + " unexpected tensors (" + first_names(unexpected) +
                          "); the file holds more than a BERT encoder + classifier — check config.json matches");
  }
  if (report) *report = rep;
  return Bert(cfg, std::move(params));
}

void check_max_seq_len(const BertConfig& cfg, int max_seq_len) {
  if (max_seq_len > cfg.max_position_embeddings)
    throw ConfigError("data.max_seq_len = " + std::to_string(max_seq_len) + " exceeds the model's max_position_embeddings " +
                      std::to_string(cfg.max_position_embeddings) + "; use --max-seq-len " +
                      std::to_string(cfg.max_position_embeddings) + " or less");
}

LoadOptions task_load_options(const TaskSpec& task, uint64_t seed) {
  LoadOptions o;
  o.num_labels = task.num_labels();
  o.seed = seed;
  if (!task.is_regression())
    for (int i = 0; i < task.num_labels(); ++i) o.label_names.push_back(task.label_name(i));
  return o;
}

void save_bert(const Bert& model, const std::string& dir, const std::string& tokenizer_dir, bool hdf5) {
  fs::create_directories(dir);
  TensorMap out;
  for (const auto& spec : bert_key_table()) {
    int layers = spec.per_layer ? model.config().num_hidden_layers : 1;
    for (int l = 0; l < layers; ++l) {
      std::string key = hf_key(spec, l);
      out[(spec.part == Part::kClassifier ? "" : "bert.") + key] = model.parameters().at(key).detach().contiguous();
    }
  }
  write_safetensors(dir + "/model.safetensors", out);
  if (hdf5) write_hdf5(dir + "/model.h5", out, {{"format", "headprune BERT, Hugging Face tensor names"}});
  write_file_atomic(dir + "/config.json", bert_config_json(model.config()));
  const std::string modeling = dir + "/modeling_headprune.py";
  if (model.config().slimmed()) write_file_atomic(modeling, kModelingHeadprunePy);
  else if (fs::exists(modeling)) fs::remove(modeling);  // a dense model needs no remote code
  if (!tokenizer_dir.empty() && fs::absolute(tokenizer_dir) != fs::absolute(dir))
    for (const char* name : {"vocab.txt", "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::exists(tokenizer_dir + "/" + name))
        fs::copy_file(tokenizer_dir + "/" + name, dir + "/" + name, fs::copy_options::overwrite_existing);
}

}  // namespace hp::core
