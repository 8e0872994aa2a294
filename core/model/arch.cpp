// The architecture table (see core/model/arch.h).
#include "core/model/arch.h"

#include <cstring>

#include "core/base/errors.h"  // CheckpointError

namespace hp::core {

namespace {

// DistilBERT's tensor names (every encoder tensor but the embeddings differs from BERT's) and config keys.
std::vector<ArchKey> distilbert_keys() {
  return {{"attn.q.w", "transformer.layer.{}.attention.q_lin.weight", true},
          {"attn.q.b", "transformer.layer.{}.attention.q_lin.bias", true},
          {"attn.k.w", "transformer.layer.{}.attention.k_lin.weight", true},
          {"attn.k.b", "transformer.layer.{}.attention.k_lin.bias", true},
          {"attn.v.w", "transformer.layer.{}.attention.v_lin.weight", true},
          {"attn.v.b", "transformer.layer.{}.attention.v_lin.bias", true},
          {"attn.o.w", "transformer.layer.{}.attention.out_lin.weight", true},
          {"attn.o.b", "transformer.layer.{}.attention.out_lin.bias", true},
          {"attn.ln.w", "transformer.layer.{}.sa_layer_norm.weight", true},
          {"attn.ln.b", "transformer.layer.{}.sa_layer_norm.bias", true},
          {"ffn.in.w", "transformer.layer.{}.ffn.lin1.weight", true},
          {"ffn.in.b", "transformer.layer.{}.ffn.lin1.bias", true},
          {"ffn.out.w", "transformer.layer.{}.ffn.lin2.weight", true},
          {"ffn.out.b", "transformer.layer.{}.ffn.lin2.bias", true},
          {"ffn.ln.w", "transformer.layer.{}.output_layer_norm.weight", true},
          {"ffn.ln.b", "transformer.layer.{}.output_layer_norm.bias", true},
          {"pool.w", "pre_classifier.weight", false},
          {"pool.b", "pre_classifier.bias", false}};
}

std::vector<ConfigKey> distilbert_config_keys() {
  return {{"hidden_size", "dim"},
          {"num_hidden_layers", "n_layers"},
          {"num_attention_heads", "n_heads"},
          {"intermediate_size", "hidden_dim"},
          {"hidden_dropout_prob", "dropout"},
          {"attention_probs_dropout_prob", "attention_dropout"},
          {"hidden_act", "activation"},
          {"classifier_dropout", "seq_classif_dropout"}};
}

}  // namespace

const std::vector<Arch>& arch_table() {
  // RoBERTa's and ELECTRA's classification heads: BERT's pooler and classifier under other names.
  const std::vector<ArchKey> dense_out_proj = {{"pool.w", "classifier.dense.weight", false},
                                               {"pool.b", "classifier.dense.bias", false},
                                               {"cls.w", "classifier.out_proj.weight", false},
                                               {"cls.b", "classifier.out_proj.bias", false}};
  // RoBERTa and XLM-R: positions after padding_idx (1), one token type, LayerNorm eps 1e-5, no pooler.
  auto roberta = [&](const char* type, const char* name, const char* classifier) {
    return Arch{type,       name,
                classifier, {"roberta.", "", "0.auto_model."},
                true,       Positions::kAfterPadding,
                "tanh",     true,
                true,       dense_out_proj,
                {},         {"lm_head.", "roberta.pooler.", "pooler."},
                1,          1e-5,
                true};
  };
  static const std::vector<Arch> table = {
      {"bert",
       "BERT",
       "BertForSequenceClassification",
       {"bert.", "", "0.auto_model."},
       true,
       Positions::kFromZero,
       "tanh",
       false,
       true,
       {},
       {},
       {"cls.predictions.", "cls.seq_relationship."},
       0,
       1e-12,
       true},
      roberta("roberta", "RoBERTa", "RobertaForSequenceClassification"),
      // XLM-R is RoBERTa with a SentencePiece vocabulary (its tokenizer, core/text): the same row.
      roberta("xlm-roberta", "XLM-R", "XLMRobertaForSequenceClassification"),
      {"distilbert",
       "DistilBERT",
       "DistilBertForSequenceClassification",
       {"distilbert.", "", "0.auto_model."},
       false,
       Positions::kFromZero,
       "relu",
       false,
       false,
       distilbert_keys(),
       distilbert_config_keys(),
       {"vocab_transform.", "vocab_layer_norm.", "vocab_projector."},
       0,
       1e-12,
       false},
      {"electra",
       "ELECTRA",
       "ElectraForSequenceClassification",
       {"electra.", "", "0.auto_model."},
       true,
       Positions::kFromZero,
       "gelu",
       true,
       true,
       dense_out_proj,
       {},
       {"discriminator_predictions.", "generator_"},
       0,
       1e-12,
       true},
  };
  return table;
}

std::string supported_model_types() {
  std::string out;
  for (const auto& a : arch_table()) out += (out.empty() ? "" : ", ") + std::string(a.model_type);
  return out;
}

const Arch& arch_of(const std::string& model_type, const std::string& path) {
  for (const auto& a : arch_table())
    if (model_type == a.model_type) return a;
  throw CheckpointError(path + ": model_type '" + model_type + "' is not supported; headprune loads " +
                        supported_model_types() + " encoders");
}

const char* config_key(const Arch& arch, const char* field) {
  for (const auto& k : arch.config_keys)
    if (std::strcmp(k.field, field) == 0) return k.key;
  return field;
}

}  // namespace hp::core
