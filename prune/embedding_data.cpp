// Sentences to distil on (see prune/embedding_data.h).
#include "prune/embedding_data.h"

#include <algorithm>
#include <random>

#include "core/base/errors.h"

namespace hp::prune {

std::vector<core::Example> single_sentences(const std::vector<core::Example>& rows) {
  std::vector<core::Example> out;
  std::set<std::string> seen;
  for (const auto& p : rows)
    for (const std::string* t : {&p.text_a, &p.text_b})
      if (!t->empty() && seen.insert(*t).second) {
        core::Example e;
        e.text_a = *t, e.line = p.line;
        out.push_back(e);
      }
  return out;
}

void check_distill_tasks(const std::vector<std::string>& extra, const std::string& task) {
  std::set<std::string> seen;
  for (const auto& name : extra) {
    const auto names = core::task_names();
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw ConfigError("prune.distill_tasks has '" + name + "', no task; use some of " + list);
    const auto splits = core::find_task(name).split_names();
    if (std::find(splits.begin(), splits.end(), "train") == splits.end())
      throw ConfigError("prune.distill_tasks has " + name + ", which has no train split (only training sentences are "
                        "distilled on); remove it");
    if (name == task)
      throw ConfigError("prune.distill_tasks has " + name + ", data.task itself, whose training sentences are always "
                        "distilled on; remove it");
    if (!seen.insert(name).second)
      throw ConfigError("prune.distill_tasks names " + name + " twice; name each task once");
  }
}

std::vector<core::Example> distill_sentences(const std::vector<core::Example>& own, const std::vector<std::string>& extra,
                                             const std::string& root, const std::set<std::string>& exclude, int seed,
                                             std::string* what) {
  std::vector<core::Example> out = own;
  std::set<std::string> seen(exclude);
  for (const auto& e : own) seen.insert(e.text_a);
  for (size_t t = 0; t < extra.size(); ++t) {
    std::vector<core::Example> fresh;
    for (auto& e : single_sentences(core::read_task(core::find_task(extra[t]), root, "train")))
      if (!seen.count(e.text_a)) fresh.push_back(std::move(e));
    const size_t found = fresh.size();
    if (fresh.size() > own.size()) {  // a seeded sample, kept in file order
      std::vector<size_t> idx(fresh.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      std::mt19937_64 gen(static_cast<uint64_t>(seed) * 1000003ULL + 17 + t);
      std::shuffle(idx.begin(), idx.end(), gen);
      idx.resize(own.size());
      std::sort(idx.begin(), idx.end());
      std::vector<core::Example> kept;
      for (size_t i : idx) kept.push_back(std::move(fresh[i]));
      fresh = std::move(kept);
    }
    for (const auto& e : fresh) seen.insert(e.text_a);
    if (what) *what += ", " + extra[t] + " +" + std::to_string(fresh.size()) + " of " + std::to_string(found);
    out.insert(out.end(), fresh.begin(), fresh.end());
  }
  return out;
}

}  // namespace hp::prune
