// A user's own data files as a task (see core/data/file_task.h).
#include "core/data/file_task.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "core/base/errors.h"
#include "core/data/file_dataset.h"
#include "core/model/bert_config.h"

namespace hp::core {

namespace {

// The metrics of labels like these, primary first unless data.metric names another of them.
void set_metrics(TaskSpec& t, const DataConfig& data) {
  if (t.is_regression()) t.metrics = {"pearson", "spearman"};
  else t.metrics = {"accuracy", t.labels.size() == 2 ? "f1" : "macro_f1", "mcc"};
  t.primary_metric = t.metrics.front();
  if (data.metric.empty()) return;
  if (std::find(t.metrics.begin(), t.metrics.end(), data.metric) == t.metrics.end())
    throw ConfigError("data.metric = " + data.metric + ": " + (t.is_regression() ? "scores" : "classes") + " in " +
                      data.train_file + " are measured by " + join_list(t.metrics) + "; choose one of them");
  t.primary_metric = data.metric;
}

}  // namespace

TaskSpec file_task(const DataConfig& data, const std::vector<std::string>& id2label) {
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
                           join_list(data.text_columns), data.label_column, data.metric, model_dir})
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
