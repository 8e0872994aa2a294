// A user's CSV, TSV and JSON-lines data files. See core/data/file_dataset.h.
#include "core/data/file_dataset.h"

#include <csv.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "core/base/errors.h"  // ConfigError, InputError, HP_CHECK

namespace hp::core {
namespace {

using Json = nlohmann::ordered_json;  // keeps an object's keys in file order

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

// "path:line: ".
std::string at(const std::string& path, int line) { return path + ":" + std::to_string(line) + ": "; }

int column_index(const TableFile& t, const std::string& name) {
  for (size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i] == name) return static_cast<int>(i);
  return -1;
}

// ---- CSV and TSV through libcsv --------------------------------------------------------------------------------

// What libcsv's callbacks build: the rows so far, the fields of the row being read, where it started.
struct CsvRows {
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;
  std::vector<std::string> row;
  int start = 0;  // the line of the row being read
  bool open = false;  // a row has begun and not ended
};

void on_field(void* data, size_t len, void* ctx) {
  auto* s = static_cast<CsvRows*>(ctx);
  s->row.emplace_back(len ? std::string(static_cast<const char*>(data), len) : std::string());
}

void on_row(int /*terminator*/, void* ctx) {
  auto* s = static_cast<CsvRows*>(ctx);
  s->rows.push_back(std::move(s->row));
  s->lines.push_back(s->start);
  s->row.clear();
  s->open = false;
}

// No byte is a space: libcsv would otherwise trim spaces and tabs around unquoted fields.
int no_space(unsigned char) { return 0; }

bool is_line_end(char c) { return c == '\r' || c == '\n'; }

// Feeds one physical line (with its '\n') to the parser. A row can end only at a line-end byte, so the line is
// fed in pieces that end at one; a row opens at its first byte that is not a line end.
void feed_line(csv_parser& p, CsvRows& s, const std::string& line, int number, const std::string& path) {
  const std::string text = line + '\n';
  size_t pos = 0;
  while (pos < text.size()) {
    if (!s.open) {
      size_t begin = pos;
      while (begin < text.size() && is_line_end(text[begin])) ++begin;
      if (begin == text.size()) return;  // only line ends left: they start no row and libcsv skips them
      pos = begin;
      s.open = true;
      s.start = number;
    }
    size_t end = pos;
    while (!is_line_end(text[end])) ++end;
    const size_t n = end + 1 - pos;
    if (csv_parse(&p, text.data() + pos, n, on_field, on_row, &s) != n) {
      if (csv_error(&p) == CSV_EPARSE)
        throw InputError(at(path, number) +
                         "a '\"' inside a field that does not start with one, or text after a "
                         "closing quote; quote the whole field and double each '\"' inside it (RFC 4180)");
      throw InputError(at(path, number) + "cannot parse the row: " + csv_strerror(csv_error(&p)) + "; check the file");
    }
    pos = end + 1;
  }
}

// Every row of the file, the header first, with the line each starts on.
CsvRows parse_delimited(const std::string& path, const std::vector<std::string>& lines, char delim) {
  csv_parser p;
  HP_CHECK(csv_init(&p, CSV_STRICT | CSV_STRICT_FINI) == 0, "libcsv: out of memory");
  csv_set_delim(&p, static_cast<unsigned char>(delim));
  csv_set_space_func(&p, no_space);
  CsvRows s;
  try {
    for (size_t i = 0; i < lines.size(); ++i) feed_line(p, s, lines[i], static_cast<int>(i + 1), path);
  } catch (...) {
    csv_free(&p);
    throw;
  }
  const int fini = csv_fini(&p, on_field, on_row, &s);
  csv_free(&p);
  if (fini != 0)
    throw InputError(at(path, s.start) + "the quoted field that starts in this row never closes; add the closing '\"'");
  return s;
}

// The header: an empty name becomes "Unnamed: i" (pandas' name), a name given twice is refused.
std::vector<std::string> header_of(const std::string& path, std::vector<std::string> names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) names[i] = "Unnamed: " + std::to_string(i);
    for (size_t j = 0; j < i; ++j)
      if (names[j] == names[i])
        throw InputError(at(path, 1) + "the column '" + names[i] + "' appears twice in the header; rename one of them");
  }
  return names;
}

TableFile read_delimited(const std::string& path, const std::vector<std::string>& lines, char delim) {
  CsvRows s = parse_delimited(path, lines, delim);
  if (s.rows.empty()) throw InputError(at(path, 1) + "empty file, expected a header row; add one naming the columns");
  TableFile t;
  t.path = path;
  t.columns = header_of(path, std::move(s.rows[0]));
  const char* what = delim == '\t' ? "tabs" : "commas";
  for (size_t r = 1; r < s.rows.size(); ++r) {
    if (s.rows[r].size() != t.columns.size())
      throw InputError(at(path, s.lines[r]) + std::to_string(s.rows[r].size()) +
                       (s.rows[r].size() == 1 ? " field" : " fields") + ", the header has " +
                       std::to_string(t.columns.size()) + "; quote a field that holds " + what +
                       " or line ends (\"...\")");
    t.rows.push_back(std::move(s.rows[r]));
    t.lines.push_back(s.lines[r]);
  }
  if (t.rows.empty())
    throw InputError(at(path, static_cast<int>(lines.size()) + 1) + "no rows after the header; add the data rows");
  return t;
}

// ---- JSON lines ------------------------------------------------------------------------------------------------

// One JSON value as a cell.
std::string json_cell(const Json& v, const std::string& key, const std::string& where) {
  switch (v.type()) {
    case Json::value_t::string: return v.get<std::string>();
    case Json::value_t::number_integer: return std::to_string(v.get<long long>());
    case Json::value_t::number_unsigned: return std::to_string(v.get<unsigned long long>());
    case Json::value_t::number_float: return v.dump();  // the shortest text that round-trips
    case Json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case Json::value_t::null: return "";
    default:
      throw InputError(where + "the key '" + key + "' holds a JSON " + v.type_name() +
                       "; give it a string, number, bool or null (token classification files are not read yet)");
  }
}

TableFile read_jsonl(const std::string& path, const std::vector<std::string>& lines) {
  TableFile t;
  t.path = path;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = at(path, static_cast<int>(i + 1));
    const Json obj = json_line_object(lines[i], where, "{\"sentence\": ..., \"label\": ...}");
    std::vector<std::string> row(t.columns.size());
    for (const auto& [key, value] : obj.items()) {
      auto [it, added] = index.emplace(key, t.columns.size());
      if (added) {
        t.columns.push_back(key);
        row.emplace_back();
      }
      row[it->second] = json_cell(value, key, where);
    }
    t.rows.push_back(std::move(row));
    t.lines.push_back(static_cast<int>(i + 1));
  }
  if (t.rows.empty()) throw InputError(at(path, 1) + "no JSON objects in the file; write one object per line");
  for (auto& row : t.rows) row.resize(t.columns.size());  // keys first seen in later rows: empty cells
  return t;
}

// ---- labels ----------------------------------------------------------------------------------------------------

enum class NumberKind { kText, kInteger, kFloat };

// What pandas would make of the cell: an integer ([+-]digits), a float (a fraction or an exponent), or text.
NumberKind number_kind(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  auto digits = [&] {
    const size_t from = i;
    while (i < n && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - from;
  };
  if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
  size_t count = digits();
  bool is_float = false;
  if (i < n && s[i] == '.') {
    ++i;
    count += digits();
    is_float = true;
  }
  if (count == 0) return NumberKind::kText;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return NumberKind::kText;
    is_float = true;
  }
  if (i != n) return NumberKind::kText;
  return is_float ? NumberKind::kFloat : NumberKind::kInteger;
}

// An integer's text without '+' or leading zeros ("+007" -> "7", "-0" -> "0"); other text as is.
std::string label_key(const std::string& s) {
  if (number_kind(s) != NumberKind::kInteger) return s;
  const bool negative = s[0] == '-';
  size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
  while (i + 1 < s.size() && s[i] == '0') ++i;
  const std::string magnitude = s.substr(i);
  return negative && magnitude != "0" ? "-" + magnitude : magnitude;
}

// Numeric order of two label_key integers, which may be longer than any machine integer.
bool int_less(const std::string& a, const std::string& b) {
  const bool na = a[0] == '-', nb = b[0] == '-';
  if (na != nb) return na;
  const std::string ma = na ? a.substr(1) : a, mb = nb ? b.substr(1) : b;
  const bool less = ma.size() != mb.size() ? ma.size() < mb.size() : ma < mb;
  const bool more = ma.size() != mb.size() ? ma.size() > mb.size() : ma > mb;
  return na ? more : less;
}

// The first and the rest: "[a, b, c, ... (40 in all)]" for messages.
std::string name_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  if (names.size() <= kShown) return "[" + join(names) + "]";
  const std::vector<std::string> head(names.begin(), names.begin() + kShown);
  return "[" + join(head) + ", ... (" + std::to_string(names.size()) + " in all)]";
}

std::string label_name(const std::string& label_column) { return label_column.empty() ? "label" : label_column; }

}  // namespace

FileFormat file_format(const std::string& path, const std::string& setting) {
  if (setting == "csv") return FileFormat::kCsv;
  if (setting == "tsv") return FileFormat::kTsv;
  if (setting == "jsonl" || setting == "json") return FileFormat::kJsonl;
  if (!setting.empty()) throw_bad_value("data.format", setting, "must be csv, tsv, jsonl or json", "pick one of them");
  const size_t dot = path.find_last_of("./");
  std::string ext = dot == std::string::npos || path[dot] == '/' ? "" : path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".csv") return FileFormat::kCsv;
  if (ext == ".tsv") return FileFormat::kTsv;
  if (ext == ".jsonl" || ext == ".json") return FileFormat::kJsonl;
  throw ConfigError(path + ": cannot tell the format from the name" + (ext.empty() ? "" : " ('" + ext + "')") +
                    "; name the file .csv, .tsv, .jsonl or .json, or set data.format to csv, tsv, jsonl or json");
}

TableFile read_table(const std::string& path, FileFormat f) {
  const std::vector<std::string> lines = read_text_lines(path);
  if (lines.empty()) throw InputError(at(path, 1) + "empty file; give a file with a header row and data rows");
  if (f == FileFormat::kJsonl) return read_jsonl(path, lines);
  return read_delimited(path, lines, f == FileFormat::kTsv ? '\t' : ',');
}

FileColumns choose_columns(const TableFile& t, const std::vector<std::string>& text_columns,
                           const std::string& label_column) {
  FileColumns c;
  c.label = label_name(label_column);
  if (!text_columns.empty()) {
    if (text_columns.size() > 2)
      throw_bad_value("data.text_columns", join(text_columns), "must name 1 or 2 columns", "name the text columns");
    for (const auto& name : text_columns)
      if (column_index(t, name) < 0)
        throw InputError(t.path + ": data.text_columns names '" + name + "', which is not a column; the columns are [" +
                         join(t.columns) + "]; set data.text_columns to one or two of them");
    c.text_a = text_columns[0];
    c.text_b = text_columns.size() > 1 ? text_columns[1] : "";
    return c;
  }
  if (column_index(t, "sentence1") >= 0 && column_index(t, "sentence2") >= 0 && c.label != "sentence1" &&
      c.label != "sentence2") {
    c.text_a = "sentence1";
    c.text_b = "sentence2";
    return c;
  }
  std::vector<std::string> text;
  for (const auto& name : t.columns)
    if (name != c.label) text.push_back(name);
  if (text.empty())
    throw InputError(t.path + ": no text column, the only column is the label '" + c.label +
                     "'; add a text column, or set data.label_column and data.text_columns");
  c.text_a = text[0];
  c.text_b = text.size() > 1 ? text[1] : "";
  return c;
}

FileLabels infer_labels(const TableFile& train, const std::string& label_column,
                        const std::vector<std::string>& model_id2label) {
  const std::string name = label_name(label_column);
  const int col = column_index(train, name);
  if (col < 0)
    throw InputError(train.path + ": data.label_column '" + name + "' is not a column; the columns are [" +
                     join(train.columns) + "]; set data.label_column to the column of labels");
  bool numbers = false, any_float = false;
  std::vector<std::string> keys;
  for (size_t r = 0; r < train.rows.size(); ++r) {
    const std::string& cell = train.rows[r][col];
    const std::string where = at(train.path, train.lines[r]);
    if (cell.empty()) throw InputError(where + "the label is empty; give every training row a label");
    const NumberKind k = number_kind(cell);
    const bool number = k != NumberKind::kText;
    if (r == 0) numbers = number;
    if (number != numbers)
      throw InputError(where + "label '" + cell + "' is " +
                       (number ? "a number but earlier labels are text" : "text but earlier labels are numbers") +
                       "; give every row a number, or every row a text label");
    any_float = any_float || k == NumberKind::kFloat;
    keys.push_back(label_key(cell));
  }
  FileLabels out;
  if (numbers && any_float) {
    out.kind = LabelKind::kRegression;
    return out;
  }
  if (numbers) std::sort(keys.begin(), keys.end(), int_less);
  else std::sort(keys.begin(), keys.end());  // char_traits compares bytes unsigned: Python's order of str
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::string> model;
  for (const auto& n : model_id2label) model.push_back(label_key(n));
  const bool model_holds_all = !model.empty() && std::all_of(keys.begin(), keys.end(), [&](const std::string& k) {
    return std::find(model.begin(), model.end(), k) != model.end();
  });
  out.names = model_holds_all ? model : keys;
  return out;
}

std::vector<Example> to_examples(const TableFile& t, const FileColumns& c, const FileLabels& labels) {
  auto text_column = [&](const std::string& name) {
    const int i = column_index(t, name);
    if (i < 0)
      throw InputError(t.path + ": the text column '" + name +
                       "' (data.text_columns, or chosen from the training "
                       "file) is not a column here; the columns are [" +
                       join(t.columns) + "]; give every file the same columns");
    return i;
  };
  const int a = text_column(c.text_a);
  const int b = c.text_b.empty() ? -1 : text_column(c.text_b);
  const int l = column_index(t, c.label);
  const bool labelled =
      l >= 0 && std::any_of(t.rows.begin(), t.rows.end(), [&](const auto& r) { return !r[l].empty(); });
  std::unordered_map<std::string, int> class_of;
  for (size_t i = 0; i < labels.names.size(); ++i) class_of.emplace(labels.names[i], static_cast<int>(i));
  std::vector<Example> out;
  out.reserve(t.rows.size());
  for (size_t r = 0; r < t.rows.size(); ++r) {
    Example e;
    e.text_a = t.rows[r][a];
    e.text_b = b >= 0 ? t.rows[r][b] : "";
    e.line = t.lines[r];
    e.has_label = labelled;
    if (labelled) {
      const std::string& cell = t.rows[r][l];
      const std::string where = at(t.path, e.line);
      if (cell.empty()) throw InputError(where + "the label is empty; give every row a label, or none (a test file)");
      if (labels.kind == LabelKind::kRegression) {
        if (number_kind(cell) == NumberKind::kText)
          throw InputError(where + "label '" + cell +
                           "' is not a number, and the training labels are scores; fix the label");
        e.label = static_cast<float>(std::strtod(cell.c_str(), nullptr));
      } else {
        const auto it = class_of.find(label_key(cell));
        if (it == class_of.end())
          throw InputError(where + "label '" + cell + "' is not among the training labels " + name_list(labels.names) +
                           "; fix the label, or train on a file that holds it");
        e.label = static_cast<float>(it->second);
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

Json json_line_object(const std::string& line, const std::string& where, const std::string& shape) {
  Json obj;
  try {
    obj = Json::parse(line);
  } catch (const Json::parse_error& e) {
    throw InputError(where + "not valid JSON (byte " + std::to_string(e.byte) +
                     "); write one JSON object per line (JSON lines)");
  } catch (const Json::out_of_range&) {  // a number beyond a double, 1e999
    throw InputError(where + "a number out of range; write it as a string, or within a double's range");
  }
  if (!obj.is_object())
    throw InputError(where + "a JSON " + obj.type_name() + " where an object was expected; write one object per line, " +
                     shape);
  return obj;
}

}  // namespace hp::core
