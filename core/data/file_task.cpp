// A user's own data files as a task (see core/data/file_task.h).
#include "core/data/file_task.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/data/file_dataset.h"
#include "core/data/token_dataset.h"
#include "core/model/bert_config.h"

namespace hp::core {

namespace {

// The metrics of labels like these, primary first unless data.metric names another of them. A tagger's: token
// accuracy, and seqeval's entity scores for a BIO tag set (entity F1 primary, as run_ner.py reports).
void set_metrics(TaskSpec& t, const DataConfig& data) {
  if (t.head == Head::kToken && is_bio(t.labels))
    t.metrics = {"entity_f1", "accuracy", "entity_precision", "entity_recall"};
  else if (t.head == Head::kToken) t.metrics = {"accuracy"};
  else if (t.is_regression()) t.metrics = {"pearson", "spearman"};
  else t.metrics = {"accuracy", t.labels.size() == 2 ? "f1" : "macro_f1", "mcc"};
  t.primary_metric = t.metrics.front();
  if (data.metric.empty()) return;
  const char* what = t.head == Head::kToken ? "tags" : t.is_regression() ? "scores" : "classes";
  if (std::find(t.metrics.begin(), t.metrics.end(), data.metric) == t.metrics.end())
    throw ConfigError("data.metric = " + data.metric + ": " + what + " in " + data.train_file + " are measured by " +
                      join_list(t.metrics) + "; choose one of them");
  t.primary_metric = data.metric;
}

bool has_suffix(std::string s, const std::vector<std::string>& suffixes) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& x : suffixes)
    if (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0) return true;
  return false;
}

// Whether the files are a tagger's: data.task_type, else the training file's extension (.conllu, .conll, .iob, .bio),
// or JSON lines whose first object holds "tokens".
bool is_token_task(const DataConfig& data) {
  if (data.task_type == "token_classification") return true;
  if (data.task_type == "sequence_classification") return false;
  if (!data.task_type.empty())
    throw ConfigError("data.task_type = " + data.task_type +
                      ": use sequence_classification or token_classification (empty: from the training file)");
  const std::string fmt = data.format;
  if (fmt == "conllu" || fmt == "conll") return true;
  if (!fmt.empty() && fmt != "jsonl") return false;
  if (fmt.empty() && has_suffix(data.train_file, {".conllu", ".conll", ".iob", ".bio"})) return true;
  if (!(fmt == "jsonl" || has_suffix(data.train_file, {".jsonl", ".json"}))) return false;
  const auto lines = read_text_lines(data.train_file);
  for (const auto& line : lines) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    return j.is_object() && j.contains("tokens");
  }
  return false;
}

TaskSpec token_file_task(const DataConfig& data, const std::vector<std::string>& id2label) {
  const auto train = read_tagged(data.train_file, token_format(data.train_file, data.format), data.tag_column);
  TaskSpec t;
  t.name = "files";
  t.head = Head::kToken;
  t.splits.push_back({"train", data.train_file, true});
  if (!data.validation_file.empty()) t.splits.push_back({"dev", data.validation_file, true});
  if (!data.test_file.empty()) t.splits.push_back({"test", data.test_file, true});
  t.labels = tag_labels(train, id2label);
  t.files = FileSource{data.format, "", "", "", data.tag_column};
  set_metrics(t, data);
  return t;
}

// A tagger's file: each sentence's words and tags, a tag the training file has not refused.
std::vector<Example> tagged_examples(const TaskSpec& task, const std::string& path) {
  const FileSource& s = *task.files;
  std::map<std::string, int> id;
  for (size_t i = 0; i < task.labels.size(); ++i) id[task.labels[i]] = static_cast<int>(i);
  std::vector<Example> out;
  for (auto& sentence : read_tagged(path, token_format(path, s.format), s.tag_column)) {
    Example ex;
    ex.line = sentence.line;
    ex.has_label = true;
    for (size_t w = 0; w < sentence.words.size(); ++w) {
      const auto it = id.find(sentence.tags[w]);
      if (it == id.end())
        throw InputError(path + ":" + std::to_string(sentence.line) + ": tag '" + sentence.tags[w] + "' of word '" +
                         sentence.words[w] + "' is not among the " + std::to_string(task.labels.size()) +
                         " tags of the training file (" + join_list(task.labels) +
                         "); add sentences with it to the training file, or fix the tag");
      ex.tags.push_back(it->second);
      ex.text_a += (w ? " " : "") + sentence.words[w];
    }
    ex.words = std::move(sentence.words);
    out.push_back(std::move(ex));
  }
  return out;
}

}  // namespace

TaskSpec file_task(const DataConfig& data, const std::vector<std::string>& id2label) {
  if (is_token_task(data)) return token_file_task(data, id2label);
  const TableFile train = read_table(data.train_file, file_format(data.train_file, data.format));
  const FileColumns cols = choose_columns(train, data.text_columns, data.label_column);
  const FileLabels labels = infer_labels(train, cols.label, id2label);
  TaskSpec t;
  t.name = "files";
  t.splits.push_back({"train", data.train_file, true});
  if (!data.validation_file.empty()) t.splits.push_back({"dev", data.validation_file, true});
  if (!data.test_file.empty()) t.splits.push_back({"test", data.test_file, true});
  if (labels.kind == LabelKind::kClasses) t.labels = labels.names;
  t.files = FileSource{data.format, cols.text_a, cols.text_b, cols.label};
  set_metrics(t, data);
  return t;
}

std::string data_root_for(const DataConfig& data) {
  return data.from_files() ? "" : resolve_data_root(data.root);
}

std::string read_from(const TaskSpec& task, const std::string& root, const std::string& split) {
  return task.files ? task.find_split(parse_split_spec(split).name).file : root;
}

std::vector<Example> read_file_split(const TaskSpec& task, const std::string& path) {
  HP_CHECK(task.files, "read_file_split: " + task.name + " is not a files' task");
  if (task.head == Head::kToken) return tagged_examples(task, path);
  const FileSource& s = *task.files;
  const TableFile t = read_table(path, file_format(path, s.format));
  FileLabels labels;
  labels.kind = task.is_regression() ? LabelKind::kRegression : LabelKind::kClasses;
  labels.names = task.labels;
  return to_examples(t, FileColumns{s.text_a, s.text_b, s.label}, labels);
}

const TaskSpec& task_of(const DataConfig& data, const std::string& model_dir) {
  if (!data.from_files()) return find_task(data.task);
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<TaskSpec>> built;  // one per distinct setting, for the process
  std::string key;
  for (const auto& part : {data.train_file, data.validation_file, data.test_file, data.format,
                           join_list(data.text_columns), data.label_column, data.metric, data.task_type,
                           data.tag_column, model_dir})
    key += part + '\n';
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = built[key];
  if (!slot) {
    std::vector<std::string> id2label;
    if (std::filesystem::is_regular_file(model_dir + "/config.json"))
      id2label = read_bert_config(model_dir + "/config.json").id2label;
    slot = std::make_unique<TaskSpec>(file_task(data, id2label));
  }
  return *slot;
}

}  // namespace hp::core
