// The selection slice (see prune/selection.h).
#include "prune/selection.h"

#include <algorithm>

#include "core/base/errors.h"

namespace hp::prune {

namespace {

bool has_split(const core::TaskSpec& task, const std::string& name) {
  const auto names = task.split_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A named split (prune.select_split): checked, never the evaluation split.
Selection named(const core::Config& cfg, const core::TaskSpec& task) {
  const core::PruneConfig& P = cfg.prune;
  check_split(task, "prune.select_split", P.select_split);
  if (P.select_split == P.eval_split)
    throw ConfigError("prune.select_split = " + P.select_split +
                      " is prune.eval_split: choices made on the split the run reports are optimistic by "
                      "construction; leave prune.select_split empty (rows held out of train.train_split) or name "
                      "another split");
  Selection s{cfg, P.select_split, "choices made on " + P.select_split + " (prune.select_split)"};
  s.cfg.train.eval_split = P.select_split;
  return s;
}

}  // namespace

void check_split(const core::TaskSpec& task, const std::string& key, const std::string& spec) {
  const std::string split = core::parse_split_spec(spec, key).name;
  if (has_split(task, split)) return;
  const auto names = task.split_names();
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw ConfigError(key + " = '" + split + "' is not a split of " + task.name + "; use one of " + list);
}

Selection resolve_selection(const core::Config& cfg, const core::TaskSpec& task, const std::string& root) {
  const core::PruneConfig& P = cfg.prune;
  if (P.select_examples < 0)
    throw ConfigError("prune.select_examples = " + std::to_string(P.select_examples) +
                      "; use a count of training rows to hold out for the run's choices, e.g. 1000 (0 = off)");
  if (!P.select_split.empty()) return named(cfg, task);
  Selection s{cfg, cfg.train.eval_split, ""};
  if (P.select_examples == 0) {
    s.what = "prune.select_examples = 0: best checkpoints and the frontier's choice on train.eval_split = " +
             cfg.train.eval_split +
             (cfg.train.eval_split == P.eval_split ? ", the split the run reports: its figures are optimistic" : "");
    return s;
  }
  const core::SplitSpec train = core::parse_split_spec(cfg.train.train_split, "train.train_split");
  if (!has_split(task, train.name)) {
    s.what = "no selection slice: " + task.name + " has no split '" + train.name + "' (train.train_split)";
    return s;
  }
  const std::size_t rows = core::read_task(task, root, train.name).size();
  const auto [b, e] = core::slice_bounds(train, rows);
  const std::size_t held = std::min(static_cast<std::size_t>(P.select_examples), (e - b) / 10);
  if (held == 0)
    throw ConfigError("train.train_split = " + cfg.train.train_split + " has " + std::to_string(e - b) +
                      " rows: too few to hold a tenth out for the run's choices; set prune.select_examples = 0, or "
                      "name a split to choose on (prune.select_split)");
  // From the end of the file when the slice reaches it ("train[:-1000]", "train[-1000:]"), else by row numbers.
  auto bound = [rows](std::size_t at) -> std::optional<long> {
    if (at == rows) return std::nullopt;
    return at > rows / 2 ? -static_cast<long>(rows - at) : static_cast<long>(at);
  };
  const std::size_t cut = e - held;
  const core::SplitSpec kept{train.name, b ? std::optional<long>(b) : std::nullopt, bound(cut)};
  const core::SplitSpec chosen{train.name, bound(cut), bound(e)};
  s.split = core::format_split_spec(chosen);
  s.cfg.train.train_split = core::format_split_spec(kept);
  s.cfg.train.eval_split = s.split;
  if (P.rank_split == cfg.train.train_split) s.cfg.prune.rank_split = s.cfg.train.train_split;
  s.what = "choices made on " + s.split + ", the last " + std::to_string(held) + " rows of " + train.name +
           " (held out of training" + (P.rank_split == cfg.train.train_split ? " and ranking" : "") + ")" +
           (held < static_cast<std::size_t>(P.select_examples)
                ? "; prune.select_examples = " + std::to_string(P.select_examples) + " is over a tenth of the split"
                : "");
  return s;
}

}  // namespace hp::prune
