// A user's own data files (--train-file, --validation-file): CSV, TSV or JSON lines read into a table of text
// cells, its text and label columns chosen and its labels typed as Hugging Face run_glue.py does, then turned
// into Examples (core/data/glue.h). Torch-free.
//
// Every file is read as read_text_lines reads it (glue.h): a UTF-8 BOM and the CR of CRLF dropped, trailing
// empty lines dropped, a byte that is not UTF-8 refused. CSV and TSV follow RFC 4180 (libcsv, strict): a quoted
// field may hold the delimiter, doubled quotes and line ends; cells are kept byte for byte, spaces included.
// Errors are one line each, "file:line: what; fix" (InputError), or ConfigError for a format setting.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/data/glue.h"  // Example

namespace hp::core {

enum class FileFormat { kCsv, kTsv, kJsonl };

// The format `setting` names ("csv", "tsv", "jsonl", "json" = JSON lines), or when it is empty the format of
// the extension of `path` (.csv, .tsv, .jsonl, .json; any case). ConfigError naming data.format or the file.
FileFormat file_format(const std::string& path, const std::string& setting);

// A file as a table of text cells. columns: the header row (CSV/TSV; an empty name becomes "Unnamed: i" as
// pandas names it) or the union of the JSON objects' keys in first-seen order. rows[r][c]: the cell of
// column c; a JSON null or missing key is "". lines[r]: the 1-based physical line where row r starts.
struct TableFile {
  std::string path;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;
};

// Reads `path` as `f`. JSON values: a string as is, an integer as its digits, a float as the shortest text
// that round-trips ("0.5"), a bool as "true"/"false", null as "". InputError for an empty file, a file
// without rows, a row with another number of fields than the header, a stray or unclosed quote, a duplicate
// column, an invalid JSON line, a line that is not an object, a value that is an array or object, bytes that
// are not UTF-8.
TableFile read_table(const std::string& path, FileFormat f);

// The columns of text and label. text_b is empty for single-sentence data.
struct FileColumns {
  std::string text_a, text_b, label;
};

// run_glue.py's choice: the `text_columns` given (1 or 2 names); else sentence1 and sentence2 when both are
// columns; else the first two columns other than the label (one if there is only one). label_column "" means
// "label". InputError naming data.text_columns and the columns found when a named column is missing or no
// text column is left. The label column may be absent here (a test file); infer_labels requires it.
FileColumns choose_columns(const TableFile& t, const std::vector<std::string>& text_columns,
                           const std::string& label_column);

enum class LabelKind { kClasses, kRegression };

// kClasses: names[i] is class i. kRegression: names is empty, labels are scores.
struct FileLabels {
  LabelKind kind = LabelKind::kClasses;
  std::vector<std::string> names;
};

// The labels of the training file, typed as pandas types a column: all integers -> classes sorted numerically
// (written without sign or leading zeros: "+07" is class "7"); all text -> classes sorted by bytes (Python's
// sorted on str); numbers with at least one non-integer -> regression. When `model_id2label` (the model's
// config.json id2label, in id order) holds every class name, its order is kept (a fine-tuned model keeps its
// ids). InputError "file:line: ..." for a missing label column (naming data.label_column), an empty label, or
// numbers mixed with text.
FileLabels infer_labels(const TableFile& train, const std::string& label_column,
                        const std::vector<std::string>& model_id2label);

// The rows of `t` as Examples: label = class index into labels.names, or the score. A file without the label
// column, or whose label cells are all empty, gives unlabelled rows (has_label false: a test file).
// InputError "file:line: ..." for a text column the file lacks, a label not among the training labels, a score
// that is not a number, an empty label among labelled rows.
std::vector<Example> to_examples(const TableFile& t, const FileColumns& c, const FileLabels& labels);

// One JSON-lines row: the object on `line`, its keys in file order; `where` starts the messages ("file:line: ").
// InputError for invalid JSON, a number beyond a double, or a value that is not an object (`shape` shows the object
// expected, e.g. {"sentence": ..., "label": ...}).
nlohmann::ordered_json json_line_object(const std::string& line, const std::string& where, const std::string& shape);

}  // namespace hp::core
