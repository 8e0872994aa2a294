// GLUE task readers: one table of tasks (folder, file per split, columns, label list, metrics) and a
// TSV reader that turns a task's split into Examples. Torch-free.
// Label lists follow the HF run_glue / GLUE processors' get_labels() order, so class indices match
// checkpoints fine-tuned with HF. Metric math lives in eval/metrics.h; tokenization in core/text/tokenizer.h.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model/bert_config.h"  // Head

namespace hp::core {

// One row of a task split. label: class index into TaskSpec::labels, or the score for regression.
// text_b is empty for single-sentence tasks. line: 1-based physical line in the file (header included).
struct Example {
  std::string text_a;
  std::string text_b;
  float label = 0;
  bool has_label = false;
  int line = 0;
  // A tagger's sentence (TaskSpec::head kToken): its words, and each word's tag as an index into TaskSpec::labels.
  // text_a then holds the words joined by spaces, for logs and reports.
  std::vector<std::string> words;
  std::vector<int> tags;
};

// A tagger's gold labels and predictions are flat, sentence after sentence, each sentence's scored tags followed by
// this marker (core/data/batching.h gold_labels): metrics read sentence ends from it and resamples draw whole
// sentences (eval/metrics.h).
inline constexpr float kSentenceEnd = -1.0f;

// One split of a task: its name ("train", "dev", ...), file name inside the task folder, and whether
// the file starts with a header row (CoLA train/dev have none, CoLA test has one).
struct SplitFile {
  std::string split;
  std::string file;
  bool header = true;
};

// Where the fields are. Files with a header are read by column NAME (a missing label column means an
// unlabelled test split); headerless files by INDEX with an exact column count. Empty name / -1 index = unused.
struct ColumnSpec {
  std::string text_a_name, text_b_name, label_name;
  int text_a_index = -1, text_b_index = -1, label_index = -1;
  int num_columns = 0;  // headerless files only
};

// Where a task read from a user's own files (core/data/file_task.h) finds its fields: the format setting and the
// columns chosen on the training file, applied to every split.
struct FileSource {
  std::string format;  // data.format; empty: each file's extension
  std::string text_a, text_b, label;  // text_b empty: single sentences
  std::string tag_column;  // a tagger's files: data.tag_column (core/data/token_dataset.h read_tagged)
};

// One GLUE-style task. Everything the reader and the metrics need comes from this row.
struct TaskSpec {
  std::string name;  // "sst2", "mnli_subset", ...
  std::string folder;  // relative to the data root: "glue/SST-2"
  std::vector<SplitFile> splits;
  ColumnSpec columns;
  std::vector<std::string> labels;  // GLUE order; empty for regression (STS-B)
  // Raw label spellings mapped to a name in `labels` before lookup (e.g. mnli_subset "0" -> "entailment").
  std::vector<std::pair<std::string, std::string>> label_aliases;
  std::vector<std::string> metrics;  // names understood by hp::eval::compute_metrics
  std::string primary_metric;  // the one used to pick and report results
  // What each class means, GLUE/HF datasets' names (SST-2: negative, positive); empty = `labels` already are.
  // Written as id2label into the models trained or exported for the task.
  std::vector<std::string> label_names{};
  // Regression only: the scores a file may hold (STS-B: 0 to 5); a score outside is an error.
  std::pair<double, double> score_range{0.0, 0.0};
  // Set for a user's files: each split's `file` is then a path of its own, read by core/data/file_dataset.h.
  std::optional<FileSource> files{};
  // What the classifier reads: kToken, a tag per word (Example::words and tags; labels are the tag set).
  Head head = Head::kSequence;

  // label_names[i], else labels[i].
  const std::string& label_name(int i) const;

  // 1 for regression, else labels.size().
  int num_labels() const;
  bool is_regression() const;
  // The file for `split`; ConfigError listing this task's splits if unknown.
  const SplitFile& find_split(const std::string& split) const;
  std::vector<std::string> split_names() const;
};

// The task row for `name`; ConfigError listing valid names if unknown.
const TaskSpec& find_task(const std::string& name);
// All task names, in table order.
std::vector<std::string> task_names();

// A text file of examples as lines, read the one way every reader of examples reads (GLUE splits, `prune
// infer --input`): a UTF-8 BOM and CR line ends stripped, trailing empty lines dropped, a byte that is not
// UTF-8 refused (InputError "path:line: byte N is not UTF-8; ..."), a folder refused by name.
std::vector<std::string> read_text_lines(const std::string& path);

// A split name with an optional slice of its rows in file order, as Hugging Face datasets writes one:
// "train", "train[:-1000]" (all but the last 1000), "train[-1000:]" (the last 1000), "dev[10:20]". Bounds are
// row counts (no percent), negative from the end, clamped to the split as Python slices are.
// A trailing "[holdout:N]" names the N whole rows held out of it (core/data/holdout.h), "[rest:N]" the rows left to
// train on: "train[holdout:1000]", "train[rest:1000]", "train[:5000][holdout:500]".
struct SplitSpec {
  std::string name;  // the split
  std::optional<long> begin, end;  // unset: the split's start / end
  std::size_t holdout = 0;         // rows held out (0: none)
  bool held = false;               // the held-out rows (true) or the rest (false)
  bool sliced() const { return begin || end; }
};
// ConfigError naming `key` and the malformed text (e.g. "train[a:]", "train[1:2", "train[3]").
SplitSpec parse_split_spec(const std::string& spec, const std::string& key = "split");
// "train[-1000:]" back from its parts.
std::string format_split_spec(const SplitSpec& s);
// The rows [begin, end) of `n` after Python's clamping.
std::pair<std::size_t, std::size_t> slice_bounds(const SplitSpec& s, std::size_t n);

// Reads data_root/<folder>/<file of split>, or the slice of its rows the split spec names (parse_split_spec).
// data_root holds glue/ and mnli_subset_textfooler/.
// Splits on TAB only (never CSV quoting); strips a UTF-8 BOM and CR line ends; skips trailing empty
// lines; keeps text byte-for-byte otherwise (SST-2's trailing space stays). Bad rows (wrong column count,
// unknown label, a score outside score_range, bytes that are not UTF-8) -> InputError "path:line: ...".
std::vector<Example> read_task(const TaskSpec& task, const std::string& data_root, const std::string& split);

// The data root: `flag` if non-empty, else $HEADPRUNE_DATA, else "../shared/data" found from the
// current directory or the executable's directory (or any of their parents). InputError if none exists.
std::string resolve_data_root(const std::string& flag);

}  // namespace hp::core
