// A user's own data files as a task (data.train_file, data.validation_file, data.test_file): the splits train,
// dev and test, their columns and labels chosen on the training file as Hugging Face run_glue.py chooses them
// (core/data/file_dataset.h), the metrics those labels call for. Every stage reads the task through task_of, so a
// run on files is the run on a GLUE task. Torch-free.
#pragma once

#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/data/glue.h"

namespace hp::core {

// The task `data` names: data.task's row of the GLUE table, or, with data.train_file set, the files' task built
// once (by file_task, with `model_dir`'s config.json id2label when there is one) and kept for the process.
const TaskSpec& task_of(const DataConfig& data, const std::string& model_dir);

// The files' task: name "files"; labels as infer_labels gives them (the model's `id2label` order when it holds
// every class); metrics accuracy and f1 (two classes) or macro_f1, or pearson and spearman for scores; the primary
// one data.metric, else the first. ConfigError naming data.metric when it is none of those; InputError from
// reading the training file.
TaskSpec file_task(const DataConfig& data, const std::vector<std::string>& id2label);

// The data root data.task's files are read from (resolve_data_root of data.root); "" for a user's files, whose
// paths are their own, so that a machine without GLUE's folder runs them.
std::string data_root_for(const DataConfig& data);

// Where `split` (a split spec) of `task` is read, for the log: its file for a user's files, else the data root.
std::string read_from(const TaskSpec& task, const std::string& root, const std::string& split);

// Every row of the file `path` of a files' task, read with the training file's columns and labels.
std::vector<Example> read_file_split(const TaskSpec& task, const std::string& path);

}  // namespace hp::core
