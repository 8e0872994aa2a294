// The encoder architectures headprune loads, as data: one row per Hugging Face `model_type` saying how that
// architecture differs from BERT — its tensor names, its config.json key names, its positions, token types,
// embedding projection and classification head. Everything else (the forward, masks, slimming, export) reads
// these rows; nothing branches on a model_type by name. Torch-free.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// Where position ids start: BERT, DistilBERT and ELECTRA count from 0; RoBERTa and XLM-R from
// padding_idx + 1 over non-padding tokens, with padding at padding_idx (HF create_position_ids_from_input_ids).
enum class Positions { kFromZero, kAfterPadding };

// A tensor whose Hugging Face name in this architecture differs from BERT's. `name` is the key table's short
// name (core/model/bert_keys.h); `prefixed`: the name sits under the encoder prefix ("roberta.") or not.
struct ArchKey {
  const char* name;
  const char* hf;
  bool prefixed;
};

// A BertConfig field read from (and written to) a config.json key of another name: DistilBERT's "dim" is
// hidden_size. `field` is the BERT name (the key of bert_config.cpp's field tables).
struct ConfigKey {
  const char* field;
  const char* key;
};

struct Arch {
  const char* model_type;  // config.json's model_type
  const char* name;  // for messages and the README: "RoBERTa"
  const char* classifier_class;  // transformers' *ForSequenceClassification, written to config.json
  std::vector<std::string> prefixes;  // encoder key prefixes tried when loading, the first one written
  bool token_types;  // has token_type_embeddings (DistilBERT has none)
  Positions positions;
  // The classification head on the first token: act(dense(x0)) then the output layer; `head_act` is tanh
  // (BERT's pooler, RoBERTa), gelu (ELECTRA) or relu (DistilBERT). RoBERTa and ELECTRA also drop x0 out
  // before the dense layer.
  const char* head_act;
  bool dropout_before_head;
  bool attention_output_dropout;  // dropout on the attention block's output projection (DistilBERT has none)
  std::vector<ArchKey> keys;  // names that differ from BERT's
  std::vector<ConfigKey> config_keys;  // config.json names that differ from BERT's
  std::vector<std::string> ignored_prefixes;  // pretraining heads the classifier does not use
  int default_pad_token_id;
  double default_layer_norm_eps;
  // transformers' own class runs a layer whose heads are all pruned (DistilBERT's divides by zero): else a
  // slimmed model with such a layer loads only through the modeling file (trust_remote_code=True).
  bool hf_runs_headless_layers;
};

// The row of `model_type`; throws CheckpointError naming `path`, the type and the supported ones.
const Arch& arch_of(const std::string& model_type, const std::string& path = "config.json");
const std::vector<Arch>& arch_table();
// "bert, roberta, xlm-roberta, distilbert, electra".
std::string supported_model_types();

// The config.json key of BertConfig field `field` in `arch` (the field's own name unless renamed).
const char* config_key(const Arch& arch, const char* field);

}  // namespace hp::core
