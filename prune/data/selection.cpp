// The selection slice (see prune/data/selection.h).
#include "prune/data/selection.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/data/holdout.h"

namespace hp::prune {

namespace {

bool has_split(const core::TaskSpec& task, const std::string& name) {
  const auto names = task.split_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A named split (prune.select_split): checked, never the evaluation split or a part of it, and labelled.
Selection named(const core::Config& cfg, const core::TaskSpec& task, const std::string& root) {
  const core::PruneConfig& P = cfg.prune;
  check_split(task, "prune.select_split", P.select_split);
  const std::string select = core::parse_split_spec(P.select_split, "prune.select_split").name;
  if (select == core::parse_split_spec(P.eval_split, "prune.eval_split").name)
    throw ConfigError("prune.select_split = " + P.select_split + (P.select_split == P.eval_split ? " is" : " is part of") +
                      " prune.eval_split = " + P.eval_split +
                      ": choices made on the split the run reports are optimistic by construction; leave "
                      "prune.select_split empty (rows held out of train.train_split) or name another split");
  const auto rows = core::read_task(task, root, P.select_split);
  if (rows.empty() || !rows.front().has_label)
    throw ConfigError("prune.select_split = " + P.select_split + (rows.empty() ? " has no rows" : " has no labels") +
                      ": the run's choices are scored on it; name a labelled split other than prune.eval_split, or "
                      "leave it empty (rows held out of train.train_split)");
  Selection s{cfg, P.select_split, "choices made on " + P.select_split + " (prune.select_split)"};
  s.cfg.train.eval_split = P.select_split;
  return s;
}

}  // namespace

void check_split(const core::TaskSpec& task, const std::string& key, const std::string& spec) {
  const std::string split = core::parse_split_spec(spec, key).name;
  if (has_split(task, split)) return;
  throw ConfigError(key + " = '" + split + "' is not a split of " + task.name + "; use one of " +
                    core::join_list(task.split_names()));
}

Selection resolve_selection(const core::Config& cfg, const core::TaskSpec& task, const std::string& root) {
  const core::PruneConfig& P = cfg.prune;
  if (P.select_examples < 0)
    throw ConfigError("prune.select_examples = " + std::to_string(P.select_examples) +
                      "; use a count of training rows to hold out for the run's choices, e.g. 1000 (0 = off)");
  if (!P.select_split.empty()) return named(cfg, task, root);
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
  if (train.holdout)
    throw ConfigError("train.train_split = " + cfg.train.train_split +
                      " holds rows out already; name the held-out rows as prune.select_split, or set "
                      "prune.select_examples = 0");
  const std::vector<core::Example> rows = core::read_task(task, root, core::format_split_spec(train));
  const std::size_t held = std::min(static_cast<std::size_t>(P.select_examples), rows.size() / 10);
  if (held == 0)
    throw ConfigError("train.train_split = " + cfg.train.train_split + " has " + std::to_string(rows.size()) +
                      " rows: too few to hold a tenth out for the run's choices; set prune.select_examples = 0, or "
                      "name a split to choose on (prune.select_split)");
  const core::Holdout h = core::hold_out(rows, held);
  core::SplitSpec chosen = train, kept = train;
  chosen.holdout = kept.holdout = held;
  chosen.held = true;
  s.split = core::format_split_spec(chosen);
  s.cfg.train.train_split = core::format_split_spec(kept);
  s.cfg.train.eval_split = s.split;
  const bool ranked = P.rank_split == cfg.train.train_split;
  if (ranked) s.cfg.prune.rank_split = s.cfg.train.train_split;
  s.what = "choices made on " + s.split + ": the last " + std::to_string(h.held.size()) + " whole rows of " +
           cfg.train.train_split + " (rows no other row contains), held out of training" +
           (ranked ? " and ranking" : "") +
           (h.dropped ? " with the " + std::to_string(h.dropped) + " rows that share their text" : "") +
           (held < static_cast<std::size_t>(P.select_examples)
                ? "; prune.select_examples = " + std::to_string(P.select_examples) + " is over a tenth of the split"
                : "") +
           (h.held.size() < held ? "; only " + std::to_string(h.held.size()) + " rows are whole" : "");
  return s;
}

}  // namespace hp::prune
