// The architecture of a BERT-family encoder (BERT, RoBERTa, XLM-R, DistilBERT, ELECTRA: core/model/arch.h) as
// read from a Hugging Face config.json, in BERT's field names whatever the file calls them, and reading and
// writing that file (core/model/bert_config.cpp). Torch-free.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hp::core {

// What the classification head reads: the first token, through the pooler (a sequence's class or score: HF
// *ForSequenceClassification), or every token (a tag per token: *ForTokenClassification, dropout then one linear
// on the last hidden state, no pooler).
enum class Head { kSequence, kToken };

// transformers' class of `head` for an architecture whose sequence classifier is `sequence_class`
// ("BertForSequenceClassification" -> "BertForTokenClassification").
std::string head_class(const std::string& sequence_class, Head head);

struct BertConfig {
  std::string model_type = "bert";  // a row of core/model/arch.h
  int vocab_size = 0;
  int hidden_size = 0;  // D
  int embedding_size = 0;  // ELECTRA's embedding width, projected to D after the embeddings; 0 = D
  bool sinusoidal_pos_embds = false;  // DistilBERT: fixed sinusoidal positions (stored, and not trained)
  int num_hidden_layers = 0;  // L
  int num_attention_heads = 0;  // H of the unpruned model; head_dim = D / H
  int intermediate_size = 0;  // I
  int max_position_embeddings = 512;
  int type_vocab_size = 2;
  int pad_token_id = 0;
  double layer_norm_eps = 1e-12;
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double classifier_dropout = -1;  // < 0: use hidden_dropout_prob, as HF does for null
  std::string hidden_act = "gelu";
  int num_labels = 2;  // 1 = regression
  Head head = Head::kSequence;  // config.json's architectures: *ForTokenClassification is kToken
  std::vector<std::string> id2label;
  // Heads removed per layer (original indices), as HF's config.pruned_heads.
  std::map<int, std::vector<int>> pruned_heads;
  // FFN width (intermediate neurons) per layer of a slimmed model; 0 skips that layer's FFN sublayer.
  // Empty = every layer has intermediate_size. config.json's "intermediate_sizes" (ours; HF's BERT has one
  // width, so such a folder loads through the modeling file written beside it).
  std::vector<int> intermediate_sizes;
  // A model whose hidden channels were removed (CoFi's hidden dimension): hidden_size is the channels kept, so
  // the head size and the classification head's inner width (BERT's pooler output; its input is hidden_size)
  // stay what they were and are stored: config.json's "head_dim" and "classifier_hidden_size" (ours; 0 = the
  // usual hidden_size / num_attention_heads and hidden_size).
  int attention_head_size = 0;
  int classifier_hidden_size = 0;

  int embedding_width() const { return embedding_size > 0 ? embedding_size : hidden_size; }
  int head_dim() const {
    return attention_head_size > 0 ? attention_head_size : num_attention_heads ? hidden_size / num_attention_heads : 0;
  }
  // The classification head's inner width (the pooler's output).
  int classifier_width() const { return classifier_hidden_size > 0 ? classifier_hidden_size : hidden_size; }
  // Hidden channels removed: hidden_size is narrower than the head's inner width.
  bool hidden_slimmed() const { return classifier_width() != hidden_size; }
  // Heads present in layer l after pruning.
  int heads_in_layer(int l) const;
  // Original indices of the heads present in layer l, ascending.
  std::vector<int> kept_heads(int l) const;
  int total_heads() const;
  int max_heads() const;
  // Intermediate neurons of layer l (intermediate_size unless the FFN was slimmed).
  int ffn_width(int l) const;
  int total_neurons() const;
  int max_ffn_width() const;
  // Some neurons removed: a layer's FFN tensors are narrower than intermediate_size.
  bool ffn_slimmed() const { return total_neurons() < num_hidden_layers * intermediate_size; }
  // Some heads or neurons removed: the checkpoint's tensors are narrower than the config's sizes say.
  bool slimmed() const {
    return total_heads() < num_hidden_layers * num_attention_heads || ffn_slimmed() || hidden_slimmed();
  }
};

// Reads and validates config.json: every size range-checked before anything is allocated. Missing required
// keys, an unsupported model_type, a value out of range or of the wrong type → CheckpointError naming `path`.
BertConfig read_bert_config(const std::string& config_json_path);
// The same from the file's text (`path` names it in messages).
BertConfig parse_bert_config(const std::string& json_text, const std::string& path);

// config.json text for `cfg` in its architecture's key names (HF's config fields, pruned_heads, and our
// heads_per_layer).
std::string bert_config_json(const BertConfig& cfg);

// The hidden_act values computed (Hugging Face's names): gelu (erf form), its tanh forms, relu.
inline bool supported_activation(const std::string& act) {
  return act == "gelu" || act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast" || act == "relu";
}
inline constexpr const char* kSupportedActivations = "use gelu, gelu_new (gelu_pytorch_tanh, gelu_fast) or relu";

}  // namespace hp::core
