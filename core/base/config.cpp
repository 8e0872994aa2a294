// Config binding: YAML files, --set overrides and dumps, all driven by the visit_fields() lists.
#include "core/base/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <regex>
#include <thread>

#include "core/base/errors.h"  // ConfigError

namespace hp::core {
namespace {

struct Collector {
  std::string prefix;
  std::vector<FieldRef>* out;
  template <class T>
  void operator()(const char* key, T& value, const char* help) {
    if constexpr (std::is_enum_v<T> || std::is_same_v<T, Method>)
      out->push_back(FieldRef{prefix + key, help,
                              ChoiceRef{[&value] { return choice_text(value); },
                                        [&value](const std::string& text, const std::string& where) {
                                          parse_choice(text, where, value);
                                        }}});
    else
      out->push_back(FieldRef{prefix + key, help, &value});
  }
};

struct SectionCollector {
  std::vector<FieldRef>* out;
  template <class S>
  void operator()(const char* name, S& section) {
    Collector c{std::string(name) + ".", out};
    section.visit_fields(c);
  }
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split_list(const std::string& text) {
  std::string body = trim(text);
  if (!body.empty() && body.front() == '[' && body.back() == ']') body = body.substr(1, body.size() - 2);
  std::vector<std::string> items;
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

int parse_int(const std::string& text, const std::string& where) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) {
      if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
        throw ConfigError(where + ": " + text + " is outside the 32-bit range of this setting; use at most " +
                          std::to_string(std::numeric_limits<int>::max()));
      return static_cast<int>(v);
    }
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception&) {  // not a number, or beyond 64 bits
  }
  throw ConfigError(where + ": expected an integer, got '" + text + "'");
}

double parse_double(const std::string& text, const std::string& where) {
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {}
  throw ConfigError(where + ": expected a number, got '" + text + "'");
}

bool parse_bool(const std::string& text, const std::string& where) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  throw ConfigError(where + ": expected true or false, got '" + text + "'");
}

void assign(FieldRef& f, const std::string& text, const std::string& where) {
  std::visit(
      [&](auto& p) {
        using T = std::remove_pointer_t<std::decay_t<decltype(p)>>;
        if constexpr (std::is_same_v<T, int>) {
          *p = parse_int(trim(text), where);
        } else if constexpr (std::is_same_v<T, double>) {
          *p = parse_double(trim(text), where);
        } else if constexpr (std::is_same_v<T, bool>) {
          *p = parse_bool(trim(text), where);
        } else if constexpr (std::is_same_v<T, std::string>) {
          *p = text;
        } else if constexpr (std::is_same_v<T, ChoiceRef>) {
          p.parse(trim(text), where);
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          p->clear();
          for (const auto& item : split_list(text)) p->push_back(parse_int(item, where));
        } else {
          *p = split_list(text);
        }
      },
      f.ptr);
}

std::string to_text(const FieldRef& f) {
  return std::visit(
      [](const auto& p) -> std::string {
        using T = std::remove_pointer_t<std::decay_t<decltype(p)>>;
        std::ostringstream os;
        if constexpr (std::is_same_v<T, ChoiceRef>) {
          os << '"' << p.text() << '"';
        } else if constexpr (std::is_same_v<T, bool>) {
          os << (*p ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << '"' << *p << '"';
        } else if constexpr (std::is_same_v<T, std::vector<int>> || std::is_same_v<T, std::vector<std::string>>) {
          os << '[';
          for (size_t i = 0; i < p->size(); ++i) os << (i ? ", " : "") << (*p)[i];
          os << ']';
        } else {
          os << *p;
        }
        return os.str();
      },
      f.ptr);
}

std::string mark_of(const std::string& file, const YAML::Mark& m) {
  return file + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

// The text of a key, a section name or a list element, which must each be one plain value; a list or a
// mapping in their place (`criteria: [a, b: c]`) is refused with its position rather than escaping as
// yaml-cpp's "bad conversion".
std::string scalar_text(const YAML::Node& node, const std::string& path, const YAML::Mark& near,
                        const std::string& what) {
  if (node.IsScalar()) return node.Scalar();
  const YAML::Mark m = node.Mark().is_null() ? near : node.Mark();
  throw ConfigError(mark_of(path, m) + ": " + what + " must be a single value, not " +
                    (node.IsSequence() ? "a list"
                     : node.IsMap()    ? "a mapping"
                                       : "empty") +
                    "; write it as `key: value` or `key: [a, b]`");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> all_paths(Config& cfg) {
  std::vector<std::string> paths;
  for (const auto& f : config_fields(cfg)) paths.push_back(f.path);
  return paths;
}

bool is_section(Config& cfg, const std::string& name) {
  for (const auto& f : config_fields(cfg))
    if (f.path.rfind(name + ".", 0) == 0) return true;
  return false;
}

// A section name used where a key belongs (`eval: 3`, `--set eval=3`): the fix is one of its keys, shown with
// its default, not the nearest key by spelling.
std::string section_not_key_message(Config& cfg, const std::string& where, const std::string& name, bool yaml) {
  std::string example;
  for (const auto& f : config_fields(cfg))
    if (f.path.rfind(name + ".", 0) == 0) {
      example = yaml ? "write `" + name + ":` and below it, indented, keys such as `" + f.path.substr(name.size() + 1) +
                           ": " + to_text(f) + "`"
                     : "set one of them, e.g. --set " + f.path + "=" + to_text(f);
      break;
    }
  return where + ": '" + name + "' is a section and holds keys, not a value: " + example +
         " (`prune config --doc` lists them)";
}

std::string unknown_key_message(Config& cfg, const std::string& where, const std::string& key) {
  std::string msg = where + ": unknown key '" + key + "'";
  std::string near = nearest_key(key, all_paths(cfg));
  if (!near.empty()) msg += "; did you mean '" + near + "'?";
  else msg += "; see `prune config --doc` for the valid keys";
  return msg;
}

}  // namespace

std::string choice_text(Objective o) { return o == Objective::kEmbedding ? "embedding" : "task"; }

void parse_choice(const std::string& text, const std::string& where, Objective& out) {
  if (text == "task") out = Objective::kTask;
  else if (text == "embedding") out = Objective::kEmbedding;
  else
    throw ConfigError(where + " = '" + text + "'; use task (a classifier for data.task) or embedding (a "
                      "sentence-transformers folder, pruned for its embeddings)");
}

std::string choice_text(const Method& m) {
  switch (m.kind) {
    case MethodKind::kBest: return "best";
    case MethodKind::kKwon: return "kwon";
    case MethodKind::kGates: return "gates";
    case MethodKind::kCriterion: break;
  }
  return m.criterion;
}

void parse_choice(const std::string& text, const std::string&, Method& out) {
  out = Method{};
  if (text == "kwon") out.kind = MethodKind::kKwon;
  else if (text == "gates") out.kind = MethodKind::kGates;
  else if (text != "best") out.kind = MethodKind::kCriterion, out.criterion = text;  // checked by prune/heads/criteria.h
}

std::vector<FieldRef> config_fields(Config& cfg) {
  std::vector<FieldRef> out;
  SectionCollector c{&out};
  cfg.visit_sections(c);
  return out;
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::max<size_t>(3, key.size() / 3) + 1;
  // The length difference bounds the edit distance from below: a candidate that cannot beat the best is
  // skipped, so a hostile 100 KB key costs O(known keys), not O(key length × key lengths) each.
  auto distance = [&](const std::string& a, const std::string& b) {
    const size_t gap = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
    return gap >= best_d ? gap : edit_distance(a, b);
  };
  for (const auto& k : known) {
    // Compare against the full path and its last component, so "batch" finds "eval.batch_size".
    std::string leaf = k.substr(k.rfind('.') + 1);
    size_t d = std::min(distance(key, k), distance(key, leaf));
    if (d < best_d) best_d = d, best = k;
  }
  return best;
}

void set_value(Config& cfg, const std::string& path, const std::string& text, const std::string& where) {
  auto fields = config_fields(cfg);
  for (auto& f : fields) {
    if (f.path == path) {
      assign(f, text, where + ": " + path);
      return;
    }
  }
  if (is_section(cfg, path)) throw ConfigError(section_not_key_message(cfg, where, path, false));
  throw ConfigError(unknown_key_message(cfg, where, path));
}

void apply_set(Config& cfg, const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment + ": expected key=value, e.g. --set eval.batch_size=32");
  set_value(cfg, trim(assignment.substr(0, eq)), trim(assignment.substr(eq + 1)), "--set");
}

void load_yaml(Config& cfg, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open config file; check the path passed to --config");
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    throw ConfigError(mark_of(path, e.mark) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap())
    throw ConfigError(mark_of(path, root.Mark()) + ": expected a mapping of sections (run:, model:, …)");
  auto fields = config_fields(cfg);
  // yaml-cpp keeps a key given twice and the later one would win silently: each key and section is refused
  // the second time with the line of the first.
  std::map<std::string, int> first_line;
  auto once = [&](const std::string& what, const std::string& key, const YAML::Mark& m, const std::string& fix) {
    const auto [it, fresh] = first_line.emplace(key, m.line + 1);
    if (!fresh)
      throw ConfigError(mark_of(path, m) + ": " + what + " '" + key + "' is given twice (lines " +
                        std::to_string(it->second) + " and " + std::to_string(m.line + 1) + "); " + fix);
  };
  for (const auto& section : root) {
    const std::string name = scalar_text(section.first, path, root.Mark(), "a section name");
    if (!section.second.IsMap()) {
      const std::string where = mark_of(path, section.first.Mark());
      if (is_section(cfg, name))
        throw ConfigError(section_not_key_message(cfg, where, name, true));
      throw ConfigError(unknown_key_message(cfg, where, name));
    }
    once("section", name, section.first.Mark(), "merge the two into one section");
    for (const auto& kv : section.second) {
      const std::string key =
          name + "." + scalar_text(kv.first, path, section.first.Mark(), "a key of section '" + name + "'");
      once("key", key, kv.first.Mark(), "keep one of them");
      const std::string where = mark_of(path, kv.second.Mark());
      auto it = std::find_if(fields.begin(), fields.end(), [&](const FieldRef& f) { return f.path == key; });
      if (it == fields.end()) throw ConfigError(unknown_key_message(cfg, mark_of(path, kv.first.Mark()), key));
      std::string text;
      if (kv.second.IsSequence()) {
        for (size_t i = 0; i < kv.second.size(); ++i)
          text +=
              (i ? "," : "") + scalar_text(kv.second[i], path, kv.second.Mark(), key + "[" + std::to_string(i) + "]");
      } else if (kv.second.IsScalar()) {
        text = kv.second.Scalar();
      } else if (!kv.second.IsNull()) {
        throw ConfigError(where + ": " + key + " must be a value or a list");
      }
      assign(*it, text, where + ": " + key);
    }
  }
}

int device_spec_index(const std::string& spec) {
  static const std::regex kForm("cpu|cuda(:([0-9]|[1-9][0-9]))?");
  std::smatch m;
  if (!std::regex_match(spec, m, kForm))
    throw ConfigError("run.device = '" + spec + "'; use cpu, cuda (the first GPU) or cuda:N");
  return spec == "cpu" ? -1 : m[2].matched ? std::stoi(m[2].str()) : 0;
}

std::string resume_yaml(const Config& cfg) {
  Config fixed = cfg;
  fixed.run.out_dir.clear();
  fixed.train.resume.clear();
  fixed.prune.latency = false;
  fixed.run.dist_timeout_s = RunConfig{}.dist_timeout_s;
  fixed.run.device = RunConfig{}.device;
  fixed.train.cuda_graph = false;  // a GPU run's way of launching its steps, ignored on the CPU where it may resume
  // --max-drop D: the frontier's measurements do not depend on D, only its choice (and which budgets its gates take,
  // each kept apart), so a run with no candidate within D resumes with a larger D instead of being refused.
  if (fixed.prune.max_drop > 0) fixed.prune.max_drop = 1;
  return dump_yaml(fixed);
}

std::string dump_yaml(const Config& cfg_in) {
  Config cfg = cfg_in;
  std::ostringstream os;
  std::string section;
  for (const auto& f : config_fields(cfg)) {
    std::string sec = f.path.substr(0, f.path.find('.'));
    if (sec != section) {
      os << sec << ":\n";
      section = sec;
    }
    os << "  " << f.path.substr(sec.size() + 1) << ": " << to_text(f) << "  # " << f.help << "\n";
  }
  return os.str();
}

std::string config_doc() {
  Config cfg;
  std::ostringstream os;
  os << "| key | default | meaning |\n|---|---|---|\n";
  for (const auto& f : config_fields(cfg)) os << "| `" << f.path << "` | `" << to_text(f) << "` | " << f.help << " |\n";
  return os.str();
}

void validate(const Config& cfg) {
  // More threads than a few per core only slows LibTorch and OpenMP down (100,000 of them hang the process).
  const int max_threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  need(cfg.run.threads >= 0 && cfg.run.threads <= max_threads,
       "run.threads = " + std::to_string(cfg.run.threads) + "; use 0 (all cores) or 1.." + std::to_string(max_threads) +
           " (4 per core of this machine)");
  device_spec_index(cfg.run.device);  // its form; the GPU itself is checked where a command takes it
  auto precision_ok = [](const std::string& p) { return p == "fp32" || p == "bf16" || p == "int8"; };
  need(precision_ok(cfg.run.precision), "run.precision = '" + cfg.run.precision + "'; use fp32, bf16 or int8");
  need(cfg.run.calibrate >= 0 && cfg.run.calibrate <= 1000000,
       "run.calibrate = " + std::to_string(cfg.run.calibrate) +
           "; use 0 (dynamic int8, no calibration) or N examples of the train split, e.g. 512");
  need(cfg.bench.compare_precision.empty() || precision_ok(cfg.bench.compare_precision),
       "bench.compare_precision = '" + cfg.bench.compare_precision + "'; use fp32, bf16, int8 or leave it empty");
  need(cfg.run.dist_timeout_s >= 1 && cfg.run.dist_timeout_s <= 86400,
       "run.dist_timeout_s = " + std::to_string(cfg.run.dist_timeout_s) + "; use 1..86400 seconds (default 300)");
  need(cfg.data.max_seq_len >= 2 && cfg.data.max_seq_len <= 4096,
       "data.max_seq_len = " + std::to_string(cfg.data.max_seq_len) +
           "; use 2..512 (the model's max_position_embeddings)");
  need(cfg.eval.batch_size >= 1,
       "eval.batch_size = " + std::to_string(cfg.eval.batch_size) + "; use a positive batch size");
  need(cfg.eval.max_examples >= 0,
       "eval.max_examples = " + std::to_string(cfg.eval.max_examples) + "; use 0 (all) or a positive count");
  std::ostringstream shard_mb;
  shard_mb << cfg.export_.max_shard_mb;
  need(std::isfinite(cfg.export_.max_shard_mb) && cfg.export_.max_shard_mb >= 0 && cfg.export_.max_shard_mb <= 1e6,
       "export.max_shard_mb = " + shard_mb.str() +
           "; use 0 (one model.safetensors) or a shard size in MB such as 5000 (transformers' default 5GB)");
  need(cfg.export_.dtype == "fp32" || cfg.export_.dtype == "bf16" || cfg.export_.dtype == "fp16",
       "export.dtype = '" + cfg.export_.dtype + "'; use fp32, bf16 or fp16");
  need(cfg.export_.dtype == "fp32" || !(cfg.export_.onnx || cfg.export_.int8),
       "export.dtype = " + cfg.export_.dtype +
           " with --onnx/--int8: the ONNX files are written and checked from fp32 "
           "weights; export at fp32 for them (or leave out --onnx/--int8)");
  need(!cfg.model.path.empty(), "model.path is empty; pass --model DIR (a Hugging Face model folder)");
  const auto& a = cfg.analysis;
  need(a.examples >= 0, "analysis.examples = " + std::to_string(a.examples) + "; use 0 (all) or a positive count");
  need(a.resamples >= 0 && a.resamples <= 100000,
       "analysis.resamples = " + std::to_string(a.resamples) + "; use 0 (off) or 1..100000");
  need(a.control.empty() || a.control == "random-init",
       "analysis.control = '" + a.control + "'; use random-init (or leave it empty)");
  need(a.alpha > 0 && a.alpha < 1,
       "analysis.alpha = " + std::to_string(a.alpha) + "; use a level in (0, 1), e.g. 0.05");
  need(std::isfinite(a.tau), "analysis.tau is not finite; use a threshold such as 3 (Pande et al.)");
  need(a.min_occurrences >= 1,
       "analysis.min_occurrences = " + std::to_string(a.min_occurrences) + "; use a positive count");
  need(a.batch_size >= 1, "analysis.batch_size = " + std::to_string(a.batch_size) + "; use a positive batch size");
  const auto& x = cfg.explain;
  need(x.example >= 0, "explain.example = " + std::to_string(x.example) + "; use a row index >= 0");
  need(x.threshold >= 0 && x.threshold < 1,
       "explain.threshold = " + std::to_string(x.threshold) + "; use a share in [0, 1), e.g. 0.4");
  need(x.target == "predicted" || x.target == "gold", "explain.target = '" + x.target + "'; use predicted or gold");
  const auto& t = cfg.triggers;
  need(t.examples >= 0, "triggers.examples = " + std::to_string(t.examples) + "; use 0 (all) or a positive count");
  need(t.min_tokens >= 0,
       "triggers.min_tokens = " + std::to_string(t.min_tokens) + "; use 0 (all) or a length such as 15");
  need(t.top_k >= 1 && t.top_k <= 100, "triggers.top_k = " + std::to_string(t.top_k) + "; use 1..100 (Hao et al.: 3)");
  const auto& r = cfg.report;
  need(r.count >= 0, "report.count = " + std::to_string(r.count) + "; use 0 or a positive number of rows");
  for (int e : r.examples) need(e >= 0, "report.examples holds " + std::to_string(e) + "; use row indices >= 0");
  need(r.text_b.empty() || !r.text.empty(), "report.text_b is set without report.text; pass --text too");
}

namespace {

// "section.key" -> "value" for each "  key: value  # help" line of a dump_yaml text.
std::map<std::string, std::string> yaml_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      section = line.substr(0, line.find(':'));
      continue;
    }
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(2, colon - 2);
    std::string value = line.substr(colon + 1);
    size_t hash = value.find("  # ");
    if (hash != std::string::npos) value = value.substr(0, hash);
    out[section + "." + key] = value.empty() ? value : value.substr(1);
  }
  return out;
}

}  // namespace

ConfigDiff config_diff(const std::string& saved, const std::string& current) {
  const Config fresh;
  const auto a = yaml_values(saved), b = yaml_values(current), defaults = yaml_values(dump_yaml(fresh));
  ConfigDiff d;
  for (const auto& [key, value] : b) {
    const auto it = a.find(key), def = defaults.find(key);
    if (it == a.end() && def != defaults.end() && def->second == value) d.added_at_default.push_back(key);
    else if (it == a.end()) d.changed.push_back(key + ": (absent) -> " + value);
    else if (it->second != value) d.changed.push_back(key + ": " + it->second + " -> " + value);
  }
  for (const auto& [key, value] : a)
    if (!b.count(key)) d.changed.push_back(key + ": " + value + " -> (absent)");
  return d;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace hp::core
