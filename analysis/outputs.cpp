// Output files of `prune analyze` (see analysis/outputs.h).
#include "analysis/outputs.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "analysis/plots.h"
#include "core/io/tensor_io.h"
#include "core/plot/plot.h"

namespace hp::analysis {

namespace {

nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

nlohmann::json vector_json(const std::vector<double>& v) {
  nlohmann::json j = nlohmann::json::array();
  for (double x : v) j.push_back(number(x));
  return j;
}

torch::Tensor grid_tensor(const Grid& g) {
  auto t = torch::full({static_cast<int64_t>(g.size()), static_cast<int64_t>(g.empty() ? 0 : g[0].size())}, NAN,
                       torch::kFloat64);
  for (size_t l = 0; l < g.size(); ++l)
    for (size_t h = 0; h < g[l].size(); ++h) t[l][h] = g[l][h];
  return t;
}

const char* kDirections[2] = {"dep_to_head", "head_to_dep"};

}  // namespace

nlohmann::json grid_json(const Grid& g) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& row : g) j.push_back(vector_json(row));
  return j;
}

nlohmann::json analysis_json(const Analysis& a) {
  nlohmann::json j;
  j["examples"] = a.examples;
  j["layers"] = a.layers;
  j["max_heads"] = a.max_heads;
  for (const auto& [k, g] : a.stats) j["stats"][k] = grid_json(g);
  for (const auto& [role, t] : a.sieve)
    j["sieve"][role] = {{"mean", grid_json(t.mean)}, {"sd", grid_json(t.sd)}, {"n", grid_json(t.n)},
                        {"t", grid_json(t.t)},       {"p", grid_json(t.p)},   {"holm", grid_json(t.holm)},
                        {"bh", grid_json(t.bh)}};
  for (const auto& [role, f] : a.roles)
    j["roles"][role] = {{"raw", grid_json(f.raw)}, {"holm", grid_json(f.holm)}, {"bh", grid_json(f.bh)}};
  const int N = a.layers * a.max_heads;
  nlohmann::json js = nlohmann::json::array(), mds = nlohmann::json::array();
  for (int g = 0; g < N; ++g) {
    std::vector<double> row(a.js.begin() + static_cast<long>(g) * N, a.js.begin() + static_cast<long>(g + 1) * N);
    if (!a.present[g]) row.assign(N, NAN);
    js.push_back(vector_json(row));
    mds.push_back({number(a.mds[g][0]), number(a.mds[g][1])});
  }
  j["js"] = js;
  j["mds"] = mds;
  if (a.treebank) {
    auto& s = j["syntax"];
    for (const auto& [rel, r] : a.relations) {
      s["counts"][rel] = r.count;
      for (int d = 0; d < 2; ++d) s["accuracy"][kDirections[d]][rel] = grid_json(r.accuracy[d]);
      auto& b = s["baselines"][rel];
      for (size_t o = 0; o < kBaselineOffsets.size(); ++o)
        b["offsets"][std::to_string(kBaselineOffsets[o])] = number(r.offset_accuracy[o]);
      b["most_frequent_offset"] = r.count > 0 ? nlohmann::json(r.most_frequent_offset) : nlohmann::json(nullptr);
      b["most_frequent_accuracy"] = number(r.most_frequent_accuracy);
      b["best"] = number(r.best_baseline);
      s["best_head"][rel] = r.count > 0 ? nlohmann::json({r.best.layer, r.best.head, r.best.direction, r.best.accuracy})
                                        : nlohmann::json(nullptr);
      s["syntactic_heads"][rel] = nlohmann::json::array();
      for (const auto& h : r.syntactic) s["syntactic_heads"][rel].push_back({h.layer, h.head, h.direction, h.accuracy});
    }
  } else {
    j["syntax"] = nullptr;
  }
  if (a.noop)
    j["noop"] = {{"sep_grad", vector_json(a.noop_sep_grad)},
                 {"all_grad", vector_json(a.noop_all_grad)},
                 {"sep_grad_head", grid_json(a.noop_sep_grad_head)},
                 {"all_grad_head", grid_json(a.noop_all_grad_head)}};
  else j["noop"] = nullptr;
  if (!a.noop_note.empty()) j["noop_note"] = a.noop_note;

  // Summary: heads per role (raw, Holm, BH), roles by layer (Holm), local ∧ syntactic overlap.
  auto& sum = j["summary"];
  int present = 0;
  for (auto p : a.present) present += p;
  sum["heads_present"] = present;
  for (const auto& [role, f] : a.roles) {
    sum["heads_per_role"][role] = {{"raw", count_role(f.raw)}, {"holm", count_role(f.holm)}, {"bh", count_role(f.bh)}};
    std::vector<double> by_layer;
    for (const auto& row : f.holm) by_layer.push_back(count_role({row}));
    sum["roles_by_layer_holm"][role] = by_layer;
  }
  if (a.roles.count("local") && a.roles.count("syntactic"))
    sum["local_and_syntactic_over_syntactic_holm"] =
        number(overlap(a.roles.at("local").holm, a.roles.at("syntactic").holm));
  std::vector<double> sep_by_layer;
  for (const auto& row : a.stats.at("attn_sep")) {
    double s = 0;
    int c = 0;
    for (double v : row)
      if (!std::isnan(v)) s += v, ++c;
    sep_by_layer.push_back(c ? s / c : NAN);
  }
  sum["attn_sep_by_layer"] = vector_json(sep_by_layer);
  return j;
}

std::string summary_line(const Analysis& a) {
  int present = 0;
  for (auto p : a.present) present += p;
  std::ostringstream os;
  os << a.examples << " examples, " << present << " heads; heads per role after Holm (raw):";
  for (const auto& [role, f] : a.roles)
    os << " " << role << " " << count_role(f.holm) << " (" << count_role(f.raw) << ")";
  return os.str();
}

std::string roles_csv(const Analysis& a) {
  std::ostringstream os;
  os << std::setprecision(10);
  os << "layer,head";
  for (const auto& [k, g] : a.stats) os << "," << k;
  for (const auto& [role, t] : a.sieve)
    os << "," << role << "_mean," << role << "_p," << role << "_p_holm," << role << "_p_bh";
  for (const auto& [role, f] : a.roles)
    os << ",role_" << role << "_raw,role_" << role << "_holm,role_" << role << "_bh";
  os << "\n";
  auto cell = [&](double v) {
    if (std::isnan(v)) os << ",";
    else os << "," << v;
  };
  for (int l = 0; l < a.layers; ++l)
    for (int h = 0; h < a.max_heads; ++h) {
      if (!a.present[l * a.max_heads + h]) continue;
      os << l << "," << h;
      for (const auto& [k, g] : a.stats) cell(g[l][h]);
      for (const auto& [role, t] : a.sieve) cell(t.mean[l][h]), cell(t.p[l][h]), cell(t.holm[l][h]), cell(t.bh[l][h]);
      for (const auto& [role, f] : a.roles) cell(f.raw[l][h]), cell(f.holm[l][h]), cell(f.bh[l][h]);
      os << "\n";
    }
  return os.str();
}

void write_analysis_h5(const std::string& path, const Analysis& a, const std::map<std::string, Grid>& extra,
                       const std::string& settings_json) {
  core::TensorMap t;
  for (const auto& [k, g] : a.stats) t["stats/" + k] = grid_tensor(g);
  for (const auto& [role, s] : a.sieve) {
    t["sieve/" + role + "/mean"] = grid_tensor(s.mean), t["sieve/" + role + "/p"] = grid_tensor(s.p);
    t["sieve/" + role + "/holm"] = grid_tensor(s.holm), t["sieve/" + role + "/bh"] = grid_tensor(s.bh);
    t["sieve/" + role + "/t"] = grid_tensor(s.t);
  }
  for (const auto& [role, f] : a.roles) {
    t["roles/" + role + "/raw"] = grid_tensor(f.raw), t["roles/" + role + "/holm"] = grid_tensor(f.holm);
    t["roles/" + role + "/bh"] = grid_tensor(f.bh);
  }
  const int64_t N = static_cast<int64_t>(a.layers) * a.max_heads;
  t["js"] = torch::tensor(a.js, torch::kFloat64).view({N, N});
  std::vector<double> mds;
  for (const auto& p : a.mds) mds.push_back(p[0]), mds.push_back(p[1]);
  t["mds"] = torch::tensor(mds, torch::kFloat64).view({N, 2});
  if (a.noop) {
    t["noop/sep_grad"] = torch::tensor(a.noop_sep_grad, torch::kFloat64);
    t["noop/all_grad"] = torch::tensor(a.noop_all_grad, torch::kFloat64);
    t["noop/sep_grad_head"] = grid_tensor(a.noop_sep_grad_head);
  }
  for (const auto& [name, g] : extra) t[name] = grid_tensor(g);
  core::write_hdf5(path, t, {{"settings", settings_json}, {"examples", std::to_string(a.examples)}});
}

std::vector<std::string> write_plots(const std::string& dir, const Analysis& a) {
  std::vector<std::string> files;
  auto heatmap = [&](const std::string& name, const std::string& title, const Grid& g) {
    core::Heatmap m;
    m.title = title;
    m.values = g;
    for (size_t l = 0; l < g.size(); ++l) {
      m.present.emplace_back();
      for (size_t h = 0; h < g[l].size(); ++h) m.present.back().push_back(a.present[l * a.max_heads + h] != 0);
    }
    files.push_back(name + ".svg");
    if (!core::write_svg_and_png(dir + "/" + name + ".svg", core::svg_heatmap(m)).empty())
      files.push_back(name + ".png");
  };
  for (const auto& [k, g] : a.stats) heatmap("stat_" + k, k + " (layers x heads)", g);
  for (const auto& [role, t] : a.sieve)
    heatmap("sieve_" + role, role + " sieve bias score, mean (layers x heads)", t.mean);
  for (const auto& [name, svg] :
       {std::pair<std::string, std::string>{"role_map", svg_role_map(a)}, {"head_map", svg_head_map(a)}}) {
    files.push_back(name + ".svg");
    if (!core::write_svg_and_png(dir + "/" + name + ".svg", svg).empty()) files.push_back(name + ".png");
  }
  return files;
}

}  // namespace hp::analysis
