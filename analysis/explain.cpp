// `prune explain` (see analysis/explain.h).
#include "analysis/explain.h"

#include <torch/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/data/batching.h"
#include "core/data/file_task.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"
#include "prune/heads/criteria.h"  // attribution_base, attention_attribution, riemann_alphas: the criterion's code
#include "core/plot/plot.h"

namespace hp::analysis {

namespace fs = std::filesystem;

Explanation explain_example(const core::Bert& model, const core::Tokenizer& tok, const core::Example& ex,
                            int max_seq_len, int steps, const std::string& riemann, bool gold, double threshold) {
  core::EncodedDataset data = core::encode_examples(tok, {ex}, max_seq_len);
  core::BatchOptions bo;
  bo.batch_size = 1;
  bo.pad_id = tok.pad_id();
  const core::Batch b = core::make_batches(data, bo).at(0);
  const auto& cfg = model.config();
  const int L = cfg.num_hidden_layers;
  const auto keep = torch::ones({L, cfg.max_heads()});
  const core::EncoderOutput base = prune::attribution_base(model, b, keep);
  const bool regression = cfg.num_labels == 1;
  Explanation x;
  x.target =
      regression ? 0 : (gold ? static_cast<int>(ex.label) : static_cast<int>(base.logits.argmax(1).item<int64_t>()));
  x.probability =
      regression ? base.logits[0][0].item<double>() : torch::softmax(base.logits, 1)[0][x.target].item<double>();
  const auto target = torch::full({1}, x.target, torch::kLong);
  const auto alphas = prune::riemann_alphas(steps, riemann);
  const long S = b.input_ids.size(1);
  for (int l = 0; l < L; ++l) {
    Matrix m(S, std::vector<double>(S, 0.0));
    if (base.attentions[l].size(1) > 0) {
      auto a = prune::attention_attribution(model, b, keep, base, l, target, alphas, true)
                   .sum(1)[0]
                   .to(torch::kFloat64)
                   .contiguous();
      const double* p = a.data_ptr<double>();
      for (long i = 0; i < S; ++i)
        for (long j = 0; j < S; ++j) m[i][j] = p[i * S + j];
    }
    x.attribution.push_back(std::move(m));
  }
  for (long i = 0; i < S; ++i) x.tokens.push_back(tok.token(static_cast<int32_t>(b.input_ids[0][i].item<int64_t>())));
  x.tree = attribution_tree(x.attribution, threshold);
  return x;
}

void check_fits(const core::Tokenizer& tok, const core::Example& ex, int max_seq_len,
                const std::string& what) {
  // With the specials of the tokenizer's layout (3 in a BERT pair, 4 in a RoBERTa or XLM-R pair).
  const size_t pieces = tok.encode(ex.text_a, ex.text_b.empty() ? nullptr : &ex.text_b, 0).ids.size();
  if (pieces > static_cast<size_t>(max_seq_len))
    throw InputError(what + ": " + std::to_string(pieces) +
                     " word pieces with [CLS]/[SEP], more than data.max_seq_len = " + std::to_string(max_seq_len) +
                     "; shorten it or pass --max-seq-len " + std::to_string(pieces));
}

core::Bert load_fine_tuned(const core::Config& cfg, const std::string& command) {
  const auto& task = core::task_of(cfg.data, cfg.model.path);
  if (task.head == core::Head::kToken)
    throw ConfigError(command + " explains a sequence classifier's prediction; " + cfg.data.train_file +
                      " is token classification (data.task_type), which it does not read yet");
  core::LoadOptions load = core::task_load_options(task, cfg.run.seed);
  core::LoadReport report;
  core::Bert model = core::load_bert(cfg.model.path, load, &report);
  if (report.classifier_initialized)
    throw InputError(cfg.model.path + " has no classifier for " + task.name + ": " + command +
                     " of a random classifier means nothing; pass a fine-tuned model (e.g. runs/sst2/finetune/best)");
  core::check_max_seq_len(model.config(), cfg.data.max_seq_len);
  return model;
}

core::Example pick_example(const core::Config& cfg, const core::TaskSpec& task, const core::Tokenizer& tok,
                           std::string& id) {
  const auto& x = cfg.explain;
  core::Example ex;
  if (!x.text.empty()) {
    ex.text_a = x.text, ex.text_b = x.text_b;
    id = "text";
  } else {
    if (!x.text_b.empty()) throw ConfigError("explain.text_b is set without explain.text; pass --text too");
    const auto rows = core::read_task(task, core::data_root_for(cfg.data), x.split);
    if (x.example >= static_cast<int>(rows.size()))
      throw ConfigError("explain.example = " + std::to_string(x.example) + " but " + task.name + "/" + x.split +
                        " has " + std::to_string(rows.size()) + " rows; use 0.." + std::to_string(rows.size() - 1));
    ex = rows[x.example];
    id = "example" + std::to_string(x.example);
  }
  check_fits(
      tok, ex, cfg.data.max_seq_len,
      x.text.empty() ? task.name + "/" + x.split + " row " + std::to_string(x.example) : std::string("explain.text"));
  if (cfg.explain.target == "gold" && !ex.has_label)
    throw ConfigError("explain.target = gold but the example has no label; use --target predicted");
  return ex;
}

void write_explanation(const core::Config& cfg, const core::TaskSpec& task, const core::Example& ex,
                       const std::string& id, const Explanation& x, const std::string& out) {
  nlohmann::json j;
  j["model"] = cfg.model.path;
  j["task"] = task.name;
  j["example"] = id == "text" ? nlohmann::json(nullptr) : nlohmann::json(cfg.explain.example);
  j["split"] = id == "text" ? "" : cfg.explain.split;
  j["text_a"] = ex.text_a, j["text_b"] = ex.text_b;
  j["target"] = task.is_regression() ? nlohmann::json(nullptr) : nlohmann::json(task.labels[x.target]);
  j["target_index"] = x.target;
  j["probability"] = x.probability;
  j["threshold"] = cfg.explain.threshold;
  j["steps"] = cfg.prune.attattr_steps;
  j["riemann"] = cfg.prune.attattr_riemann;
  j["tokens"] = x.tokens;
  j["root"] = x.tree.root;
  j["heights"] = x.tree.heights;
  j["edges"] = nlohmann::json::array();
  for (const auto& e : x.tree.edges)
    j["edges"].push_back({{"layer", e.layer}, {"from", e.from}, {"to", e.to}, {"score", e.score}});
  j["attribution"] = x.attribution;
  fs::create_directories(out);
  core::write_file_atomic(out + "/tree.json", j.dump(1) + "\n");
  core::write_file_atomic(out + "/tree.dot", dot_tree(x.tree, x.tokens));
  const std::string title = "attribution tree: " + task.name + " " + id + ", " +
                            (task.is_regression() ? std::string("score") : task.label_name(x.target)) + " (" +
                            std::to_string(x.probability).substr(0, 5) +
                            "), τ = " + std::to_string(cfg.explain.threshold).substr(0, 4);
  core::write_svg_and_png(out + "/tree.svg", svg_tree(x.tree, x.tokens, title));
}

std::string tree_line(const Explanation& x) {
  std::string line = "root '" + x.tokens[x.tree.root] + "' (" + std::to_string(x.tree.root) + "), " +
                     std::to_string(x.tree.edges.size()) + " edges:";
  for (const auto& e : x.tree.edges)
    line += " L" + std::to_string(e.layer) + " " + x.tokens[e.from] + "->" + x.tokens[e.to];
  return line;
}

}  // namespace hp::analysis
