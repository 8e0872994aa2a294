// CoNLL-U reader: one pass over the lines; a sentence is checked at its blank line or at the end.
#include "core/data/conllu.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>
#include <utility>

#include "core/base/errors.h"  // InputError
#include "core/base/strings.h"  // split
#include "core/data/glue.h"  // read_text_lines

namespace hp::core {
namespace {

// CoNLL-U's ten columns, in file order; error messages name a field as "field <i+1> <name>".
constexpr const char* kFieldNames[] = {"ID",    "FORM", "LEMMA",  "UPOS", "XPOS",
                                       "FEATS", "HEAD", "DEPREL", "DEPS", "MISC"};
constexpr int kNumFields = 10;
constexpr int kId = 0, kForm = 1, kUpos = 3, kXpos = 4, kHead = 6, kDeprel = 7;

std::optional<int> parse_int(const std::string& s) {
  int v = 0;
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  std::vector<ConlluSentence> read() {
    const std::vector<std::string> lines = read_text_lines(path_);
    for (const std::string& line : lines) {
      ++line_no_;
      if (line.find_first_not_of(" \t") == std::string::npos) {
        finish_sentence();
      } else if (line[0] == '#') {
        read_comment(line);
      } else {
        read_token(line);
      }
    }
    finish_sentence();
    if (out_.empty())
      fail(std::max(line_no_, 1), "no sentence in the file (no token line before the end)",
           "a sentence is one TAB-separated line of 10 fields per word, ended by a blank line");
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what, const std::string& fix) const {
    throw InputError(path_ + ":" + std::to_string(line) + ": " + what + "; " + fix);
  }
  [[noreturn]] void fail_field(int line, int field, const std::string& what, const std::string& fix) const {
    std::ostringstream os;
    os << what << " (field " << field + 1 << " " << kFieldNames[field] << ")";
    fail(line, os.str(), fix);
  }

  void read_comment(const std::string& line) {
    const std::string body = trim(line.substr(1));
    if (body.rfind("sent_id", 0) != 0) return;
    const std::string rest = trim(body.substr(7));
    if (!rest.empty() && rest[0] == '=') sent_id_ = trim(rest.substr(1));
  }

  void read_token(const std::string& line) {
    const std::vector<std::string> f = split(line, '\t');
    const int found = static_cast<int>(f.size());
    if (found != kNumFields) {
      const std::string where = found < kNumFields ? kFieldNames[found] + std::string(" missing") : "beyond MISC";
      fail(line_no_,
           "found " + std::to_string(found) + " TAB-separated fields, expected 10 (field " +
               std::to_string(std::min(found, kNumFields) + 1) + " " + where + ")",
           "separate ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC by one TAB, _ if empty");
    }
    if (cur_.line == 0) cur_.line = line_no_;
    const std::string& id = f[kId];
    if (id.find_first_of("-.") != std::string::npos && parse_int(id.substr(0, id.find_first_of("-."))))
      return;  // a multiword range "3-4" or an empty node "5.1": not a syntactic word
    const int expected = static_cast<int>(cur_.words.size()) + 1;
    const std::optional<int> n = parse_int(id);
    if (!n)
      fail_field(line_no_, kId, "ID '" + id + "' is not an integer, a range 3-4 or an empty node 5.1",
                 "number the words of each sentence 1, 2, 3, ...");
    if (*n != expected)
      fail_field(line_no_, kId, "ID " + id + " where " + std::to_string(expected) + " was expected",
                 "number the words of each sentence 1, 2, 3, ... and end each sentence with a blank line");
    if (f[kForm].empty())
      fail_field(line_no_, kForm, "empty FORM of word " + id, "write the word form (an underscore is _)");
    const std::optional<int> head = parse_int(f[kHead]);
    if (!head)
      fail_field(line_no_, kHead, "HEAD '" + f[kHead] + "' of word " + id + " is not an integer",
                 "use 0 for the root, else the ID of the head word");
    cur_.words.push_back(f[kForm]);
    cur_.upos.push_back(f[kUpos]);
    cur_.xpos.push_back(f[kXpos]);
    cur_.heads.push_back(*head);
    cur_.deprels.push_back(f[kDeprel]);
    word_lines_.push_back(line_no_);
  }

  void finish_sentence() {
    if (cur_.line != 0) {
      if (cur_.words.empty())
        fail_field(cur_.line, kId, "sentence without a word line (only ranges or empty nodes)",
                   "add its words with integer IDs 1, 2, 3, ...");
      const int m = static_cast<int>(cur_.words.size());
      for (int i = 0; i < m; ++i)
        if (cur_.heads[i] < 0 || cur_.heads[i] > m)
          fail_field(word_lines_[i], kHead,
                     "HEAD " + std::to_string(cur_.heads[i]) + " of word " + std::to_string(i + 1) + " is outside 0.." +
                         std::to_string(m) + " in a sentence of " + std::to_string(m) + " words",
                     "point HEAD at a word of the same sentence, or 0 for the root");
      cur_.sent_id = sent_id_;
      out_.push_back(std::move(cur_));
    }
    cur_ = ConlluSentence();
    word_lines_.clear();
    sent_id_.clear();
  }

  std::string path_;
  int line_no_ = 0;
  std::string sent_id_;
  ConlluSentence cur_;
  std::vector<int> word_lines_;  // the line of each word of cur_, for HEAD range errors
  std::vector<ConlluSentence> out_;
};

}  // namespace

std::vector<ConlluSentence> read_conllu(const std::string& path) { return Reader(path).read(); }

}  // namespace hp::core
