// Reading and writing Hugging Face BERT folders (see core/io/checkpoint.h).
#include "core/io/checkpoint.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/model/arch.h"
#include "core/model/bert_keys.h"
#include "core/base/errors.h"  // CheckpointError
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/io/hf_modeling.h"  // generated from core/io/hf/modeling_headprune.py
#include "core/io/safetensors_index.h"
#include "core/io/tensor_io.h"

namespace hp::core {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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

// The first five names, then "… (N in all)": tensor lists in one-line errors.
std::string first_names(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 5) list += ", … (" + std::to_string(names.size()) + " in all)";
  return list;
}

// The key table's row named `name`.
const KeySpec& spec_named(const char* name) {
  for (const auto& spec : bert_key_table())
    if (std::string(spec.name) == name) return spec;
  throw InternalError(std::string("core/io/checkpoint.cpp: no key spec named ") + name);
}

// The tensors of a sharded checkpoint (index + shards): every shard the index names, each tensor in exactly the
// shard the index puts it in. A missing shard, a tensor in two shards, a tensor where the index does not put it and
// one the index does not list are refused (transformers would load some of these with weights silently dropped).
TensorMap read_sharded(const std::string& dir, const std::string& index_path) {
  const ShardIndex index = read_safetensors_index(index_path);
  for (const auto& shard : index.shards)
    if (!fs::is_regular_file(dir + "/" + shard))
      throw CheckpointError(dir + "/" + shard + ": shard missing, but " + kSafetensorsIndexName +
                            " puts tensors in it; download every shard the index names (or save the model again "
                            "with save_pretrained)");
  TensorMap out;
  std::map<std::string, std::string> held_by;  // tensor -> the shard that holds it
  for (const auto& shard : index.shards) {
    for (auto& [name, t] : read_safetensors(dir + "/" + shard)) {
      if (held_by.count(name))
        throw CheckpointError(index_path + ": tensor '" + name + "' is in two shards, " + held_by.at(name) + " and " +
                              shard + "; re-download the checkpoint, or save it again with save_pretrained");
      held_by[name] = shard;
      out[name] = t;
    }
  }
  for (const auto& [name, shard] : index.weight_map) {
    const auto held = held_by.find(name);
    if (held == held_by.end() || held->second != shard)
      throw CheckpointError(dir + "/" + shard + ": does not hold tensor '" + name + "', which " + kSafetensorsIndexName +
                            " puts in it" + (held == held_by.end() ? std::string(" (no shard holds it)")
                                                                    : " (" + held->second + " does)") +
                            "; re-download the checkpoint, or save it again with save_pretrained");
  }
  for (const auto& [name, shard] : held_by)
    if (!index.weight_map.count(name))
      throw CheckpointError(dir + "/" + shard + ": holds tensor '" + name + "', which " + kSafetensorsIndexName +
                            " does not list; re-download the checkpoint, or save it again with save_pretrained");
  return out;
}

// The weights of `dir` (model.safetensors, the shards of model.safetensors.index.json or pytorch_model.bin, in
// transformers' order of preference) as float32 tensors, legacy names renamed, and the encoder key prefix found.
TensorMap read_weights(const std::string& dir, const Arch& arch, LoadReport& rep) {
  TensorMap raw;
  if (fs::exists(dir + "/model.safetensors")) {
    rep.weights_file = dir + "/model.safetensors";
    raw = read_safetensors(rep.weights_file);
  } else if (fs::exists(dir + "/" + kSafetensorsIndexName)) {
    rep.weights_file = dir + "/" + kSafetensorsIndexName;
    raw = read_sharded(dir, rep.weights_file);
  } else if (fs::exists(dir + "/pytorch_model.bin")) {
    rep.weights_file = dir + "/pytorch_model.bin";
    raw = read_torch_bin(rep.weights_file);
  } else {
    throw CheckpointError(dir + ": no model.safetensors, " + kSafetensorsIndexName +
                          " or pytorch_model.bin; save the model with save_pretrained");
  }
  raw = to_float32(raw);
  TensorMap named;
  for (auto& [k, v] : raw) named[apply_renames(k)] = v;
  std::string tried;
  for (const auto& prefix : arch.prefixes) {
    if (named.count(stored_key(arch, spec_named("emb.word"), 0, prefix))) {
      rep.prefix = prefix;
      return named;
    }
    tried += (tried.empty() ? "" : ", ") + (prefix.empty() ? std::string("none") : prefix);
  }
  throw CheckpointError(rep.weights_file + ": no embeddings.word_embeddings.weight under any known prefix (" + tried +
                        "); config.json's model_type is '" + arch.model_type + "' (" + arch.name +
                        "): do the weights and config.json belong together?");
}

// num_labels and id2label: the checkpoint decides num_labels when it has a classifier (the task must
// agree); the task's class names replace generic ones.
void resolve_labels(BertConfig& cfg, const TensorMap& named, const LoadOptions& opts, const std::string& file) {
  const std::string cls_key = stored_key(arch_of(cfg.model_type), spec_named("cls.w"), 0, "", cfg.head);
  const auto cls = named.find(cls_key);
  const int ckpt_labels = cls != named.end() ? static_cast<int>(cls->second.size(0)) : 0;
  if (ckpt_labels > 0) {
    if (opts.num_labels > 0 && opts.num_labels != ckpt_labels)
      throw CheckpointError(file + ": " + cls_key + " has " + std::to_string(ckpt_labels) + " labels, the task needs " +
                            std::to_string(opts.num_labels) +
                            "; use a model fine-tuned for these labels, or (prune) set prune.new_classifier: true to train a new "
                            "classifier on its encoder");
    cfg.num_labels = ckpt_labels;
  } else if (opts.num_labels > 0) {
    cfg.num_labels = opts.num_labels;
  }
  if (static_cast<int>(cfg.id2label.size()) != cfg.num_labels) cfg.id2label.clear();
  bool generic = true;
  for (size_t i = 0; i < cfg.id2label.size(); ++i) generic = generic && cfg.id2label[i] == "LABEL_" + std::to_string(i);
  if (generic && static_cast<int>(opts.label_names.size()) == cfg.num_labels) cfg.id2label = opts.label_names;
}

// The stored classifier's tensors removed from `named` when it has another label count than `num_labels`.
void drop_other_classifier(const BertConfig& cfg, TensorMap& named, int num_labels, const std::string& prefix) {
  const Arch& arch = arch_of(cfg.model_type);
  const auto cls = named.find(stored_key(arch, spec_named("cls.w"), 0, "", cfg.head));
  if (num_labels <= 0 || cls == named.end() || cls->second.size(0) == num_labels) return;
  for (const auto& spec : model_keys(cfg))
    if (spec.part == Part::kClassifier)
      for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l)
        named.erase(stored_key(arch, spec, l, prefix, cfg.head));
}

// The head the task asks for (LoadOptions::head) in place of the checkpoint's: its classifier of the other head is
// refused, or dropped with new_classifier; a checkpoint without one takes the task's head.
void resolve_head(BertConfig& cfg, TensorMap& named, const LoadOptions& opts, const std::string& file) {
  if (!opts.head || *opts.head == cfg.head) return;
  const Arch& arch = arch_of(cfg.model_type);
  const std::string stored = stored_key(arch, spec_named("cls.w"), 0, "", cfg.head);
  if (named.count(stored)) {
    const std::string have = head_class(arch.classifier_class, cfg.head);
    const std::string want = head_class(arch.classifier_class, *opts.head);
    if (!opts.new_classifier)
      throw CheckpointError(file + ": " + stored + " is a " + have + "'s classifier and the task needs a " + want +
                            "; use a model fine-tuned as " + want + ", or (prune) set prune.new_classifier: true to "
                            "train a new classifier on its encoder");
    for (const auto& spec : model_keys(cfg))
      if (spec.part == Part::kClassifier) named.erase(stored_key(arch, spec, 0, "", cfg.head));
  }
  cfg.head = *opts.head;
}

// Every tensor of the key table, checked for shape and dtype; absent optional ones (pooler, classifier)
// freshly initialised; absent required ones listed in `missing`, the stored names taken in `consumed`.
std::map<std::string, torch::Tensor> take_params(const BertConfig& cfg, const TensorMap& named, const LoadOptions& opts,
                                                 LoadReport& rep, std::set<std::string>& consumed,
                                                 std::vector<std::string>& missing) {
  const std::string& file = rep.weights_file;
  std::map<std::string, torch::Tensor> params;
  // A private generator: loading a model must not reset the global RNG that dropout and gates use.
  at::Generator init_gen = at::detail::createCPUGenerator(opts.seed);
  const Arch& arch = arch_of(cfg.model_type);
  for (const auto& spec : model_keys(cfg)) {
    for (int l = 0; l < (spec.per_layer ? cfg.num_hidden_layers : 1); ++l) {
      std::string key = hf_key(spec, l);
      std::string stored = stored_key(arch, spec, l, rep.prefix, cfg.head);
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
        throw CheckpointError(file + ": " + stored + " has shape " + shape_str(got) + ", expected " +
                              shape_str(expected) +
                              " from config.json; the weights and config.json do not belong together");
      if (!at::isFloatingType(it->second.scalar_type()))
        throw CheckpointError(file + ": " + stored + " is stored as " + integer_dtype_name(it->second.scalar_type()) +
                              ", and a weight must be floating point (F32, F16, BF16 or F64); re-export the checkpoint "
                              "from the model in Python");
      params[key] = it->second.contiguous();
      consumed.insert(stored);
    }
  }
  return params;
}

// Non-finite weights (a warning: the masked or skipped parts of the computation can hide them behind finite
// logits), then missing and unexpected tensors (errors).
void check_tensors(const BertConfig& cfg, const std::map<std::string, torch::Tensor>& params, const TensorMap& named,
                   const std::set<std::string>& consumed, const std::vector<std::string>& missing, LoadReport& rep) {
  const std::string& file = rep.weights_file;
  const Arch& arch = arch_of(cfg.model_type);
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
    throw CheckpointError(file + ": missing required tensors " + first_names(missing) + " (key prefix found: '" +
                          rep.prefix + "'); the checkpoint is incomplete or not a " + arch.name + " encoder");
  }
  std::vector<std::string> unexpected;
  std::set<std::string> pooler;  // a sequence model's pooler, unread by a token head (HF drops it too)
  if (cfg.head == Head::kToken)
    for (const auto& spec : bert_key_table())
      if (spec.part == Part::kPooler) pooler.insert(stored_key(arch, spec, 0, rep.prefix));
  for (const auto& [k, v] : named)
    if (!consumed.count(k) && !is_ignored_key(arch, k) && !pooler.count(k)) unexpected.push_back(k);
  if (!unexpected.empty()) {
    throw CheckpointError(file + ": " + std::to_string(unexpected.size()) + " unexpected tensors (" +
                          first_names(unexpected) + "); the file holds more than a " + std::string(arch.name) +
                          " encoder + classifier — check config.json matches");
  }
}

}  // namespace

Bert load_bert(const std::string& dir, const LoadOptions& opts, LoadReport* report) {
  if (!fs::is_directory(dir))
    throw CheckpointError(dir +
                          ": model folder not found; pass --model DIR with config.json and model.safetensors "
                          "(run scripts/setup.sh to link the real model under checkpoints/)");
  BertConfig cfg = read_bert_config(dir + "/config.json");
  LoadReport rep;
  const Arch& arch = arch_of(cfg.model_type);
  TensorMap named = read_weights(dir, arch, rep);
  resolve_head(cfg, named, opts, rep.weights_file);
  if (opts.new_classifier) drop_other_classifier(cfg, named, opts.num_labels, rep.prefix);
  resolve_labels(cfg, named, opts, rep.weights_file);
  std::set<std::string> consumed;
  std::vector<std::string> missing;
  auto params = take_params(cfg, named, opts, rep, consumed, missing);
  check_tensors(cfg, params, named, consumed, missing, rep);
  if (report) *report = rep;
  return Bert(cfg, std::move(params));
}

void check_max_seq_len(const BertConfig& cfg, int max_seq_len) {
  // RoBERTa's positions start after padding_idx: max_position_embeddings - pad - 1 of them are usable (512 of 514).
  const int offset = arch_of(cfg.model_type).positions == Positions::kAfterPadding ? cfg.pad_token_id + 1 : 0;
  const int usable = cfg.max_position_embeddings - offset;
  if (max_seq_len > usable)
    throw ConfigError("data.max_seq_len = " + std::to_string(max_seq_len) +
                      " exceeds the model's max_position_embeddings " + std::to_string(cfg.max_position_embeddings) +
                      (offset ? " less padding_idx + 1 (" + std::to_string(usable) + ")" : std::string()) +
                      "; use --max-seq-len " + std::to_string(usable) + " or less");
}

void save_bert(const Bert& model, const std::string& dir, const std::string& tokenizer_dir, bool hdf5,
               double max_shard_mb) {
  shared_write([&] {
    StagedFolder(dir).write([&](const std::string& staged) {
      write_bert_files(model, staged, tokenizer_dir, {hdf5, max_shard_mb});
    });
  });
}

bool holds_headprune_export(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir + "/config.json", ec)) return false;
  try {
    const auto j = nlohmann::json::parse(read_file(dir + "/config.json"));
    return j.is_object() && j.contains("heads_per_layer") && j["heads_per_layer"].is_array();
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

// The model's tensors under their stored names, in the key table's order taken layer by layer (the embeddings, then
// each layer's tensors, then the head): the order of transformers' state_dict, in which shards are filled.
std::vector<std::pair<std::string, torch::Tensor>> stored_tensors(const Bert& model, bool encoder_only) {
  const BertConfig& cfg = model.config();
  const Arch& arch = arch_of(cfg.model_type);
  const auto keys = model_keys(cfg);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto put = [&](const KeySpec& spec, int l) {
    out.emplace_back(stored_key(arch, spec, l, arch.prefixes.front(), cfg.head),
                     model.parameters().at(hf_key(spec, l)).detach().contiguous());
  };
  bool layers_done = false;
  for (const auto& spec : keys) {
    if (!spec.per_layer) {
      if (!(encoder_only && spec.part == Part::kClassifier)) put(spec, 0);
    } else if (!layers_done) {
      for (int l = 0; l < cfg.num_hidden_layers; ++l)
        for (const auto& s : keys)
          if (s.per_layer) put(s, l);
      layers_done = true;
    }
  }
  return out;
}

// export.dtype's element type and its name in transformers' config.json (torch_dtype); the value was checked with
// the config (core/base/config.cpp validate), where a user's misspelling is refused.
struct StoredType {
  torch::ScalarType type;
  const char* hf_name;
};
StoredType stored_type(const std::string& dtype) {
  if (dtype == "bf16") return {torch::kBFloat16, "bfloat16"};
  if (dtype == "fp16") return {torch::kHalf, "float16"};
  HP_CHECK(dtype == "fp32", "stored_type: export.dtype '" << dtype << "' passed validation");
  return {torch::kFloat, "float32"};
}

// model.safetensors, or with max_shard_mb > 0 and more than that many MB (10^6 bytes, as transformers counts them) of
// tensors, transformers' shards and index: model-0000i-of-0000N.safetensors + model.safetensors.index.json.
void write_weights(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& dir,
                   double max_shard_mb) {
  std::vector<std::uint64_t> sizes;
  std::uint64_t total = 0;
  for (const auto& [name, t] : tensors) {
    sizes.push_back(static_cast<std::uint64_t>(t.numel()) * t.element_size());
    total += sizes.back();
  }
  const auto plan = plan_shards(sizes, static_cast<std::uint64_t>(std::llround(max_shard_mb * 1e6)));
  const int count = plan.empty() ? 1 : plan.back() + 1;
  if (count == 1) {
    TensorMap all(tensors.begin(), tensors.end());
    write_safetensors(dir + "/model.safetensors", all);
    return;
  }
  std::vector<TensorMap> shards(count);
  json weight_map = json::object();
  for (size_t i = 0; i < tensors.size(); ++i) {
    shards[plan[i]][tensors[i].first] = tensors[i].second;
    weight_map[tensors[i].first] = shard_file_name(plan[i] + 1, count);
  }
  for (int k = 0; k < count; ++k) write_safetensors(dir + "/" + shard_file_name(k + 1, count), shards[k]);
  // As transformers writes it: json.dumps(index, indent=2, sort_keys=True) + "\n".
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomic(dir + "/" + kSafetensorsIndexName, index.dump(2) + "\n");
}

}  // namespace

void write_bert_files(const Bert& model, const std::string& dir, const std::string& tokenizer_dir,
                      const WeightFiles& files) {
  fs::create_directories(dir);
  const Arch& arch = arch_of(model.config().model_type);
  auto tensors = stored_tensors(model, files.encoder_only);
  const StoredType stored = stored_type(files.dtype);
  for (auto& [name, t] : tensors) t = t.to(stored.type);
  write_weights(tensors, dir, files.max_shard_mb);
  if (files.hdf5) {  // HDF5 has no bf16: the stored values at fp32
    TensorMap h5;
    for (const auto& [name, t] : tensors) h5[name] = t.to(torch::kFloat);
    write_hdf5(dir + "/model.h5", h5,
               {{"format", std::string("headprune ") + arch.name + ", Hugging Face tensor names"}});
  }
  std::string config = bert_config_json(model.config());
  if (stored.type != torch::kFloat) {
    json j = json::parse(config);
    j["torch_dtype"] = stored.hf_name;
    config = j.dump(2) + "\n";
  }
  write_file_atomic(dir + "/config.json", config);
  if (model.config().slimmed()) write_file_atomic(dir + "/modeling_headprune.py", kModelingHeadprunePy);
  if (!tokenizer_dir.empty() && fs::absolute(tokenizer_dir) != fs::absolute(dir))
    for (const char* name : {"vocab.txt", "vocab.json", "merges.txt", "sentencepiece.bpe.model", "tokenizer.json",
                             "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::exists(tokenizer_dir + "/" + name))
        fs::copy_file(tokenizer_dir + "/" + name, dir + "/" + name, fs::copy_options::overwrite_existing);
}

}  // namespace hp::core
