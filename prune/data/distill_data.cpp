// Sentences to distil on (see prune/data/distill_data.h).
#include "prune/data/distill_data.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <random>

#include "core/base/config.h"  // join_list
#include "core/base/errors.h"

namespace hp::prune {

namespace fs = std::filesystem;

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

namespace {

// The key two texts are the same by when held-out text is left out: ASCII letters and digits lower-cased, other bytes
// (UTF-8) kept. GLUE's copies of one sentence differ in tokenisation: MRPC's are PTB-tokenised ("Myanmar 's"),
// STS-B's not, and 245 MRPC training sentences are STS-B dev sentences so compared.
std::string comparable(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    if (std::isalnum(c) || c >= 0x80) out += static_cast<char>(std::tolower(c));
  return out;
}

bool pairs(const core::TaskSpec& t) { return !t.columns.text_b_name.empty() || t.columns.text_b_index >= 0; }

}  // namespace

void check_distill_tasks(const std::vector<std::string>& extra, const std::string& task) {
  std::set<std::string> seen;
  for (const auto& name : extra) {
    const auto names = core::task_names();
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw ConfigError("prune.distill_tasks has '" + name + "', no task; use some of " + core::join_list(names));
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
  std::set<std::string> seen;  // compared as distill_rows compares: another task's copy may be tokenised otherwise
  for (const auto& t : exclude) seen.insert(comparable(t));
  for (const auto& e : own) seen.insert(comparable(e.text_a));
  for (size_t t = 0; t < extra.size(); ++t) {
    std::vector<core::Example> fresh;
    std::set<std::string> taken;
    for (auto& e : single_sentences(core::read_task(core::find_task(extra[t]), root, "train"))) {
      const std::string key = comparable(e.text_a);
      if (!seen.count(key) && taken.insert(key).second) fresh.push_back(std::move(e));
    }
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
    for (const auto& e : fresh) seen.insert(comparable(e.text_a));
    if (what) *what += ", " + extra[t] + " +" + std::to_string(fresh.size()) + " of " + std::to_string(found);
    out.insert(out.end(), fresh.begin(), fresh.end());
  }
  return out;
}

std::vector<core::Example> distill_rows(const core::TaskSpec& task, const std::vector<std::string>& extra,
                                        const std::string& root, std::string* what) {
  std::set<std::string> own;  // the texts of the task's splits
  for (const auto& split : task.splits)
    if (fs::exists(root + "/" + task.folder + "/" + split.file))
      for (const auto& e : core::read_task(task, root, split.split))
        own.insert(comparable(e.text_a)), own.insert(comparable(e.text_b));
  own.erase("");
  std::set<std::string> taken_rows;
  std::vector<core::Example> out;
  for (const auto& name : extra) {
    const core::TaskSpec& source = core::find_task(name);
    if (pairs(task) && !pairs(source))
      throw ConfigError("prune.distill_tasks has " + name + ", whose rows are single texts, and " + task.name +
                        "'s are pairs; name pair tasks (e.g. stsb, rte), or remove it");
    std::vector<core::Example> rows = core::read_task(source, root, "train");
    if (!pairs(task)) rows = single_sentences(rows);
    size_t taken = 0;
    for (auto& e : rows) {
      const std::string a = comparable(e.text_a), b = comparable(e.text_b);
      if (own.count(a) || own.count(b) || !taken_rows.insert(a + '\t' + b).second) continue;
      e.label = 0, e.has_label = false;
      out.push_back(std::move(e));
      ++taken;
    }
    if (what) *what += std::string(what->empty() ? "" : ", ") + name + " +" + std::to_string(taken) + " of " +
                                     std::to_string(rows.size());
  }
  return out;
}

}  // namespace hp::prune
