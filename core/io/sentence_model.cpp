// sentence-transformers folders (see core/io/sentence_model.h).
#include "core/io/sentence_model.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <utility>

#include "core/base/errors.h"
#include "core/base/files.h"

namespace hp::core {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The pooling keys of 1_Pooling/config.json, in the order sentence-transformers concatenates the modes.
constexpr std::pair<const char*, PoolingMode> kPoolingKeys[] = {
    {"pooling_mode_cls_token", PoolingMode::kCls},
    {"pooling_mode_max_tokens", PoolingMode::kMax},
    {"pooling_mode_mean_tokens", PoolingMode::kMean},
    {"pooling_mode_mean_sqrt_len_tokens", PoolingMode::kMeanSqrtLen},
    {"pooling_mode_weightedmean_tokens", PoolingMode::kWeightedMean},
    {"pooling_mode_lasttoken", PoolingMode::kLastToken},
};

json parse_object(const std::string& text, const std::string& where, const char* what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw InputError(where + ": not valid JSON; it should hold " + what + " as sentence-transformers writes it");
  return j;
}

// A module's path: inside the folder (no absolute path, no '..'), as a relative folder name.
std::string checked_path(const json& v, const std::string& where, size_t i) {
  if (!v.is_string())
    throw InputError(where + ": module " + std::to_string(i) + "'s \"path\" is not a string; write the module's "
                     "folder, e.g. \"1_Pooling\", or \"\" for the model folder itself");
  const std::string p = v.get<std::string>();
  const fs::path path(p);
  bool up = false;
  for (const auto& part : path) up = up || part == "..";
  if (path.is_absolute() || up)
    throw InputError(where + ": module " + std::to_string(i) + "'s path '" + p + "' leaves the model folder; a "
                     "module's path is a folder inside it");
  return p;
}

}  // namespace

std::vector<SentenceModule> parse_modules_json(const std::string& text, const std::string& where) {
  const json j = parse_object(text, where, "a list of modules");
  if (!j.is_array() || j.empty())
    throw InputError(where + ": not a list of modules; sentence-transformers writes [{\"idx\": 0, \"name\": \"0\", "
                     "\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}, ...]");
  std::vector<SentenceModule> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& m = j[i];
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string() || !m.contains("path"))
      throw InputError(where + ": module " + std::to_string(i) + " has no \"type\" string and \"path\"; each module "
                       "is {\"path\": ..., \"type\": \"sentence_transformers.models.NAME\"}");
    std::string type = m["type"].get<std::string>();
    if (const auto dot = type.rfind('.'); dot != std::string::npos) type = type.substr(dot + 1);
    out.push_back({type, checked_path(m["path"], where, i)});
  }
  return out;
}

SentencePooling parse_pooling_config(const std::string& text, const std::string& where) {
  const json j = parse_object(text, where, "the Pooling module's settings");
  if (!j.is_object()) throw InputError(where + ": not a JSON object of pooling settings");
  SentencePooling p;
  const auto dim = j.find("word_embedding_dimension");
  if (dim == j.end() || !dim->is_number_integer() || dim->get<long>() < 1 || dim->get<long>() > 1000000)
    throw InputError(where + ": \"word_embedding_dimension\" is missing or not a positive integer; it is the "
                     "encoder's hidden size, e.g. 384");
  p.dimension = dim->get<int>();
  for (const auto& item : j.items()) {  // sentence-transformers refuses a mode it does not know, as here
    const std::string key = item.key();
    if (key.rfind("pooling_mode_", 0) == 0 &&
        std::none_of(std::begin(kPoolingKeys), std::end(kPoolingKeys), [&](const auto& k) { return k.first == key; }))
      throw InputError(where + ": unknown pooling mode \"" + key + "\"; sentence-transformers refuses the folder "
                       "too; its modes are pooling_mode_mean_tokens, pooling_mode_cls_token, pooling_mode_max_tokens, "
                       "pooling_mode_mean_sqrt_len_tokens, pooling_mode_weightedmean_tokens and pooling_mode_lasttoken");
  }
  for (const auto& [key, mode] : kPoolingKeys) {
    const auto v = j.find(key);
    if (v == j.end()) continue;
    if (!v->is_boolean())
      throw InputError(where + ": \"" + key + "\" is not true or false");
    if (v->get<bool>()) p.modes.push_back(mode);
  }
  if (const auto v = j.find("include_prompt"); v != j.end()) {
    if (!v->is_boolean()) throw InputError(where + ": \"include_prompt\" is not true or false");
    p.include_prompt = v->get<bool>();
  }
  if (p.modes.empty())
    throw InputError(where + ": no pooling mode is true; set one of pooling_mode_mean_tokens, pooling_mode_cls_token, "
                     "pooling_mode_max_tokens, ... to true");
  return p;
}

int parse_max_seq_length(const std::string& text, const std::string& where) {
  const json j = parse_object(text, where, "the Transformer module's settings");
  if (!j.is_object()) throw InputError(where + ": not a JSON object");
  const auto v = j.find("max_seq_length");
  if (v == j.end() || v->is_null()) return 0;
  if (!v->is_number_integer() || v->get<long>() < 1 || v->get<long>() > 1000000)
    throw InputError(where + ": \"max_seq_length\" is not a positive integer");
  return v->get<int>();
}

bool parse_do_lower_case(const std::string& text, const std::string& where) {
  const json j = parse_object(text, where, "the Transformer module's settings");
  if (!j.is_object()) throw InputError(where + ": not a JSON object");
  const auto v = j.find("do_lower_case");
  if (v == j.end() || v->is_null()) return false;
  if (!v->is_boolean()) throw InputError(where + ": \"do_lower_case\" is not true or false");
  return v->get<bool>();
}

bool is_sentence_model(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "modules.json", ec);
}

std::string parse_default_prompt(const std::string& text, const std::string& where) {
  const json j = parse_object(text, where, "sentence-transformers' settings");
  if (!j.is_object()) throw InputError(where + ": not a JSON object");
  const auto name = j.find("default_prompt_name");
  if (name == j.end() || name->is_null()) return "";
  if (!name->is_string()) throw InputError(where + ": \"default_prompt_name\" is not a string or null");
  const auto prompts = j.find("prompts");
  const std::string key = name->get<std::string>();
  if (prompts == j.end() || !prompts->is_object() || !prompts->contains(key))
    throw InputError(where + ": \"default_prompt_name\" is '" + key + "', which \"prompts\" does not hold; "
                     "sentence-transformers refuses the folder too; name one of its prompts, or set it to null");
  const json& p = (*prompts)[key];
  if (!p.is_string()) throw InputError(where + ": prompt '" + key + "' is not a string");
  return p.get<std::string>();
}

SentenceModel read_sentence_model(const std::string& dir) {
  SentenceModel m;
  m.dir = dir;
  const std::string modules_file = (fs::path(dir) / "modules.json").string();
  const auto modules = parse_modules_json(read_file(modules_file), modules_file);
  // Transformer, Pooling, then Normalize if any: what all-MiniLM-L6-v2 and the encoders like it hold.
  const auto refuse = [&](const std::string& what) {
    throw InputError(modules_file + ": " + what + "; headprune computes Transformer -> Pooling [-> Normalize], as "
                     "all-MiniLM-L6-v2 holds them");
  };
  if (modules.size() < 2 || modules[0].type != "Transformer") refuse("the first module is not a Transformer");
  if (modules[1].type != "Pooling") refuse("the second module is " + modules[1].type + ", not Pooling");
  for (size_t i = 2; i < modules.size(); ++i) {
    if (modules[i].type != "Normalize" || i != 2) refuse("module " + std::to_string(i) + " is " + modules[i].type);
    m.normalize = true;
  }
  m.transformer_dir = modules[0].path.empty() ? dir : (fs::path(dir) / modules[0].path).string();
  m.pooling_file = (fs::path(dir) / modules[1].path / "config.json").string();
  m.pooling = parse_pooling_config(read_file(m.pooling_file), m.pooling_file);
  const std::string st_config = (fs::path(m.transformer_dir) / "sentence_bert_config.json").string();
  std::error_code ec;
  if (fs::is_regular_file(st_config, ec)) {
    const std::string text = read_file(st_config);
    m.max_seq_length = parse_max_seq_length(text, st_config);
    m.do_lower_case = parse_do_lower_case(text, st_config);
  }
  const std::string settings = (fs::path(dir) / "config_sentence_transformers.json").string();
  if (fs::is_regular_file(settings, ec)) m.prompt = parse_default_prompt(read_file(settings), settings);
  if (!m.prompt.empty() && !m.pooling.include_prompt)
    throw InputError(m.pooling_file + ": \"include_prompt\": false leaves the default prompt's tokens out of the "
                     "pooling, which headprune does not compute; set it to true, or the default_prompt_name of " +
                     settings + " to null");
  return m;
}

void write_sentence_model_files(const SentenceModel& src, int width, const std::string& dir) {
  const auto module = [](int i, const std::string& path, const std::string& type) {
    return json{{"idx", i}, {"name", std::to_string(i)}, {"path", path}, {"type", "sentence_transformers.models." + type}};
  };
  json modules = json::array({module(0, "", "Transformer"), module(1, "1_Pooling", "Pooling")});
  if (src.normalize) modules.push_back(module(2, "2_Normalize", "Normalize"));
  write_file_atomic(dir + "/modules.json", modules.dump(2) + "\n");
  json pooling = json::parse(read_file(src.pooling_file));  // parsed once already by read_sentence_model
  pooling["word_embedding_dimension"] = width;
  fs::create_directories(fs::path(dir) / "1_Pooling");
  write_file_atomic(dir + "/1_Pooling/config.json", pooling.dump(2) + "\n");
  if (src.normalize) fs::create_directories(fs::path(dir) / "2_Normalize");  // Normalize saves no file
  std::error_code ec;
  for (const auto& [folder, name] : {std::pair{src.transformer_dir, "sentence_bert_config.json"},
                                     {src.dir, "config_sentence_transformers.json"}})
    if (const auto from = fs::path(folder) / name; fs::is_regular_file(from, ec))
      write_file_atomic(dir + "/" + name, read_file(from.string()));
}

bool is_sentence_model_file(const std::string& name) {
  return name == "modules.json" || name == "1_Pooling" || name == "2_Normalize" || name == "sentence_bert_config.json" ||
         name == "config_sentence_transformers.json";
}

}  // namespace hp::core
