// A tagger's CoNLL-U, CoNLL and JSON-lines files. See core/data/token_dataset.h.
#include "core/data/token_dataset.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/base/errors.h"  // ConfigError, InputError
#include "core/data/conllu.h"
#include "core/data/file_dataset.h"  // json_line_object
#include "core/data/glue.h"  // read_text_lines

namespace hp::core {
namespace {

using Json = nlohmann::ordered_json;

// "path:line: ".
std::string at(const std::string& path, int line) { return path + ":" + std::to_string(line) + ": "; }

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t") == std::string::npos; }

// ---- CoNLL-U ---------------------------------------------------------------------------------------------------

std::vector<TaggedSentence> read_conllu_tags(const std::string& path, const std::string& tag_column) {
  const std::string column = tag_column.empty() ? "upos" : tag_column;
  using Field = std::vector<std::string> ConlluSentence::*;
  Field field = nullptr;
  if (column == "upos") field = &ConlluSentence::upos;
  else if (column == "xpos") field = &ConlluSentence::xpos;
  else if (column == "deprel") field = &ConlluSentence::deprels;
  else throw_bad_value("data.tag_column", column, "a CoNLL-U file has tag columns upos, xpos and deprel", "pick one");
  std::vector<TaggedSentence> out;
  for (ConlluSentence& s : read_conllu(path)) {
    TaggedSentence t;
    t.words = std::move(s.words);
    t.tags = std::move(s.*field);
    t.line = s.line;
    out.push_back(std::move(t));
  }
  return out;
}

// ---- CoNLL (whitespace columns) --------------------------------------------------------------------------------

// The whitespace-separated columns of a line, as Python's str.split() makes them.
std::vector<std::string> columns_of(const std::string& line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = line.find_first_not_of(" \t", pos)) != std::string::npos) {
    const size_t end = line.find_first_of(" \t", pos);
    out.push_back(line.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    pos = end;
  }
  return out;
}

std::vector<TaggedSentence> read_conll(const std::string& path, const std::vector<std::string>& lines) {
  std::vector<TaggedSentence> out;
  TaggedSentence cur;
  auto finish = [&] {
    if (!cur.words.empty()) out.push_back(std::move(cur));
    cur = TaggedSentence();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const int number = static_cast<int>(i + 1);
    if (is_blank(lines[i]) || lines[i].rfind("-DOCSTART-", 0) == 0) {
      finish();
      continue;
    }
    const std::vector<std::string> cols = columns_of(lines[i]);
    if (cols.size() < 2)
      throw InputError(at(path, number) + "1 column ('" + cols[0] +
                       "'), expected the word and its tag; write \"word tag\" separated by a space or a tab, and a "
                       "blank line between sentences");
    if (cur.words.empty()) cur.line = number;
    cur.words.push_back(cols.front());
    cur.tags.push_back(cols.back());
  }
  finish();
  return out;
}

// ---- JSON lines ------------------------------------------------------------------------------------------------

// The key of the tags: `tag_column` when given, else "ner_tags" when present, else "tags".
std::string tags_key(const Json& obj, const std::string& tag_column) {
  if (!tag_column.empty()) return tag_column;
  return obj.contains("ner_tags") ? "ner_tags" : "tags";
}

std::string tag_text(const Json& v, size_t i, const std::string& where) {
  switch (v.type()) {
    case Json::value_t::string: return v.get<std::string>();
    case Json::value_t::number_integer: return std::to_string(v.get<long long>());
    case Json::value_t::number_unsigned: return std::to_string(v.get<unsigned long long>());
    default:
      throw InputError(where + "tag " + std::to_string(i + 1) + " is a JSON " + v.type_name() +
                       "; write each tag as a string (\"B-PER\") or an integer (a class id)");
  }
}

// The array under `key`; InputError when it is missing or not an array.
const Json& array_at(const Json& obj, const std::string& key, const std::string& name, const std::string& where) {
  if (!obj.contains(key))
    throw InputError(where + "no " + name + " key; write {\"tokens\": [\"word\", ...], \"ner_tags\": [\"tag\", ...]}" +
                     " (or \"tags\", or the key data.tag_column names)");
  const Json& v = obj.at(key);
  if (!v.is_array())
    throw InputError(where + "'" + key + "' is a JSON " + v.type_name() + "; write it as an array, one entry a word");
  return v;
}

TaggedSentence jsonl_sentence(const Json& obj, const std::string& tag_column, const std::string& where) {
  const Json& tokens = array_at(obj, "tokens", "'tokens'", where);
  const std::string key = tags_key(obj, tag_column);
  const Json& tags = array_at(obj, key, tag_column.empty() ? "'ner_tags' or 'tags'" : "'" + tag_column + "'", where);
  if (tokens.size() != tags.size())
    throw InputError(where + std::to_string(tokens.size()) + " tokens but " + std::to_string(tags.size()) + " " +
                     key + "; give every token exactly one tag");
  TaggedSentence s;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!tokens[i].is_string())
      throw InputError(where + "token " + std::to_string(i + 1) + " is a JSON " + tokens[i].type_name() +
                       "; write each token as a string");
    s.words.push_back(tokens[i].get<std::string>());
    s.tags.push_back(tag_text(tags[i], i, where));
  }
  return s;
}

std::vector<TaggedSentence> read_jsonl(const std::string& path, const std::vector<std::string>& lines,
                                       const std::string& tag_column) {
  std::vector<TaggedSentence> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (is_blank(lines[i])) continue;
    const int number = static_cast<int>(i + 1);
    const std::string where = at(path, number);
    const auto obj = json_line_object(lines[i], where, "{\"tokens\": [...], \"ner_tags\": [...]}");
    TaggedSentence s = jsonl_sentence(obj, tag_column, where);
    s.line = number;
    out.push_back(std::move(s));
  }
  return out;
}

// ---- tags ------------------------------------------------------------------------------------------------------

// An integer as std::to_string writes one: "0" or an optional '-' and digits without a leading zero.
bool is_integer(const std::string& s) {
  const size_t from = !s.empty() && s[0] == '-' ? 1 : 0;
  if (from == s.size() || (s[from] == '0' && s.size() > from + 1) || (from && s == "-0")) return false;
  return std::all_of(s.begin() + from, s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Numeric order of two is_integer texts, which may be longer than any machine integer.
bool int_less(const std::string& a, const std::string& b) {
  const bool na = a[0] == '-', nb = b[0] == '-';
  if (na != nb) return na;
  const bool shorter = a.size() != b.size() ? a.size() < b.size() : a < b;
  const bool longer = a.size() != b.size() ? a.size() > b.size() : a > b;
  return na ? longer : shorter;
}

}  // namespace

TokenFormat token_format(const std::string& path, const std::string& setting) {
  if (setting == "conllu") return TokenFormat::kConllu;
  if (setting == "conll") return TokenFormat::kConll;
  if (setting == "jsonl") return TokenFormat::kJsonl;
  if (!setting.empty())
    throw_bad_value("data.format", setting, "a tagger's file is conllu, conll or jsonl", "pick one of them");
  const size_t dot = path.find_last_of("./");
  std::string ext = dot == std::string::npos || path[dot] == '/' ? "" : path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".conllu") return TokenFormat::kConllu;
  if (ext == ".conll" || ext == ".txt" || ext == ".iob" || ext == ".bio") return TokenFormat::kConll;
  if (ext == ".jsonl" || ext == ".json") return TokenFormat::kJsonl;
  throw ConfigError(path + ": cannot tell the format from the name" + (ext.empty() ? "" : " ('" + ext + "')") +
                    "; name the file .conllu, .conll (.txt, .iob, .bio) or .jsonl (.json), or set data.format to "
                    "conllu, conll or jsonl");
}

std::vector<TaggedSentence> read_tagged(const std::string& path, TokenFormat f, const std::string& tag_column) {
  if (f == TokenFormat::kConllu) return read_conllu_tags(path, tag_column);
  if (f == TokenFormat::kConll && !tag_column.empty())
    throw_bad_value("data.tag_column", tag_column, "a CoNLL file's tag is its last column",
                    "leave data.tag_column unset for it");
  const std::vector<std::string> lines = read_text_lines(path);
  if (lines.empty())
    throw InputError(at(path, 1) + "empty file; give one " +
                     (f == TokenFormat::kConll ? "\"word tag\" line per word" : "JSON object per sentence"));
  std::vector<TaggedSentence> out = f == TokenFormat::kConll ? read_conll(path, lines)
                                                             : read_jsonl(path, lines, tag_column);
  if (out.empty())
    throw InputError(at(path, static_cast<int>(lines.size())) + "no sentence in the file (only " +
                     (f == TokenFormat::kConll ? "blank and -DOCSTART- lines" : "blank lines") +
                     "); give one " + (f == TokenFormat::kConll ? "\"word tag\" line per word" : "object per line"));
  return out;
}

std::vector<std::string> tag_labels(const std::vector<TaggedSentence>& train,
                                    const std::vector<std::string>& model_id2label) {
  std::vector<std::string> tags;
  for (const auto& s : train) tags.insert(tags.end(), s.tags.begin(), s.tags.end());
  std::sort(tags.begin(), tags.end());  // char_traits compares bytes unsigned: Python's order of str
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  if (!tags.empty() && std::all_of(tags.begin(), tags.end(), is_integer))
    std::sort(tags.begin(), tags.end(), int_less);
  const bool model_holds_all = !model_id2label.empty() && std::all_of(tags.begin(), tags.end(), [&](const auto& t) {
    return std::find(model_id2label.begin(), model_id2label.end(), t) != model_id2label.end();
  });
  return model_holds_all ? model_id2label : tags;
}

bool is_bio(const std::vector<std::string>& labels) {
  const auto bio = [](const std::string& l) { return l == "O" || l.rfind("B-", 0) == 0 || l.rfind("I-", 0) == 0; };
  return std::all_of(labels.begin(), labels.end(), bio) &&
         std::any_of(labels.begin(), labels.end(), [](const std::string& l) { return l != "O"; });
}

}  // namespace hp::core
