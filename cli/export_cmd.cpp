// `prune export`: re-writes a model folder as a Hugging Face BertForSequenceClassification checkpoint
// (config.json, model.safetensors or with export.max_shard_mb its shards and index, tokenizer files) plus model.h5
// holding the same tensors; a sentence-transformers folder stays one (modules.json, pooling and normalize around
// the encoder, core/io/sentence_model.h).
// Slimmed exports after pruning reuse the same writer (core/io/checkpoint.h save_bert). --dense writes a
// slimmed model at its original shapes with the removed heads zeroed (prune/export/slim.h dense_model).
// The whole export (ONNX files and their checks included) is written into a fresh folder beside --to and renamed
// into place only when every check passed (core::StagedFolder): --to then holds exactly this export, or,
// after a failure, what it held before.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/base/files.h"
#include "core/data/batching.h"
#include "core/data/file_task.h"
#include "core/data/glue.h"
#include "core/data/task_options.h"
#include "core/io/checkpoint.h"
#include "core/io/safetensors_index.h"
#include "core/io/sentence_model.h"
#include "core/model/head_mask.h"  // parse_mask
#include "core/base/errors.h"
#include "core/base/log.h"
#include "core/base/strings.h"
#include "eval/embedding.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "cli/commands.h"

namespace hp::cli {

namespace {

namespace fs = std::filesystem;

// The files an export writes (core::save_bert, prune::export_onnx, export_int8 below) and the check files an
// older export could leave behind. An earlier export holds only these; a file of any other name is someone
// else's.
bool export_file(const std::string& name) {
  static const std::set<std::string> names = {
      "config.json", "model.safetensors", "model.h5", "modeling_headprune.py", "vocab.txt", "vocab.json",
      "merges.txt", "sentencepiece.bpe.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
      "model.onnx", "model.int8.onnx", "int8.json", "README.md", "onnx_check.h5", "onnx_check.json",
      "onnx_int8_check.h5", "onnx_int8_logits.h5", core::kSafetensorsIndexName};
  return names.count(name) > 0 || core::is_shard_file_name(name) || core::is_sentence_model_file(name);
}

// Refuses a --to that would delete what the command reads (whatever --force says), and without --force one that
// holds anything but an earlier headprune export (ConfigError): replacing it would destroy it. An earlier export
// is told by its content (core::holds_headprune_export: headprune's config.json), and then by its file names: a
// Hugging Face folder holds the same names.
void check_target(const core::Config& cfg) {
  const std::string& out = cfg.export_.out;
  core::refuse_replacing_inputs(out, {{"--model", cfg.model.path},
                                      {"--data-root", cfg.export_.int8 ? core::resolve_data_root(cfg.data.root) : ""}});
  std::error_code ec;
  if (cfg.export_.force || !fs::is_directory(out, ec) || fs::is_empty(out, ec)) return;  // a file: StagedFolder
  std::vector<std::string> foreign;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (!export_file(e.path().filename().string())) foreign.push_back(e.path().filename().string());
  const std::string fix = "; pass --to NEW_DIR, empty the folder, or add --force to replace it";
  if (!foreign.empty()) {
    std::sort(foreign.begin(), foreign.end());
    throw ConfigError(out + " is not empty and holds no headprune export (it has '" + foreign.front() + "'" +
                      (foreign.size() > 1 ? " and " + std::to_string(foreign.size() - 1) + " more" : std::string()) +
                      ", which an export would replace)" + fix);
  }
  if (!core::holds_headprune_export(out))
    throw ConfigError(out + " is not empty and holds no headprune export (its config.json " +
                      (fs::exists(out + "/config.json", ec) ? "was not written by headprune: no 'heads_per_layer'"
                                                            : "is missing") +
                      "), which an export would replace whole" + fix);
}

// The folder of the encoder to export: a sentence-transformers model's Transformer module, else `dir` itself.
std::string encoder_dir(const std::string& dir) {
  return core::is_sentence_model(dir) ? core::read_sentence_model(dir).transformer_dir : dir;
}

// One metric map as "accuracy 0.8842, f1 0.8901".
std::string format_metrics(const std::map<std::string, double>& m) {
  std::string s;
  for (const auto& [name, value] : m) s += (s.empty() ? "" : ", ") + name + " " + std::to_string(value).substr(0, 6);
  return s.empty() ? "(no labels)" : s;
}

// The rows of the task's evaluation split (eval.split) the int8 checks run on, eval.max_examples at most.
std::vector<core::Example> int8_check_rows(const core::Config& cfg, const core::TaskSpec& task) {
  auto rows = core::read_task(task, core::data_root_for(cfg.data), cfg.eval.split);
  if (cfg.eval.max_examples > 0 && static_cast<size_t>(cfg.eval.max_examples) < rows.size())
    rows.resize(cfg.eval.max_examples);
  return rows;
}

// The model card's int8 section `section` (after what an in-place export carried over, less an earlier one).
void write_int8_card(const std::string& dir, const std::string& section) {
  const std::string card = dir + "/README.md", marker = "<!-- headprune int8 -->";
  std::string text = fs::exists(card) ? core::read_file(card) : std::string();
  if (const auto at = text.find(marker); at != std::string::npos) text.resize(at);
  core::write_file_atomic(card, text + marker + "\n## int8\n\n" + section);
}

// dir/model.int8.onnx checked on the task's evaluation split; its accuracy into int8.json and the model card.
void export_int8(const core::Config& cfg, const core::Bert& model, const std::string& dir) {
  const core::TaskSpec& task = core::task_of(cfg.data, cfg.model.path);
  const auto examples = int8_check_rows(cfg, task);
  core::check_max_seq_len(model.config(), cfg.data.max_seq_len);
  const auto tok = core::Tokenizer::from_model_dir(dir);
  const auto data = core::encode_examples(tok, examples, cfg.data.max_seq_len);
  core::BatchOptions bo;
  bo.batch_size = cfg.eval.batch_size;
  bo.pad_id = tok.pad_id();
  const auto check = prune::export_onnx_int8(model, dir, task, data, core::make_batches(data, bo));
  nlohmann::json j;
  j["task"] = task.name;
  j["split"] = cfg.eval.split;
  j["examples"] = check.examples;
  j["headprune_fp32"] = check.fp32;
  j["headprune_int8"] = check.int8;
  j["onnxruntime_int8"] = check.onnx_int8;
  j["same_predictions"] = check.agreement;
  j["max_abs_logit_diff"] = check.max_abs_logit_diff;
  j["tolerance"] = check.tolerance;
  j["weight_max"] = check.weight_max;
  core::write_file_atomic(dir + "/int8.json", j.dump(2) + "\n");
  const std::string w = std::to_string(check.weight_max);
  write_int8_card(
      dir,
      std::string("`model.int8.onnx` is `model.onnx` with headprune's int8 linears in standard ONNX ") +
          "operators (weights int8 in ±" + w + " per output channel (7 bits: exact in ONNX Runtime's AVX2 kernel as " +
          "on VNNI), activations uint8 per row, dynamic: no calibration, MatMulInteger; the classifier float32), " +
          "run by ONNX Runtime. On " + task.name + " " + cfg.eval.split + " (" + std::to_string(check.examples) +
          " examples):\n\n| model | metrics |\n|---|---|\n| float32 | " + format_metrics(check.fp32) +
          " |\n| headprune int8, dynamic, weights ±" + w + " | " + format_metrics(check.int8) +
          " |\n| ONNX Runtime int8 (`model.int8.onnx`) | " + format_metrics(check.onnx_int8) + " |\n\n" +
          std::to_string(100 * check.agreement).substr(0, 5) +
          "% of the examples get the same prediction from both int8 models.\n");
}

// dir/model.int8.onnx of a sentence-transformers export, checked on the sentences of the task's evaluation split;
// its cosines to float32 into int8.json and the model card.
void export_sentence_int8(const core::Config& cfg, const std::string& dir) {
  const core::TaskSpec& task = core::task_of(cfg.data, cfg.model.path);
  std::vector<std::string> texts;
  for (const auto& t : eval::sts_texts(int8_check_rows(cfg, task)))
    if (!t.empty()) texts.push_back(t);
  const auto c = prune::export_sentence_onnx_int8(eval::load_sentence_encoder(dir), dir, texts);
  const nlohmann::json j = {{"task", task.name},
                            {"split", cfg.eval.split},
                            {"sentences", c.sentences},
                            {"weight_max", c.weight_max},
                            {"headprune_int8_cosine_to_fp32", c.int8_to_fp32},
                            {"onnxruntime_int8_cosine_to_fp32", c.onnx_int8_to_fp32},
                            {"mean_cosine_onnxruntime_to_headprune_int8", c.mean_onnx_to_int8},
                            {"lowest_cosine_onnxruntime_to_headprune_int8", c.min_onnx_to_int8},
                            {"max_abs_diff", c.max_abs_diff}};
  core::write_file_atomic(dir + "/int8.json", j.dump(2) + "\n");
  write_int8_card(
      dir,
      std::string("`model.int8.onnx` is `model.onnx` (the encoder, its pooling and Normalize) with ") +
          "headprune's int8 linears in standard ONNX operators (weights int8 in ±" + std::to_string(c.weight_max) +
          " per output channel, activations uint8 per row, dynamic: no calibration; pooling and Normalize float32), " +
          "run by ONNX Runtime. On the " + std::to_string(c.sentences) + " sentences of " + task.name + " " +
          cfg.eval.split + ", the mean cosine of its embeddings to the float32 model's is " +
          core::format_number("%.4f", c.onnx_int8_to_fp32) +
          " (headprune's int8: " + core::format_number("%.4f", c.int8_to_fp32) + ").\n");
}

// The model to export: loaded, then slimmed by export.mask or made dense as the config says.
core::Bert model_to_export(const core::Config& cfg) {
  core::LoadReport report;
  core::LoadOptions load;
  load.seed = cfg.run.seed;
  const bool sentence = core::is_sentence_model(cfg.model.path);
  core::Bert model = core::load_bert(encoder_dir(cfg.model.path), load, &report);
  if (!cfg.export_.mask.empty()) {
    const core::BertConfig& arch = model.config();
    if (arch.slimmed())
      throw ConfigError("export.mask on " + cfg.model.path +
                        ", which is slimmed already (pruned_heads or intermediate_sizes in its config.json); pass the "
                        "unpruned model the mask was made for");
    const core::StructureMask keep = core::parse_mask(cfg.export_.mask, arch.num_hidden_layers, arch.max_heads(),
                                                      arch.intermediate_size, "export.mask", arch.hidden_size);
    model = prune::slim_model(model, keep);
    core::log_info("export", "slimmed to " + std::to_string(model.config().num_hidden_layers) + " layers, " +
                                 std::to_string(model.config().total_heads()) + " heads, " +
                                 std::to_string(model.config().total_neurons()) + " FFN neurons and " +
                                 std::to_string(model.config().hidden_size) + " hidden channels (export.mask)");
  }
  if (cfg.export_.dense) {
    const int removed =
        model.config().num_hidden_layers * model.config().num_attention_heads - model.config().total_heads();
    if (removed == 0) core::log_warn("export", cfg.model.path + " has no removed heads; --dense writes it unchanged");
    model = prune::dense_model(model);
    core::log_info("export",
                   "dense: " + std::to_string(removed) + " removed heads written as zeros at the original shapes");
  }
  if (report.classifier_initialized && !sentence)  // a sentence-transformers export carries the encoder alone
    core::log_warn("export", cfg.model.path + " has no classifier; the export carries a fresh one (seed " +
                                 std::to_string(cfg.run.seed) + ")");
  return model;
}

// Every file of the export into `dir` (the staging folder), checks included. A sentence-transformers model stays one
// (its modules around the exported encoder).
void write_export(const core::Config& cfg, const core::Bert& model, const std::string& dir) {
  const bool sentence = core::is_sentence_model(cfg.model.path);
  core::write_bert_files(model, dir, encoder_dir(cfg.model.path),
                         {cfg.export_.hdf5, cfg.export_.max_shard_mb, sentence, cfg.export_.dtype});
  if (sentence)
    core::write_sentence_model_files(core::read_sentence_model(cfg.model.path), model.config().hidden_size, dir);
  // An export in place (--to the --model folder) keeps the folder's model card, less its int8 section.
  std::error_code ec;
  const std::string card = cfg.model.path + "/README.md", marker = "<!-- headprune int8 -->";
  if (fs::equivalent(cfg.model.path, cfg.export_.out, ec) && fs::is_regular_file(card, ec)) {
    std::string text = core::read_file(card);
    if (const auto at = text.find(marker); at != std::string::npos) text.resize(at);
    core::write_file_atomic(dir + "/README.md", text);
  }
  if (sentence && (cfg.export_.onnx || cfg.export_.int8))  // the encoder with its pooling and Normalize
    prune::export_sentence_onnx(model, core::read_sentence_model(dir), dir);
  else if (cfg.export_.onnx || cfg.export_.int8)
    prune::export_onnx(model, dir);
  if (cfg.export_.int8 && sentence) export_sentence_int8(cfg, dir);
  else if (cfg.export_.int8) export_int8(cfg, model, dir);
}

}  // namespace

int run_export(const core::Config& cfg) {
  if (cfg.export_.out.empty()) throw ConfigError("export.out is empty; pass --to DIR");
  check_target(cfg);
  try {  // StagedFolder::write removes the staging folder and names the target in the error
    core::StagedFolder(cfg.export_.out).write(
        [&](const std::string& dir) { write_export(cfg, model_to_export(cfg), dir); });
  } catch (const std::exception&) {
    core::log_info("export", "nothing written to " + cfg.export_.out);
    throw;
  }
  core::log_info("export", "wrote " + cfg.export_.out + (cfg.export_.hdf5 ? " (with model.h5)" : "") +
                               (cfg.export_.int8 ? ", model.onnx and model.int8.onnx (checked)"
                                                 : cfg.export_.onnx ? " and model.onnx (checked)" : ""));
  return 0;
}

}  // namespace hp::cli
