// seqeval's chunk rules and micro scores, reimplemented. See eval/seqeval.h.
#include "eval/seqeval.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core/base/errors.h"  // HP_CHECK

namespace hp::eval {
namespace {

// A tag split as seqeval splits it (suffix=False): its first character and its type.
struct Part {
  char tag = 0;  // 'B', 'I', 'E', 'S', 'O', '.', or another (a byte of a wider character, 0 for "")
  std::string type;
};

// The bytes of the UTF-8 character that `lead` starts.
size_t char_bytes(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// type: chunk[1:].split('-', maxsplit=1)[-1] or '_'.
Part split_tag(const std::string& chunk) {
  Part p;
  if (chunk.empty()) {
    p.type = "_";
    return p;
  }
  p.tag = chunk[0];
  const std::string rest = chunk.substr(std::min(chunk.size(), char_bytes(static_cast<unsigned char>(chunk[0]))));
  const size_t dash = rest.find('-');
  p.type = dash == std::string::npos ? rest : rest.substr(dash + 1);
  if (p.type.empty()) p.type = "_";
  return p;
}

// seqeval's end_of_chunk: whether a chunk ended between the previous tag and this one.
bool end_of_chunk(char prev_tag, char tag, const std::string& prev_type, const std::string& type) {
  if (prev_tag == 'E' || prev_tag == 'S') return true;
  if ((prev_tag == 'B' || prev_tag == 'I') && (tag == 'B' || tag == 'S' || tag == 'O')) return true;
  return prev_tag != 'O' && prev_tag != '.' && prev_type != type;
}

// seqeval's start_of_chunk: whether a chunk starts at this tag.
bool start_of_chunk(char prev_tag, char tag, const std::string& prev_type, const std::string& type) {
  if (tag == 'B' || tag == 'S') return true;
  if ((prev_tag == 'E' || prev_tag == 'S' || prev_tag == 'O') && (tag == 'E' || tag == 'I')) return true;
  return tag != 'O' && tag != '.' && prev_type != type;
}

}  // namespace

std::vector<Entity> entities(const std::vector<std::string>& tags) {
  std::vector<Entity> out;
  char prev_tag = 'O';
  std::string prev_type;  // "" before the first tag: no tag's type is
  int begin = 0;
  const int n = static_cast<int>(tags.size());
  for (int i = 0; i <= n; ++i) {  // one "O" past the end closes the last chunk
    const Part p = i < n ? split_tag(tags[i]) : Part{'O', "_"};
    if (end_of_chunk(prev_tag, p.tag, prev_type, p.type)) out.push_back({prev_type, begin, i - 1});
    if (start_of_chunk(prev_tag, p.tag, prev_type, p.type)) begin = i;
    prev_tag = p.tag;
    prev_type = p.type;
  }
  return out;
}

EntityScores entity_scores(const std::vector<std::vector<std::string>>& gold,
                           const std::vector<std::vector<std::string>>& pred) {
  HP_CHECK(gold.size() == pred.size(), gold.size() << " gold sentences but " << pred.size() << " predicted");
  std::vector<std::string> flat_gold, flat_pred;
  long correct = 0;
  for (size_t s = 0; s < gold.size(); ++s) {
    HP_CHECK(gold[s].size() == pred[s].size(),
             "sentence " << s << ": " << gold[s].size() << " gold tags but " << pred[s].size() << " predicted");
    for (size_t i = 0; i < gold[s].size(); ++i) correct += gold[s][i] == pred[s][i];
    flat_gold.insert(flat_gold.end(), gold[s].begin(), gold[s].end());
    flat_pred.insert(flat_pred.end(), pred[s].begin(), pred[s].end());
    flat_gold.emplace_back("O");  // seqeval's join of the sentences
    flat_pred.emplace_back("O");
  }
  using Key = std::tuple<std::string, int, int>;
  std::set<Key> true_set, pred_set;
  for (const Entity& e : entities(flat_gold)) true_set.emplace(e.type, e.begin, e.end);
  for (const Entity& e : entities(flat_pred)) pred_set.emplace(e.type, e.begin, e.end);
  long tp = 0;
  for (const Key& k : pred_set) tp += true_set.count(k);
  EntityScores r;
  const long tokens = static_cast<long>(flat_gold.size() - gold.size());
  r.precision = pred_set.empty() ? 0.0 : static_cast<double>(tp) / static_cast<double>(pred_set.size());
  r.recall = true_set.empty() ? 0.0 : static_cast<double>(tp) / static_cast<double>(true_set.size());
  const double denom = r.precision + r.recall;
  r.f1 = 2.0 * r.precision * r.recall / (denom == 0.0 ? 1.0 : denom);
  r.accuracy = tokens == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(tokens);
  return r;
}

}  // namespace hp::eval
