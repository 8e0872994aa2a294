// What core/data/token_dataset reads and eval/seqeval scores, as JSON on stdout, for tests/core/token_reference.py
// to compare with the `conllu` and `seqeval` packages:
//   hp_token_dataset_dump read [--format F] [--tag-column C] [--id2label x,y,...] FILE
//     prints {"sentences": [{"words", "tags", "line"}, ...], "labels": [...], "is_bio": bool}
//   hp_token_dataset_dump score CASES.json     (CASES: [{"gold": [[tag, ...], ...], "pred": [...]}, ...])
//     prints [{"precision", "recall", "f1", "accuracy", "entities": [[type, begin, end], ...]}, ...], the
//     entities those of the gold sentences joined by an "O" each, as seqeval's get_entities joins them
// An error prints {"error": "<the one-line message>", "type": "InputError"|"ConfigError"} and exits 1.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/base/strings.h"  // split
#include "core/data/token_dataset.h"
#include "eval/seqeval.h"

namespace {

using nlohmann::ordered_json;
namespace hc = hp::core;
using Sentences = std::vector<std::vector<std::string>>;

ordered_json read_cmd(int argc, char** argv) {
  std::string format, tag_column, file;
  std::vector<std::string> id2label;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--format" && has_value) format = argv[++i];
    else if (arg == "--tag-column" && has_value) tag_column = argv[++i];
    else if (arg == "--id2label" && has_value) id2label = hc::split(argv[++i], ',');
    else file = arg;
  }
  const auto sentences = hc::read_tagged(file, hc::token_format(file, format), tag_column);
  ordered_json out;
  out["sentences"] = ordered_json::array();
  for (const auto& s : sentences)
    out["sentences"].push_back({{"words", s.words}, {"tags", s.tags}, {"line", s.line}});
  out["labels"] = hc::tag_labels(sentences, id2label);
  out["is_bio"] = hc::is_bio(out["labels"].get<std::vector<std::string>>());
  return out;
}

ordered_json score_cmd(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw hp::InputError(path + ": cannot open");
  const ordered_json cases = ordered_json::parse(in);
  ordered_json out = ordered_json::array();
  for (const auto& c : cases) {
    const auto gold = c.at("gold").get<Sentences>();
    const auto pred = c.at("pred").get<Sentences>();
    const hp::eval::EntityScores s = hp::eval::entity_scores(gold, pred);
    std::vector<std::string> joined;
    for (const auto& g : gold) {
      joined.insert(joined.end(), g.begin(), g.end());
      joined.emplace_back("O");
    }
    ordered_json ents = ordered_json::array();
    for (const auto& e : hp::eval::entities(joined)) ents.push_back({e.type, e.begin, e.end});
    out.push_back({{"precision", s.precision}, {"recall", s.recall}, {"f1", s.f1}, {"accuracy", s.accuracy},
                   {"entities", ents}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 2 ? argv[1] : "";
  if (cmd != "read" && cmd != "score") {
    std::cerr << "usage: hp_token_dataset_dump read [--format F] [--tag-column C] [--id2label x,y] FILE\n"
                 "       hp_token_dataset_dump score CASES.json\n";
    return 2;
  }
  try {
    std::cout << (cmd == "read" ? read_cmd(argc, argv) : score_cmd(argv[2])).dump() << "\n";
    return 0;
  } catch (const hp::InputError& e) {
    std::cout << ordered_json{{"error", e.what()}, {"type", "InputError"}}.dump() << "\n";
  } catch (const hp::ConfigError& e) {
    std::cout << ordered_json{{"error", e.what()}, {"type", "ConfigError"}}.dump() << "\n";
  }
  return 1;
}
