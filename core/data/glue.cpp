// GLUE task table and TSV reader. See core/data/glue.h.
#include "core/data/glue.h"

#include <utf8proc.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/errors.h"  // ConfigError, InputError
#include "core/base/strings.h"  // split
#include "core/data/file_task.h"
#include "core/data/holdout.h"

namespace hp::core {
namespace {

namespace fs = std::filesystem;

// Header-named columns (GLUE files with a header row).
ColumnSpec by_name(std::string a, std::string b, std::string label) {
  ColumnSpec c;
  c.text_a_name = std::move(a);
  c.text_b_name = std::move(b);
  c.label_name = std::move(label);
  return c;
}

// The task table. Label lists are HF's get_labels() order and must not be reordered: class index i
// of a fine-tuned checkpoint's classifier means labels[i].
// mnli_subset (TextFooler's MNLI dev subset): no header, gold_label<TAB>premise<TAB>hypothesis.
// mnli_matched/mnli_mismatched spell labels as names; mnli.tsv (= mismatched) uses the codes
// 0 entailment, 1 neutral, 2 contradiction, which are NOT the GLUE indices: they are mapped by name
// through label_aliases, so "0" becomes class 1 (entailment) here.
// The GLUE tasks of one or two sentences but MNLI, in GLUE's order.
std::vector<TaskSpec> glue_tasks() {
  const std::vector<std::string> k01 = {"0", "1"};
  const std::vector<std::string> kNli2 = {"entailment", "not_entailment"};
  const std::vector<SplitFile> kStd = {
      {"train", "train.tsv", true}, {"dev", "dev.tsv", true}, {"test", "test.tsv", true}};
  std::vector<TaskSpec> t;

  t.push_back({"sst2",
               "glue/SST-2",
               kStd,
               by_name("sentence", "", "label"),
               k01,
               {},
               {"accuracy"},
               "accuracy",
               {"negative", "positive"}});

  ColumnSpec cola = by_name("sentence", "", "label");  // names: test.tsv has "index<TAB>sentence"
  cola.text_a_index = 3;  // train/dev: source, label, mark, sentence
  cola.label_index = 1;
  cola.num_columns = 4;
  t.push_back({"cola",
               "glue/CoLA",
               {{"train", "train.tsv", false}, {"dev", "dev.tsv", false}, {"test", "test.tsv", true}},
               cola,
               k01,
               {},
               {"mcc"},
               "mcc",
               {"unacceptable", "acceptable"}});

  // MRPC header: Quality, #1 ID, #2 ID, #1 String, #2 String (test: index instead of Quality).
  t.push_back({"mrpc",
               "glue/MRPC",
               kStd,
               by_name("#1 String", "#2 String", "Quality"),
               k01,
               {},
               {"f1", "accuracy"},
               "f1",
               {"not_equivalent", "equivalent"}});
  t.push_back(
      {"rte", "glue/RTE", kStd, by_name("sentence1", "sentence2", "label"), kNli2, {}, {"accuracy"}, "accuracy"});
  // STS-B: regression on [0, 5]; the BERT paper reports Spearman, so it is primary.
  t.push_back({"stsb",
               "glue/STS-B",
               kStd,
               by_name("sentence1", "sentence2", "score"),
               {},
               {},
               {"pearson", "spearman"},
               "spearman",
               {},
               {0.0, 5.0}});
  t.push_back({"wnli",
               "glue/WNLI",
               kStd,
               by_name("sentence1", "sentence2", "label"),
               k01,
               {},
               {"accuracy"},
               "accuracy",
               {"not_entailment", "entailment"}});
  t.push_back(
      {"qnli", "glue/QNLI", kStd, by_name("question", "sentence", "label"), kNli2, {}, {"accuracy"}, "accuracy"});
  t.push_back({"qqp",
               "glue/QQP",
               kStd,
               by_name("question1", "question2", "is_duplicate"),
               k01,
               {},
               {"f1", "accuracy"},
               "f1",
               {"not_duplicate", "duplicate"}});
  return t;
}

// MNLI: the full GLUE task, and TextFooler's dev subset (the one on this machine).
std::vector<TaskSpec> mnli_tasks() {
  const std::vector<std::string> kNli3 = {"contradiction", "entailment", "neutral"};
  std::vector<TaskSpec> t;
  // Full GLUE MNLI: "dev" is dev_matched, as in HF run_glue.
  t.push_back({"mnli",
               "glue/MNLI",
               {{"train", "train.tsv", true},
                {"dev", "dev_matched.tsv", true},
                {"dev_matched", "dev_matched.tsv", true},
                {"dev_mismatched", "dev_mismatched.tsv", true},
                {"test", "test_matched.tsv", true},
                {"test_matched", "test_matched.tsv", true},
                {"test_mismatched", "test_mismatched.tsv", true}},
               by_name("sentence1", "sentence2", "gold_label"),
               kNli3,
               {},
               {"accuracy"},
               "accuracy"});

  ColumnSpec sub;
  sub.label_index = 0;
  sub.text_a_index = 1;
  sub.text_b_index = 2;
  sub.num_columns = 3;
  t.push_back({"mnli_subset",
               "mnli_subset_textfooler",
               {{"dev", "mnli_matched.tsv", false},
                {"matched", "mnli_matched.tsv", false},
                {"mismatched", "mnli_mismatched.tsv", false},
                {"mismatched_numeric", "mnli.tsv", false}},
               sub,
               kNli3,
               {{"0", "entailment"}, {"1", "neutral"}, {"2", "contradiction"}},
               {"accuracy"},
               "accuracy"});
  return t;
}

std::vector<TaskSpec> make_tasks() {
  std::vector<TaskSpec> t = glue_tasks();
  for (auto& task : mnli_tasks()) t.push_back(std::move(task));
  return t;
}

const std::vector<TaskSpec>& tasks() {
  static const std::vector<TaskSpec> kTasks = make_tasks();
  return kTasks;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// The offset of the first byte that does not start a valid UTF-8 sequence, or -1.
long first_invalid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  long i = 0;
  const long n = static_cast<long>(s.size());
  while (i < n) {
    utf8proc_int32_t c = 0;
    const auto len = utf8proc_iterate(p + i, n - i, &c);
    if (len <= 0) return i;
    i += len;
  }
  return -1;
}

}  // namespace

std::vector<std::string> read_text_lines(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a folder, not a text file; give the file itself");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the file; check the path and its permissions");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lines.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (const long bad = first_invalid_utf8(line); bad >= 0)
      throw InputError(path + ":" + std::to_string(lines.size() + 1) + ": byte " + std::to_string(bad + 1) +
                       " is not UTF-8; re-save the file as UTF-8");
    lines.push_back(std::move(line));
  }
  if (in.bad()) throw InputError(path + ": read failed; check the file is readable");
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

namespace {

int index_of(const std::vector<std::string>& header, const std::string& name) {
  if (name.empty()) return -1;
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

// Resolved column positions for one file.
struct Layout {
  int a = -1, b = -1, label = -1;
  size_t num_columns = 0;
  std::string names;  // for messages: "sentence, label"
};

Layout layout_for(const TaskSpec& task, const SplitFile& sf, const std::vector<std::string>& lines,
                  const std::string& path) {
  const ColumnSpec& c = task.columns;
  Layout l;
  if (!sf.header) {
    l.a = c.text_a_index;
    l.b = c.text_b_index;
    l.label = c.label_index;
    l.num_columns = static_cast<size_t>(c.num_columns);
    l.names = "text_a at " + std::to_string(l.a) + (l.b >= 0 ? ", text_b at " + std::to_string(l.b) : std::string()) +
              ", label at " + std::to_string(l.label);
    return l;
  }
  if (lines.empty()) throw InputError(path + ":1: empty file, expected a header row; fix the file");
  std::vector<std::string> header = core::split(lines[0], '\t');
  l.a = index_of(header, c.text_a_name);
  l.b = index_of(header, c.text_b_name);
  l.label = index_of(header, c.label_name);  // absent in test splits -> unlabelled
  l.num_columns = header.size();
  l.names = join(header);
  bool missing_b = !c.text_b_name.empty() && l.b < 0;
  if (l.a < 0 || missing_b) {
    throw InputError(path + ":1: header '" + join(header) + "' lacks column '" +
                     (l.a < 0 ? c.text_a_name : c.text_b_name) + "' for task " + task.name +
                     "; fix the file or pass the right --task");
  }
  return l;
}

float parse_label(const TaskSpec& task, const std::string& raw, const std::string& where) {
  if (task.is_regression()) {
    const char* s = raw.c_str();
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s, &end);
    if (raw.empty() || end != s + raw.size() || errno == ERANGE || !std::isfinite(v)) {
      throw InputError(where + ": score '" + raw + "' is not a number for regression task " + task.name +
                       "; fix the file or pass the right --task");
    }
    const auto [lo, hi] = task.score_range;
    if (v < lo || v > hi) {
      char range[64];
      std::snprintf(range, sizeof range, "%g to %g", lo, hi);
      throw InputError(where + ": score " + raw + " is outside " + range + ", the scale of " + task.name +
                       "; fix the file or pass the right --task");
    }
    return static_cast<float>(v);
  }
  std::string name = raw;
  for (const auto& alias : task.label_aliases)
    if (alias.first == raw) name = alias.second;
  for (size_t i = 0; i < task.labels.size(); ++i)
    if (task.labels[i] == name) return static_cast<float>(i);
  throw InputError(where + ": label '" + raw + "' is not one of {" + join(task.labels) + "} for task " + task.name +
                   "; fix the file or pass the right --task");
}

bool is_data_root(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p / "glue", ec) || fs::is_directory(p / "mnli_subset_textfooler", ec);
}

// dir/../shared/data for dir and each of its parents.
std::string search_up(fs::path dir) {
  std::error_code ec;
  for (int depth = 0; depth < 16 && !dir.empty(); ++depth) {
    fs::path cand = dir / ".." / "shared" / "data";
    if (is_data_root(cand)) return fs::weakly_canonical(cand, ec).string();
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return "";
}

}  // namespace

const std::string& TaskSpec::label_name(int i) const {
  return i < static_cast<int>(label_names.size()) ? label_names.at(i) : labels.at(i);
}

int TaskSpec::num_labels() const { return is_regression() ? 1 : static_cast<int>(labels.size()); }

bool TaskSpec::is_regression() const { return labels.empty(); }

const SplitFile& TaskSpec::find_split(const std::string& split) const {
  for (const auto& s : splits)
    if (s.split == split) return s;
  throw ConfigError("data.split: unknown split '" + split + "' for task " + name + "; use one of " +
                    join(split_names()));
}

std::vector<std::string> TaskSpec::split_names() const {
  std::vector<std::string> out;
  for (const auto& s : splits) out.push_back(s.split);
  return out;
}

const TaskSpec& find_task(const std::string& name) {
  for (const auto& t : tasks())
    if (t.name == name) return t;
  throw ConfigError("data.task: unknown task '" + name + "'; use one of " + join(task_names()));
}

std::vector<std::string> task_names() {
  std::vector<std::string> out;
  for (const auto& t : tasks()) out.push_back(t.name);
  return out;
}

namespace {

// One slice bound: empty, or an optional '-' and digits.
std::optional<long> parse_bound(const std::string& text, const std::string& key, const std::string& spec) {
  if (text.empty()) return std::nullopt;
  const size_t digits = text[0] == '-' ? 1 : 0;
  const bool ok = text.size() > digits && text.size() - digits <= 12 &&
                  text.find_first_not_of("0123456789", digits) == std::string::npos;
  if (!ok)
    throw ConfigError(key + " = '" + spec + "': '" + text +
                      "' is not a row count; write a slice of rows as NAME[begin:end], e.g. train[:-1000] or "
                      "train[-1000:]");
  return std::stol(text);
}

}  // namespace

SplitSpec parse_split_spec(const std::string& spec, const std::string& key) {
  SplitSpec s;
  std::string rows = spec;  // the name and its slice, without a trailing [holdout:N] / [rest:N]
  const size_t last = spec.rfind('[');
  for (const char* part : {"holdout:", "rest:"}) {
    if (last == std::string::npos || spec.compare(last + 1, std::strlen(part), part) != 0) continue;
    const std::string count = spec.substr(last + 1 + std::strlen(part), spec.size() - last - 2 - std::strlen(part));
    const bool digits =
        !count.empty() && count.size() <= 12 && count.find_first_not_of("0123456789") == std::string::npos;
    const long n = digits && spec.back() == ']' ? std::stol(count) : 0;
    if (n <= 0 || last == 0)
      throw ConfigError(key + " = '" + spec + "': write NAME[" + part +
                        "N] with N a positive row count, e.g. train[holdout:1000] (1000 whole rows held out) or "
                        "train[rest:1000] (the rows left to train on)");
    s.holdout = static_cast<std::size_t>(n);
    s.held = part[0] == 'h';
    rows = spec.substr(0, last);
  }
  const size_t open = rows.find('[');
  s.name = rows.substr(0, open);
  if (open == std::string::npos) return s;
  const size_t colon = rows.find(':', open);
  if (s.name.empty() || rows.back() != ']' || colon == std::string::npos ||
      rows.find('[', open + 1) != std::string::npos || rows.find(':', colon + 1) != std::string::npos)
    throw ConfigError(key + " = '" + spec +
                      "': write a split, or a slice of its rows as NAME[begin:end], e.g. train[:-1000] (all but the "
                      "last 1000) or train[-1000:] (the last 1000)");
  s.begin = parse_bound(rows.substr(open + 1, colon - open - 1), key, spec);
  s.end = parse_bound(rows.substr(colon + 1, rows.size() - colon - 2), key, spec);
  return s;
}

std::string format_split_spec(const SplitSpec& s) {
  std::string out = s.name;
  if (s.sliced())
    out += "[" + (s.begin ? std::to_string(*s.begin) : "") + ":" + (s.end ? std::to_string(*s.end) : "") + "]";
  if (s.holdout) out += std::string(s.held ? "[holdout:" : "[rest:") + std::to_string(s.holdout) + "]";
  return out;
}

std::pair<std::size_t, std::size_t> slice_bounds(const SplitSpec& s, std::size_t n) {
  const long size = static_cast<long>(n);
  auto at = [size](std::optional<long> v, long unset) {
    const long x = v ? (*v < 0 ? *v + size : *v) : unset;
    return static_cast<std::size_t>(std::clamp(x, 0L, size));
  };
  const std::size_t b = at(s.begin, 0), e = at(s.end, size);
  return {b, std::max(b, e)};
}

namespace {

// The rows of a GLUE-style split file, every row of it.
std::vector<Example> read_glue_rows(const TaskSpec& task, const std::string& data_root, const SplitFile& sf) {
  const std::string& split = sf.split;
  const std::string path = (fs::path(data_root) / task.folder / sf.file).string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw InputError(path + ": file not found (task " + task.name + ", split " + split + ", data root '" + data_root +
                     "'); pass --data-root DIR or set HEADPRUNE_DATA=DIR, where DIR holds glue/ and "
                     "mnli_subset_textfooler/");
  }
  const std::vector<std::string> lines = read_text_lines(path);
  const Layout l = layout_for(task, sf, lines, path);
  std::vector<Example> out;
  out.reserve(lines.size());
  for (size_t i = sf.header ? 1 : 0; i < lines.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 1);
    std::vector<std::string> f = core::split(lines[i], '\t');
    if (f.size() != l.num_columns) {
      throw InputError(where + ": expected " + std::to_string(l.num_columns) + " tab-separated columns (" + l.names +
                       "), got " + std::to_string(f.size()) + "; fix the file or pass the right --task");
    }
    Example ex;
    ex.line = static_cast<int>(i + 1);
    ex.text_a = f[l.a];
    if (l.b >= 0) ex.text_b = f[l.b];
    if (l.label >= 0) {
      ex.label = parse_label(task, f[l.label], where);
      ex.has_label = true;
    }
    out.push_back(std::move(ex));
  }
  if (out.empty())
    throw InputError(path + ": no examples (" + (lines.empty() ? "the file is empty" : "only a header") +
                     "); restore the split's rows, or choose another --split");
  return out;
}

}  // namespace

std::vector<Example> read_task(const TaskSpec& task, const std::string& data_root, const std::string& spec) {
  const SplitSpec ss = parse_split_spec(spec);
  const SplitFile& sf = task.find_split(ss.name);
  const std::string path = task.files ? sf.file : (fs::path(data_root) / task.folder / sf.file).string();
  std::vector<Example> out = task.files ? read_file_split(task, sf.file) : read_glue_rows(task, data_root, sf);
  if (ss.sliced()) {
    const auto [b, e] = slice_bounds(ss, out.size());
    if (b == e)
      throw ConfigError("split " + spec + ": the slice holds no row of the " + std::to_string(out.size()) + " in " +
                        path + "; choose bounds within them");
    out = std::vector<Example>(out.begin() + static_cast<long>(b), out.begin() + static_cast<long>(e));
  }
  if (!ss.holdout) return out;
  const Holdout h = hold_out(out, ss.holdout);
  std::vector<Example> part;
  for (std::size_t r : ss.held ? h.held : h.rest) part.push_back(std::move(out[r]));
  if (part.empty())
    throw ConfigError("split " + spec + ": no row of the " + std::to_string(out.size()) + " in " + path + " is " +
                      (ss.held ? "whole (contained in no other row)" : "left once the held-out rows' text is removed") +
                      "; hold out fewer rows, or name a split to choose on (prune.select_split)");
  return part;
}

std::string resolve_data_root(const std::string& flag) {
  const std::string fix =
      "pass --data-root DIR or set HEADPRUNE_DATA=DIR, where DIR holds glue/<TASK>/*.tsv as written "
      "by GLUE's download_glue_data.py (and optionally mnli_subset_textfooler/)";
  if (!flag.empty()) {
    if (!is_data_root(flag))
      throw InputError("--data-root " + flag + ": no glue/ or mnli_subset_textfooler/ inside; " + fix);
    return flag;
  }
  if (const char* env = std::getenv("HEADPRUNE_DATA"); env && *env) {
    if (!is_data_root(env))
      throw InputError(std::string("HEADPRUNE_DATA=") + env + ": no glue/ or mnli_subset_textfooler/ inside; " + fix);
    return env;
  }
  std::error_code ec;
  fs::path cwd = fs::current_path(ec);
  if (!ec) {
    if (std::string r = search_up(cwd); !r.empty()) return r;
  }
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (std::string r = search_up(exe.parent_path()); !r.empty()) return r;
  }
  throw InputError("data root: none given and no ../shared/data found from '" + cwd.string() + "' or '" +
                   exe.parent_path().string() + "'; " + fix);
}

}  // namespace hp::core
