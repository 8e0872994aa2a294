// Run records (see prune/record/run_store.h).
#include "prune/record/run_store.h"

#include <cmath>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/run_folder.h"

namespace hp::prune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string point_file(const std::string& dir, const std::string& c, int seed, int step) {
  return dir + "/state/points/" + c + "_seed" + std::to_string(seed) + "_step" + std::to_string(step) + ".json";
}

std::string importance_file(const std::string& dir, const std::string& c, int seed, int pruned) {
  return dir + "/state/importance/" + c + "_seed" + std::to_string(seed) + "_pruned" + std::to_string(pruned) + ".json";
}

}  // namespace

RunStore::RunStore(std::string dir, const std::string& config_yaml) : lock_(dir), dir_(std::move(dir)) {
  resumed_ = core::claim_run_folder(dir_, core::RunKind::kPruning, config_yaml);
  if (!resumed_) core::write_file_atomic(dir_ + "/" + core::run_kind_record(core::RunKind::kPruning), config_yaml);
}

void RunStore::abandon_new_run() const {
  // A run that wrote its summary reached a result and keeps it (--max-drop with no candidate within D: the frontier).
  if (resumed_ || fs::exists(dir_ + "/summary.json")) return;
  core::shared_write([&] {
    std::error_code ec;
    std::vector<fs::path> wrote;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      const std::string name = e.path().filename().string();
      if (name != core::kRunLockFile && name != "latency_table.json") wrote.push_back(e.path());
    }
    for (const auto& p : wrote) fs::remove_all(p, ec);
  });
}

std::string matrix_json(const torch::Tensor& m) {
  auto t = m.to(torch::kFloat64).contiguous();
  json rows = json::array();
  for (int64_t i = 0; i < t.size(0); ++i) {
    json row = json::array();
    for (int64_t j = 0; j < t.size(1); ++j) row.push_back(t[i][j].item<double>());
    rows.push_back(row);
  }
  return rows.dump();
}

torch::Tensor matrix_from_json(const std::string& text, const std::string& where) {
  try {
    json rows = json::parse(text);
    const auto L = static_cast<int64_t>(rows.size()), H = L ? static_cast<int64_t>(rows[0].size()) : 0;
    auto t = torch::zeros({L, H});
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < H; ++j) t[i][j] = rows.at(i).at(j).get<double>();
    return t;
  } catch (const json::exception& e) {
    throw InputError(where + ": not an importance matrix (" + e.what() + "); delete it to recompute");
  }
}

namespace {

// JSON has no NaN: nlohmann writes one as null (an undefined correlation, a wrecked model's outputs), read back here.
double number_or_nan(const json& v) { return v.is_null() ? std::nan("") : v.get<double>(); }

}  // namespace

std::optional<CurvePoint> RunStore::load_point(const std::string& criterion, int seed, int step) const {
  const std::string path = point_file(dir_, criterion, seed, step);
  if (!fs::exists(path)) return std::nullopt;
  try {
    json j = json::parse(core::read_file(path));
    CurvePoint p;
    p.criterion = criterion, p.seed = seed, p.step = step;
    p.pruned = j.at("pruned"), p.kept = j.at("kept"), p.mask = j.at("mask");
    for (const auto& [name, v] : j.at("metrics").items()) p.metrics[name] = number_or_nan(v);
    for (const auto& v : j.at("predictions")) p.predictions.push_back(static_cast<float>(number_or_nan(v)));
    p.params = j.at("params"), p.flops = j.at("flops");
    p.eval_seconds = j.at("eval_seconds"), p.eval_examples_per_s = j.at("eval_examples_per_s");
    p.latency_ms = j.at("latency_ms");
    return p;
  } catch (const json::exception& e) {
    throw InputError(path + ": unreadable curve point (" + e.what() + "); delete it to recompute that point");
  }
}

void RunStore::save_point(const CurvePoint& p) const {
  json j;
  j["criterion"] = p.criterion, j["seed"] = p.seed, j["step"] = p.step;
  j["pruned"] = p.pruned, j["kept"] = p.kept, j["mask"] = p.mask;
  j["metrics"] = p.metrics;
  j["predictions"] = p.predictions;
  j["params"] = p.params, j["flops"] = p.flops;
  j["eval_seconds"] = p.eval_seconds, j["eval_examples_per_s"] = p.eval_examples_per_s;
  j["latency_ms"] = p.latency_ms;
  core::write_file_atomic(point_file(dir_, p.criterion, p.seed, p.step), j.dump() + "\n");
}

std::optional<torch::Tensor> RunStore::load_importance(const std::string& criterion, int seed, int pruned) const {
  const std::string path = importance_file(dir_, criterion, seed, pruned);
  if (!fs::exists(path)) return std::nullopt;
  return matrix_from_json(core::read_file(path), path);
}

void RunStore::save_importance(const std::string& criterion, int seed, int pruned, const torch::Tensor& m) const {
  core::write_file_atomic(importance_file(dir_, criterion, seed, pruned), matrix_json(m) + "\n");
}

}  // namespace hp::prune
