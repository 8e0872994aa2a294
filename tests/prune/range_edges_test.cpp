// Every range check of the settings and of config.json at its edges: exactly at each bound, just inside it
// and just outside it (#30: the checks were tested only far outside, so `>` written for `>=` passed).
// A setting counts as refused when a validator names it ("gates.beta = ..."); at an edge that is inside,
// no validator may name it.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/base/config.h"
#include "core/base/errors.h"
#include "core/model/bert_config.h"
#include "gates/head_gates.h"
#include "prune/run/validate.h"
#include "train/trainer.h"

namespace {

struct Edge {
  const char* key;
  std::string value;
  bool accepted;
};

hp::core::BertConfig tiny_arch() {
  hp::core::BertConfig a;
  a.vocab_size = 100;
  a.hidden_size = 32;
  a.num_hidden_layers = 2;
  a.num_attention_heads = 4;
  a.intermediate_size = 64;
  a.max_position_embeddings = 64;
  return a;
}

// The message of the first validator that refuses `key = value` (after --set), or "" when all accept.
std::string refusal(const std::string& key, const std::string& value) {
  hp::core::Config cfg;
  cfg.model.path = "model";
  cfg.gates.enabled = true;  // the gates' own ranges are checked only when gates are used
  hp::core::apply_set(cfg, key + "=" + value);
  const hp::core::BertConfig arch = tiny_arch();
  try {
    hp::core::validate(cfg);
    hp::train::validate_train_config(cfg.train, cfg.gates, arch.total_heads());
    hp::gates::validate_gate_config(cfg.gates, arch.num_hidden_layers, arch.num_attention_heads);
    hp::prune::validate_prune_config(cfg.prune, arch);
  } catch (const hp::ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string threads_limit(int offset) {
  return std::to_string(4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) + offset);
}

}  // namespace

TEST_CASE("every settings range check holds at its bounds, just inside and just outside", "[core][config][edges]") {
  const std::vector<Edge> edges = {
      {"run.threads", "0", true},          {"run.threads", "-1", false},
      {"run.threads", threads_limit(0), true}, {"run.threads", threads_limit(1), false},
      {"run.dist_timeout_s", "1", true},   {"run.dist_timeout_s", "0", false},
      {"run.dist_timeout_s", "86400", true}, {"run.dist_timeout_s", "86401", false},
      {"data.max_seq_len", "2", true},     {"data.max_seq_len", "1", false},
      {"data.max_seq_len", "4096", true},  {"data.max_seq_len", "4097", false},
      {"eval.batch_size", "1", true},      {"eval.batch_size", "0", false},
      {"eval.max_examples", "0", true},    {"eval.max_examples", "-1", false},
      {"analysis.examples", "0", true},    {"analysis.examples", "-1", false},
      {"analysis.resamples", "0", true},   {"analysis.resamples", "-1", false},
      {"analysis.resamples", "100000", true}, {"analysis.resamples", "100001", false},
      {"analysis.alpha", "0", false},      {"analysis.alpha", "1e-9", true},
      {"analysis.alpha", "1", false},      {"analysis.alpha", "0.999999", true},
      {"analysis.min_occurrences", "1", true}, {"analysis.min_occurrences", "0", false},
      {"analysis.batch_size", "1", true},  {"analysis.batch_size", "0", false},
      {"explain.example", "0", true},      {"explain.example", "-1", false},
      {"explain.threshold", "0", true},    {"explain.threshold", "-1e-9", false},
      {"explain.threshold", "1", false},   {"explain.threshold", "0.999999", true},
      {"triggers.examples", "0", true},    {"triggers.examples", "-1", false},
      {"triggers.min_tokens", "0", true},  {"triggers.min_tokens", "-1", false},
      {"triggers.top_k", "1", true},       {"triggers.top_k", "0", false},
      {"triggers.top_k", "100", true},     {"triggers.top_k", "101", false},
      {"report.count", "0", true},         {"report.count", "-1", false},
      {"train.max_steps", "0", true},      {"train.max_steps", "-1", false},
      {"train.lr_peak", "1e-12", true},    {"train.lr_peak", "0", false},
      {"train.batch_size", "1", true},     {"train.batch_size", "0", false},
      {"train.lr_warmup_ratio", "0", true}, {"train.lr_warmup_ratio", "-1e-9", false},
      {"train.lr_warmup_ratio", "1", false}, {"train.lr_warmup_ratio", "0.999999", true},
      {"train.weight_decay", "0", true},   {"train.weight_decay", "-1e-9", false},
      {"train.adam_beta1", "0", true},     {"train.adam_beta1", "-1e-9", false},
      {"train.adam_beta1", "1", false},    {"train.adam_beta1", "0.999999", true},
      {"train.adam_beta2", "0", true},     {"train.adam_beta2", "1", false},
      {"train.adam_eps", "0", false},      {"train.adam_eps", "1e-30", true},
      {"train.grad_clip", "0", true},      {"train.grad_clip", "-1e-9", false},
      {"train.eval_every", "0", true},     {"train.eval_every", "-1", false},
      {"train.save_every", "0", true},     {"train.save_every", "-1", false},
      {"train.max_train_examples", "0", true}, {"train.max_train_examples", "-1", false},
      {"gates.distill_weight", "0", true}, {"gates.distill_weight", "-1e-9", false},
      {"gates.distill_weight", "1", true}, {"gates.distill_weight", "1.000001", false},
      {"gates.distill_temperature", "0", false}, {"gates.distill_temperature", "1e-9", true},
      {"gates.target_heads", "0", true},   {"gates.target_heads", "-1", false},
      {"gates.target_heads", "8", true},   {"gates.target_heads", "9", false},
      {"gates.beta", "0", false},          {"gates.beta", "1e-9", true},
      {"gates.beta", "1", true},           {"gates.beta", "1.000001", false},
      {"gates.gamma", "0", false},         {"gates.gamma", "-1e-9", true},
      {"gates.zeta", "1", false},          {"gates.zeta", "1.000001", true},
      {"gates.lambda", "0", true},         {"gates.lambda", "-1e-9", false},
      {"gates.lr", "0", false},            {"gates.lr", "1e-9", true},
      {"gates.target_warmup_ratio", "0", true}, {"gates.target_warmup_ratio", "-1e-9", false},
      {"gates.target_warmup_ratio", "1", true}, {"gates.target_warmup_ratio", "1.000001", false},
      {"gates.lagrangian_lr", "0", false}, {"gates.lagrangian_lr", "1e-9", true},
      // Open fractions (0, 1) with 0 = off: both edges and just inside (#44: 1.0 accepted went unseen).
      {"gates.target_flops", "0", true},   {"gates.target_flops", "-1e-9", false},
      {"gates.target_flops", "1", false},  {"gates.target_flops", "0.999999", true},
      {"gates.target_params", "0", true},  {"gates.target_params", "-1e-9", false},
      {"gates.target_params", "1", false}, {"gates.target_params", "0.999999", true},
      {"prune.target_heads", "8", true},   {"prune.target_heads", "9", false},
      {"prune.rank_examples", "0", true},  {"prune.rank_examples", "-1", false},
      {"prune.rank_batch_size", "1", true}, {"prune.rank_batch_size", "0", false},
      {"prune.seeds", "1", true},          {"prune.seeds", "0", false},
      {"prune.bootstrap", "0", true},      {"prune.bootstrap", "-1", false},
      {"prune.attattr_steps", "1", true},  {"prune.attattr_steps", "0", false},
      {"prune.min_heads_per_layer", "0", true}, {"prune.min_heads_per_layer", "-1", false},
      {"prune.min_heads_per_layer", "4", true}, {"prune.min_heads_per_layer", "5", false},
      {"prune.recover_steps", "0", true},  {"prune.recover_steps", "-1", false},
      {"prune.curve_recover_steps", "-1", true}, {"prune.curve_recover_steps", "-2", false},
      {"prune.target_flops", "0", true},   {"prune.target_flops", "-1e-9", false},
      {"prune.target_flops", "1", false},  {"prune.target_flops", "0.999999", true},
      {"prune.target_params", "1", false}, {"prune.target_params", "1e-9", true},
      {"prune.target_params", "0", true},  {"prune.target_params", "-1e-9", false},
      {"prune.target_params", "0.999999", true},
      {"prune.target_latency", "0", true}, {"prune.target_latency", "-1e-9", false},
      {"prune.latency_batch", "1", true},  {"prune.latency_batch", "0", false},
      {"prune.latency_seq", "0", true},    {"prune.latency_seq", "-1", false},
      {"prune.latency_seq", "64", true},   {"prune.latency_seq", "65", false},
      {"prune.search_examples", "0", true}, {"prune.search_examples", "-1", false},
      {"prune.tuning_damping", "0", true}, {"prune.tuning_damping", "-1e-9", false},
      {"prune.budget_schedule", "[100, 1]", true}, {"prune.budget_schedule", "[101]", false},
      {"prune.budget_schedule", "[100, 0]", false},
  };
  for (const auto& e : edges) {
    INFO(e.key << " = " << e.value << (e.accepted ? " must be accepted" : " must be refused"));
    const std::string why = refusal(e.key, e.value);
    INFO("refused with: " << why);
    // Refused by the check of this key: the message names it. (The budget schedule's message names the key.)
    CHECK((why.find(e.key) == std::string::npos) == e.accepted);
  }
}

TEST_CASE("every config.json range check holds at its bounds, just inside and just outside", "[core][config][edges]") {
  struct JsonEdge {
    const char* key;
    const char* value;
    bool accepted;
  };
  // Other fields keep the base values; a refusal counts when it names this key with "is outside".
  const std::vector<JsonEdge> edges = {
      {"vocab_size", "1", true},           {"vocab_size", "0", false},
      {"vocab_size", "10000000", true},    {"vocab_size", "10000001", false},
      {"hidden_size", "1", true},          {"hidden_size", "0", false},
      {"hidden_size", "65536", true},      {"hidden_size", "65537", false},
      {"num_hidden_layers", "1", true},    {"num_hidden_layers", "0", false},
      {"num_hidden_layers", "1000", true}, {"num_hidden_layers", "1001", false},
      {"num_attention_heads", "1", true},  {"num_attention_heads", "0", false},
      {"num_attention_heads", "4096", true}, {"num_attention_heads", "4097", false},
      {"intermediate_size", "1", true},    {"intermediate_size", "0", false},
      {"intermediate_size", "1048576", true}, {"intermediate_size", "1048577", false},
      {"max_position_embeddings", "1", true}, {"max_position_embeddings", "0", false},
      {"max_position_embeddings", "1048576", true}, {"max_position_embeddings", "1048577", false},
      {"type_vocab_size", "1", true},      {"type_vocab_size", "0", false},
      {"type_vocab_size", "1000000", true}, {"type_vocab_size", "1000001", false},
      {"pad_token_id", "0", true},         {"pad_token_id", "-1", false},
      {"pad_token_id", "9999999", true},   {"pad_token_id", "10000000", false},
      {"layer_norm_eps", "0", false},      {"layer_norm_eps", "1e-30", true},
      {"layer_norm_eps", "1", false},      {"layer_norm_eps", "0.999999", true},
      {"hidden_dropout_prob", "0", true},  {"hidden_dropout_prob", "-1e-9", false},
      {"hidden_dropout_prob", "1", false}, {"hidden_dropout_prob", "0.999999", true},
      {"attention_probs_dropout_prob", "0", true}, {"attention_probs_dropout_prob", "-1e-9", false},
      {"attention_probs_dropout_prob", "1", false}, {"attention_probs_dropout_prob", "0.999999", true},
      {"classifier_dropout", "0", true},   {"classifier_dropout", "-1e-9", false},
      {"classifier_dropout", "1", false},  {"classifier_dropout", "0.999999", true},
      {"classifier_dropout", "null", true},  // unset: the head takes hidden_dropout_prob
  };
  for (const auto& e : edges) {
    INFO(e.key << " = " << e.value << (e.accepted ? " must be accepted" : " must be refused"));
    std::string json = std::string("{\"model_type\": \"bert\", \"vocab_size\": 100, \"hidden_size\": 32, ") +
                       "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 64";
    json += std::string(", \"") + e.key + "\": " + e.value + "}";  // the later key wins in nlohmann::json
    std::string why;
    try {
      hp::core::parse_bert_config(json, "config.json");
    } catch (const std::exception& ex) {
      why = ex.what();
    }
    INFO("refused with: " << why);
    const bool range_refused = why.find(std::string(e.key) + " = ") != std::string::npos &&
                               why.find("is outside") != std::string::npos;
    CHECK(range_refused == !e.accepted);
  }
}
