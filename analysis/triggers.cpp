// `prune triggers` (see analysis/triggers.h).
#include "analysis/triggers.h"

#include <torch/types.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/data/batching.h"
#include "core/data/file_task.h"
#include "core/io/checkpoint.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/data/glue.h"
#include "core/base/log.h"
#include "core/text/tokenizer.h"
#include "analysis/explain.h"  // load_fine_tuned
#include "eval/evaluator.h"
#include "prune/heads/criteria.h"  // attribution_base, attention_attribution, riemann_alphas: the criterion's code

namespace hp::analysis {

namespace fs = std::filesystem;

std::vector<Pattern> top_patterns(std::vector<Pattern> counted, int k) {
  std::sort(counted.begin(), counted.end(), [](const Pattern& a, const Pattern& b) {
    if (a.count != b.count) return a.count > b.count;
    return std::make_pair(a.from, a.to) < std::make_pair(b.from, b.to);
  });
  if (counted.size() > static_cast<size_t>(k)) counted.resize(k);
  return counted;
}

std::vector<int32_t> insert_at(const std::vector<int32_t>& ids, const std::vector<int32_t>& tokens,
                               const std::vector<int>& positions) {
  std::vector<int32_t> out = ids;
  for (size_t t = 0; t < tokens.size(); ++t) out.insert(out.begin() + positions[t], tokens[t]);
  return out;
}

std::vector<int32_t> insert_tokens(const std::vector<int32_t>& ids, int first_sep, const std::vector<int32_t>& tokens,
                                   std::mt19937_64& rng, std::vector<int>* positions) {
  std::vector<int> pos;
  for (size_t t = 0; t < tokens.size(); ++t)  // the [SEP] moves one place right after each insertion
    pos.push_back(std::uniform_int_distribution<int>(1, first_sep + static_cast<int>(t))(rng));
  if (positions) *positions = pos;
  return insert_at(ids, tokens, pos);
}

namespace {

// Every split named must be one of the task's.
void check_splits(const core::TaskSpec& task, const core::Config& cfg) {
  const auto& tc = cfg.triggers;
  for (const auto& [key, split] :
       {std::pair{"triggers.split", tc.split}, std::pair{"triggers.eval_split", tc.eval_split}}) {
    const auto names = task.split_names();
    if (std::find(names.begin(), names.end(), split) != names.end()) continue;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(std::string(key) + " = '" + split + "' is not a split of " + task.name + "; use one of " + list);
  }
}

// The first `examples` rows of at least min_tokens word pieces (Hao et al.'s filter), in file order.
std::vector<core::Example> mined_rows(const TriggersContext& ctx, const std::string& root) {
  const auto& tc = ctx.cfg->triggers;
  std::vector<core::Example> rows;
  for (const auto& ex : core::read_task(*ctx.task, root, tc.split)) {
    if (tc.examples > 0 && rows.size() >= static_cast<size_t>(tc.examples)) break;
    const size_t n =
        ctx.tok->tokenize_ids(ex.text_a).size() + (ex.text_b.empty() ? 2 : ctx.tok->tokenize_ids(ex.text_b).size() + 3);
    if (n >= static_cast<size_t>(tc.min_tokens)) rows.push_back(ex);
  }
  if (rows.empty())
    throw ConfigError(ctx.task->name + "/" + tc.split + ": no row has triggers.min_tokens = " +
                      std::to_string(tc.min_tokens) + " word pieces; lower it (--set triggers.min_tokens=0)");
  return rows;
}

int first_sep(const std::vector<int32_t>& ids, int32_t sep) {
  return static_cast<int>(std::find(ids.begin(), ids.end(), sep) - ids.begin());
}

// The evaluation examples of the classes other than c: as they are, with the triggers inserted, and with
// as many tokens drawn from c's pool at the same positions.
struct AttackSets {
  core::EncodedDataset before, trig, rand;
  long too_long = 0;  // skipped: with the triggers they would exceed data.max_seq_len
};

AttackSets attack_sets(const TriggersContext& ctx, int c, const std::vector<int32_t>& tokens,
                       const std::vector<int32_t>& pool) {
  const auto& dev = ctx.eval_data;
  AttackSets s;
  std::mt19937_64 rng(static_cast<uint64_t>(ctx.cfg->run.seed) * 1000003ULL + c), rng_b(rng() ^ 0x9e3779b97f4a7c15ULL);
  for (size_t i = 0; i < dev.size(); ++i) {
    if (static_cast<int>(dev.labels[i]) == c) continue;
    const auto& ids = dev.ids[i];
    if (ids.size() + tokens.size() > static_cast<size_t>(ctx.cfg->data.max_seq_len)) {
      ++s.too_long;
      continue;
    }
    std::vector<int> pos;
    std::vector<int32_t> drawn;
    for (size_t t = 0; t < tokens.size(); ++t)
      drawn.push_back(pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng_b)]);
    const auto with = insert_tokens(ids, first_sep(ids, ctx.tok->sep_id()), tokens, rng, &pos);
    const std::vector<int32_t> zeros(tokens.size(), 0);
    for (auto* d : {&s.before, &s.trig, &s.rand}) {
      d->labels.push_back(dev.labels[i]);
      d->has_labels = true;
    }
    s.before.ids.push_back(ids), s.before.type_ids.push_back(dev.type_ids[i]);
    s.trig.ids.push_back(with), s.trig.type_ids.push_back(insert_at(dev.type_ids[i], zeros, pos));
    s.rand.ids.push_back(insert_at(ids, drawn, pos)), s.rand.type_ids.push_back(s.trig.type_ids.back());
  }
  return s;
}

struct Scores {
  double accuracy = 0, as_class = 0;
};

Scores score(const core::Bert& model, const core::TaskSpec& task, const core::EncodedDataset& d, int cls, int batch,
             int pad) {
  core::BatchOptions bo;
  bo.batch_size = batch;
  bo.pad_id = pad;
  const auto r = eval::evaluate(model, task, d, core::make_batches(d, bo));
  Scores s;
  for (size_t i = 0; i < d.size(); ++i) {
    s.accuracy += r.predictions[i] == d.labels[i];
    s.as_class += static_cast<int>(r.predictions[i]) == cls;
  }
  s.accuracy /= std::max<size_t>(1, d.size()), s.as_class /= std::max<size_t>(1, d.size());
  return s;
}

// The three sets' accuracy and share predicted as c into `jc`, and the class's line on stdout.
void score_attack(const TriggersContext& ctx, int c, const AttackSets& a, nlohmann::json& jc) {
  const int batch = ctx.cfg->eval.batch_size, pad = ctx.tok->pad_id();
  const Scores s0 = score(*ctx.model, *ctx.task, a.before, c, batch, pad),
               s1 = score(*ctx.model, *ctx.task, a.trig, c, batch, pad),
               s2 = score(*ctx.model, *ctx.task, a.rand, c, batch, pad);
  jc["accuracy"] = {{"before", s0.accuracy}, {"triggers", s1.accuracy}, {"random_pairs", s2.accuracy}};
  jc["predicted_as_class"] = {{"before", s0.as_class}, {"triggers", s1.as_class}, {"random_pairs", s2.as_class}};
  jc["drop"] = {{"triggers", s0.accuracy - s1.accuracy}, {"random_pairs", s0.accuracy - s2.accuracy}};
  jc["beats_baseline"] = s1.accuracy < s2.accuracy;
  std::cout << ctx.task->labels[c] << ": triggers";
  for (const auto& p : jc["patterns"])
    std::cout << " (" << p["from"].get<std::string>() << " -> " << p["to"].get<std::string>() << " x" << p["count"]
              << ")";
  std::cout << "; " << a.before.size() << " " << ctx.cfg->triggers.eval_split
            << " examples of the other classes: accuracy " << s0.accuracy << " -> " << s1.accuracy << " with triggers, "
            << s2.accuracy << " with random pairs"
            << (s1.accuracy < s2.accuracy ? "" : " (the triggers do not beat the baseline)") << "\n";
}

// Class c's entry of triggers.json: its top patterns and, when it has any, the attack with them.
nlohmann::json attack_class(const TriggersContext& ctx, int c, const std::vector<Mined>& mined,
                            const ClassPatterns& p) {
  std::vector<Pattern> counted;
  for (const auto& [pair, n] : p.counts[c]) counted.push_back({pair.first, pair.second, n});
  const auto top = top_patterns(counted, ctx.cfg->triggers.top_k);
  nlohmann::json jc;
  jc["mined_predicted"] = std::count_if(mined.begin(), mined.end(), [&](const Mined& m) { return m.predicted == c; });
  jc["patterns"] = nlohmann::json::array();
  std::vector<int32_t> tokens;
  for (const auto& t : top) {
    jc["patterns"].push_back({{"from", ctx.tok->token(t.from)}, {"to", ctx.tok->token(t.to)}, {"count", t.count}});
    tokens.push_back(t.from), tokens.push_back(t.to);
  }
  if (top.empty() || p.pool[c].empty()) {
    jc["note"] = "no pattern: no mined example was predicted " + ctx.task->labels[c];
    return jc;
  }
  const AttackSets a = attack_sets(ctx, c, tokens, p.pool[c]);
  jc["attacked"] = a.before.size();
  jc["skipped_too_long"] = a.too_long;
  if (a.before.size() > 0) score_attack(ctx, c, a, jc);
  return jc;
}

}  // namespace

void prepare_triggers(TriggersContext& ctx, const core::Config& cfg) {
  const auto& tc = cfg.triggers;
  ctx.cfg = &cfg;
  ctx.task = &core::task_of(cfg.data, cfg.model.path);
  if (ctx.task->is_regression())
    throw ConfigError("data.task = " + ctx.task->name +
                      " is a regression task; triggers flip classes: use a classification task");
  ctx.model.emplace(load_fine_tuned(cfg, "adversarial triggers"));
  ctx.tok.emplace(core::Tokenizer::from_model_dir(cfg.model.path));
  check_splits(*ctx.task, cfg);
  const std::string root = core::data_root_for(cfg.data);
  const auto rows = mined_rows(ctx, root);
  const auto dev = core::read_task(*ctx.task, root, tc.eval_split);  // read both before the long part
  ctx.eval_data = core::encode_examples(*ctx.tok, dev, cfg.data.max_seq_len);
  if (!ctx.eval_data.has_labels)
    throw ConfigError("triggers.eval_split = " + tc.eval_split + " has no labels; use a labelled split such as dev");
  ctx.out = tc.out.empty() ? cfg.run.out_dir + "/triggers" : tc.out;
  ctx.mined_data = core::encode_examples(*ctx.tok, rows, cfg.data.max_seq_len);
}

std::vector<Mined> mine_attributions(const TriggersContext& ctx) {
  const auto& cfg = *ctx.cfg;
  const auto& model = *ctx.model;
  const auto& data = ctx.mined_data;
  core::log_info("triggers", "mining " + std::to_string(data.size()) + " examples of " + ctx.task->name + "/" +
                                 cfg.triggers.split + " (attention attribution, " +
                                 std::to_string(cfg.prune.attattr_steps) + " steps per layer)");
  core::BatchOptions bo;
  bo.batch_size = cfg.prune.rank_batch_size;
  const auto batches = core::make_batches(data, bo);
  const auto& mc = model.config();
  const auto keep = torch::ones({mc.num_hidden_layers, mc.max_heads()});
  const auto alphas = prune::riemann_alphas(cfg.prune.attattr_steps, cfg.prune.attattr_riemann);
  std::vector<Mined> mined(data.size());
  core::Progress progress("triggers", static_cast<long>(data.size()));
  long done = 0;
  for (const auto& b : batches) {
    const auto base = prune::attribution_base(model, b, keep);
    const auto pred = base.logits.argmax(1);
    const auto real = b.attention_mask.to(torch::kBool);
    const auto pair = (real.unsqueeze(2) & real.unsqueeze(1)).unsqueeze(1);  // [B, 1, S, S]
    const long B = b.input_ids.size(0), S = b.input_ids.size(1);
    for (long e = 0; e < B; ++e) mined[b.index[e]].predicted = static_cast<int>(pred[e].item<int64_t>());
    for (int l = 0; l < mc.num_hidden_layers; ++l) {
      if (base.attentions[l].size(1) == 0) continue;
      const auto attr = prune::attention_attribution(model, b, keep, base, l, pred, alphas, true)
                            .masked_fill(~pair, -std::numeric_limits<float>::infinity())
                            .flatten(2);  // [B, H, S·S]
      const auto head_max = std::get<0>(attr.max(-1));  // [B, H]
      const auto [best, head] = head_max.max(-1);  // [B]
      for (long e = 0; e < B; ++e) {
        Mined& m = mined[b.index[e]];
        const double v = best[e].item<double>();
        if (!(v > m.value)) continue;
        m.value = v;
        const auto idx = std::get<1>(attr[e][head[e].item<int64_t>()].topk(2));
        for (int t = 0; t < 2; ++t) m.top[t] = {idx[t].item<int64_t>() / S, idx[t].item<int64_t>() % S};
      }
    }
    done += B;
    progress.update(done);
  }
  progress.finish();
  return mined;
}

ClassPatterns count_patterns(const TriggersContext& ctx, const std::vector<Mined>& mined) {
  const auto& tok = *ctx.tok;
  auto special = [&](int32_t id) { return id == tok.cls_id() || id == tok.sep_id() || id == tok.pad_id(); };
  ClassPatterns p;
  p.counts.resize(ctx.task->num_labels());
  p.pool.resize(ctx.task->num_labels());
  for (size_t i = 0; i < mined.size(); ++i) {
    const auto& ids = ctx.mined_data.ids[i];
    const int c = mined[i].predicted;
    for (int32_t id : ids)
      if (!special(id)) p.pool[c].push_back(id);
    for (const auto& [q, k] : mined[i].top) {
      if (special(ids[q]) || special(ids[k])) {
        ++p.special;
        continue;
      }
      ++p.counts[c][{ids[q], ids[k]}];
    }
  }
  return p;
}

nlohmann::json attack(const TriggersContext& ctx, const std::vector<Mined>& mined, const ClassPatterns& patterns) {
  const auto& cfg = *ctx.cfg;
  const auto& tc = cfg.triggers;
  nlohmann::json j;
  j["model"] = cfg.model.path, j["task"] = ctx.task->name;
  j["mined"] = {{"split", tc.split}, {"examples", ctx.mined_data.size()}, {"min_tokens", tc.min_tokens}};
  j["eval_split"] = tc.eval_split, j["top_k"] = tc.top_k, j["seed"] = cfg.run.seed,
  j["steps"] = cfg.prune.attattr_steps;
  j["patterns_with_special_tokens_skipped"] = patterns.special;
  for (int c = 0; c < ctx.task->num_labels(); ++c)
    j["classes"][ctx.task->labels[c]] = attack_class(ctx, c, mined, patterns);
  return j;
}

void write_triggers(const TriggersContext& ctx, const nlohmann::json& j) {
  fs::create_directories(ctx.out);
  core::write_file_atomic(ctx.out + "/triggers.json", j.dump(1) + "\n");
  core::log_info("triggers", "wrote " + ctx.out + "/triggers.json");
}

}  // namespace hp::analysis
