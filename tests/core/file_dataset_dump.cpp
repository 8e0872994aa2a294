// What core/data/file_dataset makes of a user's data files, as JSON on stdout, for
// tests/core/file_dataset_reference.py to compare with pandas:
//   hp_file_dataset_dump [--format F] [--text-columns a[,b]] [--label-column L] [--id2label x,y,...] TRAIN [OTHER...]
// prints {"columns": {...}, "labels": {...}, "files": [{path, columns, rows, lines, examples}, ...]} (TRAIN first),
// or {"error": "<the one-line message>", "type": "InputError"|"ConfigError"} and exits 1.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/base/strings.h"  // split
#include "core/data/file_dataset.h"

namespace {

using nlohmann::ordered_json;
namespace hc = hp::core;

struct Args {
  std::string format, label_column;
  std::vector<std::string> text_columns, id2label, files;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--format" && has_value) a.format = argv[++i];
    else if (arg == "--label-column" && has_value) a.label_column = argv[++i];
    else if (arg == "--text-columns" && has_value) a.text_columns = hc::split(argv[++i], ',');
    else if (arg == "--id2label" && has_value) a.id2label = hc::split(argv[++i], ',');
    else a.files.push_back(arg);
  }
  return a;
}

ordered_json dump_file(const hc::TableFile& t, const hc::FileColumns& c, const hc::FileLabels& labels) {
  ordered_json examples = ordered_json::array();
  for (const auto& e : hc::to_examples(t, c, labels))
    examples.push_back(
        {{"text_a", e.text_a}, {"text_b", e.text_b}, {"label", e.label}, {"has_label", e.has_label}, {"line", e.line}});
  return {{"path", t.path}, {"columns", t.columns}, {"rows", t.rows}, {"lines", t.lines}, {"examples", examples}};
}

ordered_json run(const Args& a) {
  std::vector<hc::TableFile> tables;
  for (const auto& f : a.files) tables.push_back(hc::read_table(f, hc::file_format(f, a.format)));
  const hc::FileColumns c = hc::choose_columns(tables.at(0), a.text_columns, a.label_column);
  const hc::FileLabels labels = hc::infer_labels(tables[0], a.label_column, a.id2label);
  ordered_json out;
  out["columns"] = {{"text_a", c.text_a}, {"text_b", c.text_b}, {"label", c.label}};
  out["labels"] = {{"kind", labels.kind == hc::LabelKind::kRegression ? "regression" : "classes"},
                   {"names", labels.names}};
  out["files"] = ordered_json::array();
  for (const auto& t : tables) out["files"].push_back(dump_file(t, c, labels));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.files.empty()) {
    std::cerr << "usage: hp_file_dataset_dump [--format F] [--text-columns a,b] [--label-column L] "
                 "[--id2label x,y] TRAIN [OTHER...]\n";
    return 2;
  }
  try {
    std::cout << run(a).dump() << "\n";
    return 0;
  } catch (const hp::InputError& e) {
    std::cout << ordered_json{{"error", e.what()}, {"type", "InputError"}}.dump() << "\n";
  } catch (const hp::ConfigError& e) {
    std::cout << ordered_json{{"error", e.what()}, {"type", "ConfigError"}}.dump() << "\n";
  }
  return 1;
}
