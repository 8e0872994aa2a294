// Resumable run state, history and metrics log (see train/run_state.h).
#include "train/run_state.h"

#include <ATen/CPUGeneratorImpl.h>  // at::detail::getDefaultCPUGenerator

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <torch/utils.h>

#include "core/dist/distributed.h"
#include "core/base/config.h"  // config_diff
#include "core/base/errors.h"  // InputError, ConfigError
#include "core/base/log.h"
#include "core/base/files.h"  // write_file_atomic, read_file
#include "eval/results_schema.h"

namespace hp::train {

namespace fs = std::filesystem;

namespace {

bool is_trajectory(const std::string& key) {
  for (auto d : eval::results::kGateTrajectories)
    if (key == eval::results::prefix(d)) return true;
  return false;
}
const char* const kHistoryPrefix = "history/";

torch::Tensor stack_or_empty(const std::vector<torch::Tensor>& v) {
  return v.empty() ? torch::Tensor() : torch::stack(v).to(torch::kFloat64);
}

}  // namespace

core::TensorMap History::to_tensors() const {
  core::TensorMap m;
  for (const auto& [key, values] : series) m[key] = torch::tensor(values, torch::kFloat64);
  for (const auto& [key, values] : trajectories)
    if (!values.empty()) m[key] = stack_or_empty(values);
  return m;
}

History History::from_tensors(const core::TensorMap& tensors) {
  History h;
  for (const auto& [key, t] : tensors) {
    if (is_trajectory(key)) {
      auto& dst = h.trajectories[key];
      for (long i = 0; i < t.size(0); ++i) dst.push_back(t[i].to(torch::kFloat32).clone());
      continue;
    }
    auto d = t.to(torch::kFloat64).contiguous();
    h.series[key] = std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  }
  return h;
}

std::string config_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<long> epoch_order(long n, int seed, int phase, int epoch) {
  std::vector<long> order(n);
  for (long i = 0; i < n; ++i) order[i] = i;
  uint64_t state = splitmix64(splitmix64(static_cast<uint64_t>(seed)) ^ (static_cast<uint64_t>(phase) << 32) ^
                              static_cast<uint64_t>(epoch));
  for (long i = n - 1; i > 0; --i) {
    state = splitmix64(state);
    long j = static_cast<long>(state % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<long> length_grouped(const std::vector<long>& order, const std::vector<size_t>& lengths, int batch_size) {
  const size_t n = order.size(), b = static_cast<size_t>(std::max(batch_size, 1));
  const size_t mega = std::max<size_t>(std::min<size_t>(n / (4 * b), 50), 1) * b;
  std::vector<long> out(order);
  size_t longest_at = 0;  // the start of the mega-batch whose first (longest) example is the longest of all
  for (size_t start = 0; start < n; start += mega) {
    const auto first = out.begin() + static_cast<long>(start), last = out.begin() + static_cast<long>(std::min(n, start + mega));
    std::stable_sort(first, last, [&](long a, long c) { return lengths[a] > lengths[c]; });
    if (lengths[*first] > lengths[out[longest_at]]) longest_at = start;
  }
  if (n > 0) std::swap(out[0], out[longest_at]);
  return out;
}

uint64_t step_seed(int seed, long step) {
  return splitmix64(splitmix64(static_cast<uint64_t>(seed) ^ 0x5741505357415053ULL) ^ static_cast<uint64_t>(step));
}

torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state.to(torch::kUInt8).contiguous());
}

std::string state_dir(const std::string& run_dir) { return run_dir + "/state"; }

namespace {
// The state a resume reads: RUN/state, or RUN/state.old where a stop between replace_dir's two renames left only that
// (state.json is written last, so it marks a whole state). Every file of a resume comes from the same one.
std::string readable_state_dir(const std::string& run_dir) {
  const std::string dir = state_dir(run_dir);
  return !fs::exists(dir + "/state.json") && fs::exists(dir + ".old/state.json") ? dir + ".old" : dir;
}
}  // namespace

std::string optimizer_file(const std::string& run_dir) { return readable_state_dir(run_dir) + "/optimizer.pt"; }

void replace_dir(const std::string& tmp_dir, const std::string& final_dir) {
  // A crash between the two renames leaves final_dir.old, which read_run_state falls back to.
  const std::string old = final_dir + ".old";
  fs::remove_all(old);
  if (fs::exists(final_dir)) fs::rename(final_dir, old);
  fs::rename(tmp_dir, final_dir);
  fs::remove_all(old);
}

namespace {
void save_run_state_here(const std::string& run_dir, const RunState& s, const core::Bert& model, const Optimizer& opt);
}

void save_run_state(const std::string& run_dir, const RunState& s, const core::Bert& model, const Optimizer& opt) {
  core::shared_write([&] { save_run_state_here(run_dir, s, model, opt); });
}

namespace {
void save_run_state_here(const std::string& run_dir, const RunState& s, const core::Bert& model, const Optimizer& opt) {
  const std::string tmp = state_dir(run_dir) + ".tmp";
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  core::TensorMap weights;
  for (const auto& [k, t] : model.parameters()) weights[k] = t.detach();
  core::write_safetensors(tmp + "/model.safetensors", weights);
  opt.save(tmp + "/optimizer.pt");

  core::TensorMap tensors;
  // The generator state is bytes; safetensors has no U8 here, so it travels as int64 (exact).
  tensors["rng_state"] = s.rng_state.to(torch::kLong);
  if (s.device_rng_state.defined()) tensors["device_rng_state"] = s.device_rng_state.to(torch::kLong);
  for (const auto& [name, t] : s.gates) tensors["gates/" + name] = t.detach();
  if (s.best_log_alpha.defined()) tensors["best_log_alpha"] = s.best_log_alpha.detach();
  if (s.controller_state.defined()) tensors["controller_state"] = s.controller_state.detach();
  for (const auto& [k, t] : s.history.to_tensors()) tensors[kHistoryPrefix + k] = t;
  core::write_safetensors(tmp + "/run.safetensors", tensors);

  nlohmann::json j;
  j["step"] = s.step;
  j["phase"] = s.phase;
  j["phase_step"] = s.phase_step;
  j["epoch"] = s.epoch;
  j["batch_in_epoch"] = s.batch_in_epoch;
  j["has_best"] = s.has_best;
  j["best_metric"] = s.best_metric;  // nlohmann prints the shortest exact round-trip form
  j["best_step"] = s.best_step;
  j["train_seconds"] = s.train_seconds;
  j["config_hash"] = s.config_hash;
  j["processes"] = core::dist::world();
  core::write_file_atomic(tmp + "/state.json", j.dump(2) + "\n");
  core::write_file_atomic(tmp + "/config.yaml", s.config_yaml);
  replace_dir(tmp, state_dir(run_dir));
}
}  // namespace

RunState read_run_state(const std::string& run_dir, core::Bert& model) {
  const std::string dir = readable_state_dir(run_dir);
  if (!fs::exists(dir + "/state.json"))
    throw InputError(state_dir(run_dir) +
                     ": no resumable state (state.json missing); pass the run directory of a "
                     "run started with train.save_every or evaluations, or start a new run without --resume");
  RunState s;
  auto j = nlohmann::json::parse(core::read_file(dir + "/state.json"));
  s.step = j.at("step").get<long>();
  s.phase = j.at("phase").get<int>();
  s.phase_step = j.at("phase_step").get<long>();
  s.epoch = j.at("epoch").get<int>();
  s.batch_in_epoch = j.at("batch_in_epoch").get<long>();
  s.processes = j.value("processes", 1);
  s.has_best = j.at("has_best").get<bool>();
  s.best_metric = j.at("best_metric").get<double>();
  s.best_step = j.at("best_step").get<long>();
  s.train_seconds = j.value("train_seconds", 0.0);  // states before it was kept: the time since the resume only
  s.config_hash = j.at("config_hash").get<std::string>();
  s.config_yaml = core::read_file(dir + "/config.yaml");

  auto tensors = core::read_safetensors(dir + "/run.safetensors");
  s.rng_state = tensors.at("rng_state").to(torch::kUInt8);
  if (tensors.count("device_rng_state")) s.device_rng_state = tensors.at("device_rng_state").to(torch::kUInt8);
  for (const auto& [name, t] : tensors)
    if (name.rfind("gates/", 0) == 0) s.gates[name.substr(6)] = t;
  if (tensors.count("best_log_alpha")) s.best_log_alpha = tensors.at("best_log_alpha");
  if (tensors.count("controller_state")) s.controller_state = tensors.at("controller_state");
  core::TensorMap hist;
  for (const auto& [k, t] : tensors)
    if (k.rfind(kHistoryPrefix, 0) == 0) hist[k.substr(std::string(kHistoryPrefix).size())] = t;
  s.history = History::from_tensors(hist);

  auto weights = core::read_safetensors(dir + "/model.safetensors");
  torch::NoGradGuard no_grad;
  for (auto& [k, t] : model.mutable_parameters()) {
    auto it = weights.find(k);
    if (it == weights.end() || it->second.sizes() != t.sizes())
      throw InputError(dir + "/model.safetensors: tensor " + k +
                       " missing or of another shape; the state belongs "
                       "to another model, resume with the model.path the run started with");
    t.copy_(it->second);
  }
  return s;
}

void check_resume_config(const std::string& run_dir, const RunState& s, const std::string& current_yaml) {
  if (config_hash(current_yaml) == s.config_hash) return;
  const auto diff = core::config_diff(s.config_yaml, current_yaml);
  if (!diff.changed.empty())
    throw ConfigError(state_dir(run_dir) + ": config differs from the interrupted run (" +
                      core::join_list(diff.changed) +
                      "); resume with the same config, or start a new run in another --out folder");
  if (!diff.added_at_default.empty())
    core::log_warn("train", state_dir(run_dir) + " was saved by a build without " +
                                core::join_list(diff.added_at_default) + "; resuming with the default, as it ran");
}

MetricsLog::MetricsLog(const std::string& path, long keep_until_step) {
  core::shared_write([&] { open(path, keep_until_step); });  // rank 0 keeps the log of a data-parallel run
}

void MetricsLog::open(const std::string& path, long keep_until_step) {
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  if (keep_until_step >= 0 && fs::exists(path)) {
    std::istringstream in(core::read_file(path));
    std::string line, kept;
    while (std::getline(in, line)) {
      if (line.rfind("step,", 0) == 0 || std::stol(line.substr(0, line.find(','))) <= keep_until_step)
        kept += line + "\n";
    }
    core::write_file_atomic(path, kept);
    out_.open(path, std::ios::app);
  } else {
    out_.open(path, std::ios::trunc);
    out_ << "step,epoch,key,value\n";
  }
  if (!out_) throw InputError(path + ": cannot open for writing; check the permissions of run.out_dir");
  out_.precision(17);
}

void MetricsLog::add(long step, int epoch, const std::string& key, double value) {
  if (!out_.is_open()) return;
  out_ << step << ',' << epoch << ',' << key << ',' << value << '\n';
}

}  // namespace hp::train
