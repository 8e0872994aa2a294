// `prune eval`: task metrics and throughput of a model folder on a GLUE split, heads optionally masked.
#include <cmath>
#include <functional>
#include <set>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/data/batching.h"
#include "core/data/file_task.h"
#include "core/kernels/lowp_gemm.h"
#include "core/kernels/device.h"
#include "core/kernels/runtime.h"
#include "core/io/checkpoint.h"
#include "core/io/sentence_model.h"
#include "core/data/task_options.h"
#include "core/base/files.h"
#include "core/base/run_folder.h"  // claim_result_file
#include "core/model/head_mask.h"
#include "core/base/errors.h"
#include "core/base/log.h"
#include "eval/embedding.h"
#include "eval/evaluator.h"
#include "cli/commands.h"

namespace hp::cli {

namespace {

// The units kept of those each layer has: a slimmed layer's row of the mask is padded to the widest layer.
long kept_of_present(const std::vector<std::vector<bool>>& keep, const std::function<int(int)>& width) {
  long n = 0;
  for (size_t l = 0; l < keep.size(); ++l)
    for (int i = 0; i < width(static_cast<int>(l)); ++i) n += keep[l][i];
  return n;
}

// The first eval.max_examples (0: all) of the evaluated split; InputError when it has no labels.
std::vector<core::Example> labelled_examples(const core::TaskSpec& task, const core::Config& cfg) {
  const std::string root = core::data_root_for(cfg.data);
  auto examples = core::read_task(task, root, cfg.eval.split);
  if (!examples.front().has_label)
    throw InputError(task.name + " split '" + cfg.eval.split +
                     "' has no labels, so there is nothing to score; use "
                     "--split dev, or `prune infer` for predictions on unlabelled text");
  if (cfg.eval.max_examples > 0 && static_cast<size_t>(cfg.eval.max_examples) < examples.size())
    examples.resize(cfg.eval.max_examples);
  core::log_info("eval",
                 task.name + "/" + cfg.eval.split + ": " + std::to_string(examples.size()) + " examples from " +
                     core::read_from(task, root, cfg.eval.split));
  return examples;
}

// Moves `model` to run.device (bf16 and int8 are the CPU's kernels: other devices evaluate at fp32).
void to_run_device(core::Bert& model, const core::Config& cfg) {
  const torch::Device device = core::parse_device(cfg.run.device);
  if (device.is_cpu()) return;
  if (cfg.run.precision != "fp32")
    throw ConfigError("run.precision = " + cfg.run.precision + " runs the CPU's kernels (core/kernels); on run.device " +
                      cfg.run.device + " evaluate at fp32, or evaluate at " + cfg.run.precision + " with run.device: cpu");
  model = model.to(device);
}

// The model to evaluate, on run.device at run.precision (bf16 and int8 are the CPU's kernels).
core::Bert load_model(const core::TaskSpec& task, const core::Config& cfg, core::LoadReport& report) {
  core::LoadOptions load = core::task_load_options(task, cfg.run.seed);
  core::Bert model = core::load_bert(cfg.model.path, load, &report);
  if (report.classifier_initialized)
    core::log_warn("eval", cfg.model.path + " has no classifier: a fresh one (seed " + std::to_string(cfg.run.seed) +
                               ") is used, so the metric is chance level; fine-tune the model for " + task.name +
                               " first");
  core::check_max_seq_len(model.config(), cfg.data.max_seq_len);
  to_run_device(model, cfg);
  model.set_precision(core::precision_setting(cfg.run.precision));
  return model;
}

// A sentence-transformers model without a classifier for the task: its embeddings are what its users run, so they
// are scored (eval/embedding.h), never a fresh classifier. Empty otherwise (the classifier's evaluation follows).
std::optional<eval::SentenceEncoder> embeddings_to_score(const core::TaskSpec& task, const core::Config& cfg) {
  if (!core::is_sentence_model(cfg.model.path)) return std::nullopt;
  core::LoadReport report;
  auto enc = eval::load_sentence_encoder(cfg.model.path, core::task_load_options(task, cfg.run.seed), &report);
  if (!report.classifier_initialized) return std::nullopt;
  if (task.name != "stsb")
    throw ConfigError(cfg.model.path + " is a sentence-transformers model with no classifier for " + task.name +
                      ": prune eval scores its embeddings on stsb (cosine Spearman, as MTEB does); use --task stsb, "
                      "or fine-tune a classifier for " + task.name + " first (prune train --config configs/" +
                      task.name + ".yaml)");
  return enc;
}

// InputError when a metric of `metrics` is undefined (NaN): a correlation of fewer than two distinct values, of the
// gold scores or of the model's, has none. Said before anything is written, with the fix.
void refuse_undefined(const std::map<std::string, double>& metrics, const std::vector<core::Example>& examples,
                      const core::Config& cfg, const std::string& scores) {
  std::string undefined;
  int count = 0;
  for (const auto& [name, value] : metrics)
    if (std::isnan(value)) undefined += (count++ ? " and " : "") + name;
  if (undefined.empty()) return;
  std::set<float> gold;
  for (const auto& e : examples) gold.insert(e.label);
  const std::string n = std::to_string(examples.size());
  const std::string why = gold.size() < 2 ? "its " + n + " gold score" + (examples.size() == 1 ? " is" : "s are all") +
                                                " one value"
                                          : "the " + scores + " are one value on all " + n + " examples";
  throw InputError("prune eval: " + undefined + " on " + cfg.data.task + " " + cfg.eval.split +
                   (count > 1 ? " are" : " is") + " undefined: " + why +
                   ", and a correlation needs at least two distinct values of each; evaluate more examples "
                   "(eval.max_examples = " + std::to_string(cfg.eval.max_examples) + ", 0 = the whole split)");
}

// STS by the cosine of the embeddings: metrics, speed and the run's settings into `out` and one line on stdout.
int run_sts_eval(eval::SentenceEncoder& enc, const core::TaskSpec& task, const core::Config& cfg,
                 const std::vector<core::Example>& pairs, const std::string& out) {
  to_run_device(enc.model, cfg);
  enc.model.set_precision(core::precision_setting(cfg.run.precision));
  const auto& mc = enc.model.config();
  const core::StructureMask masks = core::parse_mask(cfg.eval.mask, mc.num_hidden_layers, mc.max_heads(),
                                                     mc.max_ffn_width(), "--mask", mc.hidden_size);
  const eval::Masks tensors = eval::masks_of(masks);
  const int calibrated = eval::calibrate_int8(enc.model, cfg, enc.tokenizer, tensors);
  // The folder's max_seq_length, as SentenceTransformer.encode (and MTEB) truncate: data.max_seq_len is the
  // classifiers' length.
  const int length = eval::embedding_length(enc, 0);
  core::log_info("eval", "scoring the embeddings of " + cfg.model.path + " (no classifier for " + task.name +
                             "): cosine of each pair, up to " + std::to_string(length) +
                             " tokens a sentence (the folder's max_seq_length; data.max_seq_len is for classifiers)");
  auto r = eval::evaluate_sts(enc, pairs, cfg.eval.batch_size, length, tensors, true);
  refuse_undefined(r.metrics, pairs, cfg, "embeddings' cosines");
  if (!cfg.eval.mask.empty()) {  // what the mask costs the embeddings themselves: the unmasked model as the teacher
    core::log_info("eval", "the same sentences without the mask, for the mean cosine to the unmasked embeddings");
    const auto teacher = eval::embed_texts(enc, eval::sts_texts(pairs), cfg.eval.batch_size, length, true);
    r.metrics["mean_cosine_to_unmasked"] = eval::paired_cosine(r.embeddings, teacher).mean().item<double>();
  }
  const std::string pooling = core::pooling_mode_name(enc.layout.pooling.modes.front()) +
                              std::string(enc.layout.pooling.modes.size() > 1 ? " and more" : "") +
                              (enc.layout.normalize ? ", normalized" : "");
  nlohmann::json j;
  j["task"] = task.name, j["split"] = cfg.eval.split, j["model"] = cfg.model.path;
  j["scored"] = "cosine similarity of the sentence embeddings (" + pooling + "), no classifier";
  j["mask"] = core::format_mask(masks);
  j["metrics"] = r.metrics, j["examples"] = r.pairs, j["seconds"] = r.seconds, j["examples_per_s"] = r.pairs_per_s;
  j["max_seq_len"] = length;
  j["precision"] = cfg.run.precision, j["calibrated_examples"] = calibrated;
  j["runtime"] = core::runtime_summary(), j["config"] = core::dump_yaml(cfg);
  core::write_file_atomic(out, j.dump(2) + "\n");
  std::cout << task.name << " " << cfg.eval.split << " (" << r.pairs << " pairs, cosine of " << pooling
            << " embeddings, " << cfg.run.precision << (enc.model.int8_calibrated() ? ", calibrated" : "") << ")";
  for (const auto& [name, value] : r.metrics) std::cout << "  " << name << " " << value;
  std::cout << "  |  " << r.pairs_per_s << " pairs/s\n";
  core::log_info("eval", "wrote " + out);
  return 0;
}

// A tagger's predictions as tag names, one list per sentence (its scored words, in order).
nlohmann::json predicted_tags(const core::TaskSpec& task, const std::vector<float>& predictions) {
  nlohmann::json out = nlohmann::json::array(), sentence = nlohmann::json::array();
  for (float p : predictions) {
    if (p == core::kSentenceEnd) {
      out.push_back(sentence);
      sentence = nlohmann::json::array();
    } else {
      sentence.push_back(task.labels.at(static_cast<size_t>(p)));
    }
  }
  return out;
}

}  // namespace

int run_eval(const core::Config& cfg) {
  const core::TaskSpec& task = core::task_of(cfg.data, cfg.model.path);
  // The run-folder rule for the result file: an earlier result is replaced only by the same evaluation.
  const std::string out = cfg.eval.output.empty()
                              ? cfg.run.out_dir + "/eval_" + task.name + "_" + cfg.eval.split + ".json"
                              : cfg.eval.output;
  if (core::shared_decide([&] { return core::claim_result_file(out, "config", core::dump_yaml(cfg)) ? 1L : 0L; }))
    core::log_info("eval", out + " holds this evaluation already: it is redone");
  const auto examples = labelled_examples(task, cfg);
  if (auto enc = embeddings_to_score(task, cfg)) return run_sts_eval(*enc, task, cfg, examples, out);

  core::LoadReport report;
  core::Bert model = load_model(task, cfg, report);
  auto tok = core::Tokenizer::from_model_dir(cfg.model.path);
  const auto& mc = model.config();
  const core::StructureMask masks =
      core::parse_mask(cfg.eval.mask, mc.num_hidden_layers, mc.max_heads(), mc.max_ffn_width(), "--mask",
                       mc.hidden_size);
  const core::HeadSet& keep = masks.heads;
  // All-ones masks cost nothing: the forward drops them (core/model/bert.h).
  const eval::Masks tensors = eval::masks_of(masks);
  const int layers_kept = core::count_kept_layers(masks.layers, mc.num_hidden_layers);

  const int calibrated = eval::calibrate_int8(model, cfg, tok, tensors);
  auto data = core::encode_examples(tok, examples, cfg.data.max_seq_len);
  core::BatchOptions bo;
  bo.batch_size = cfg.eval.batch_size;
  bo.pad_id = tok.pad_id();
  auto batches = core::make_batches(data, bo);
  auto r = eval::evaluate(model, task, data, batches, tensors, /*show_progress=*/true);
  refuse_undefined(r.metrics, examples, cfg, "model's predictions");

  nlohmann::json j;
  j["task"] = task.name;
  j["split"] = cfg.eval.split;
  j["model"] = cfg.model.path;
  j["mask"] = core::format_mask(masks);
  const long heads_kept = kept_of_present(keep, [&](int l) { return mc.heads_in_layer(l); });
  j["heads_kept"] = heads_kept;
  j["heads_total"] = mc.total_heads();
  j["neurons_kept"] = kept_of_present(masks.neurons, [&](int l) { return mc.ffn_width(l); });
  j["neurons_total"] = mc.total_neurons();
  j["layers_kept"] = layers_kept;
  j["layers_total"] = mc.num_hidden_layers;
  j["hidden_kept"] = masks.hidden.empty() ? mc.hidden_size : core::count_kept({masks.hidden});
  j["hidden_total"] = mc.hidden_size;
  j["classifier_initialized"] = report.classifier_initialized;
  j["metrics"] = r.metrics;
  if (task.head == core::Head::kToken) j["tags"] = predicted_tags(task, r.predictions);
  j["examples"] = r.examples;
  j["seconds"] = r.seconds;
  j["examples_per_s"] = r.examples_per_s;
  j["tokens"] = r.tokens;
  j["padded_tokens"] = r.padded_tokens;
  j["precision"] = cfg.run.precision;
  j["calibrated_examples"] = calibrated;  // as many as the split held, not as many as asked
  j["runtime"] = core::runtime_summary();
  j["config"] = core::dump_yaml(cfg);
  core::write_file_atomic(out, j.dump(2) + "\n");

  std::cout << task.name << " " << cfg.eval.split << " (" << r.examples << " examples, "
            << (layers_kept < mc.num_hidden_layers
                    ? std::to_string(layers_kept) + "/" + std::to_string(mc.num_hidden_layers) + " layers, "
                    : std::string())
            << heads_kept << "/" << mc.total_heads() << " heads, "
            << (masks.hidden.empty() ? std::string()
                                     : j["hidden_kept"].dump() + "/" + std::to_string(mc.hidden_size) + " hidden channels, ")
            << cfg.run.precision << (model.int8_calibrated() ? ", calibrated" : "") << ")";
  for (const auto& [name, value] : r.metrics) std::cout << "  " << name << " " << value;
  std::cout << "  |  " << r.examples_per_s << " examples/s\n";
  core::log_info("eval", "wrote " + out);
  return 0;
}

}  // namespace hp::cli
