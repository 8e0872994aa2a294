// Sharded safetensors: the index parser, the shard plan and a folder's weights files (core/io/safetensors_index.h).
// Torch-free, so that the fuzz target fuzz_safetensors_index links it without LibTorch.
#include "core/io/safetensors_index.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/base/errors.h"  // CheckpointError
#include "core/base/files.h"  // read_file

namespace hp::core {
namespace {

constexpr const char* kIndexFix = "re-download the checkpoint, or save it again with save_pretrained";

[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& fix = kIndexFix) {
  throw CheckpointError(where + ": " + what + "; " + fix);
}

// A shard must be a file beside the index: a plain name, never a path (an index must not read outside its folder).
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

}  // namespace

ShardIndex parse_safetensors_index(const std::string& text, const std::string& where) {
  // JSON objects may repeat a key and parsers keep one of them: a tensor listed twice (in two shards) would lose
  // one silently, so the keys of weight_map (and of the top level) are collected while parsing.
  std::string top, duplicate, duplicate_in;
  std::set<std::string> top_keys, tensors;
  const nlohmann::json::parser_callback_t on_key = [&](int depth, nlohmann::json::parse_event_t event,
                                                       nlohmann::json& parsed) {
    if (event != nlohmann::json::parse_event_t::key || !parsed.is_string()) return true;
    const std::string key = parsed.get<std::string>();
    if (depth == 1) {
      top = key;
      if (!top_keys.insert(key).second && duplicate.empty()) duplicate = key, duplicate_in = "the index";
    } else if (depth == 2 && top == "weight_map" && !tensors.insert(key).second && duplicate.empty()) {
      duplicate = key, duplicate_in = "weight_map";
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, on_key);
  } catch (const nlohmann::json::exception& e) {
    fail(where, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) fail(where, "the index is not a JSON object");
  if (!duplicate.empty())
    fail(where, (duplicate_in == "weight_map" ? "tensor '" : "key '") + duplicate + "' is listed twice in " +
                    duplicate_in + (duplicate_in == "weight_map" ? " (a tensor in two shards)" : ""));
  if (!j.contains("weight_map"))
    fail(where, "no weight_map (the table of which shard holds each tensor)");
  const auto& wm = j.at("weight_map");
  if (!wm.is_object()) fail(where, "weight_map is not a JSON object");
  if (wm.empty()) fail(where, "weight_map is empty: the index names no tensor");
  ShardIndex index;
  std::set<std::string> shards;
  for (const auto& [tensor, file] : wm.items()) {
    if (!file.is_string()) fail(where, "weight_map entry of tensor '" + tensor + "' is " + file.dump() + ", not a file name");
    const std::string name = file.get<std::string>();
    if (!plain_file_name(name))
      fail(where, "weight_map puts tensor '" + tensor + "' in '" + name +
                      "', which is not a file beside the index (a shard must be a plain file name in the model folder)",
           "refused; " + std::string(kIndexFix));
    index.weight_map[tensor] = name;
    shards.insert(name);
  }
  index.shards.assign(shards.begin(), shards.end());
  // transformers writes metadata.total_size; the weights do not depend on it, so it is recorded, never required.
  if (j.contains("metadata") && j.at("metadata").is_object() && j.at("metadata").contains("total_size")) {
    const auto& ts = j.at("metadata").at("total_size");
    if (ts.is_number_unsigned()) index.total_size = ts.get<std::uint64_t>();
  }
  return index;
}

ShardIndex read_safetensors_index(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    fail(path, "cannot read the index", "check the file is readable");
  }
  return parse_safetensors_index(text, path);
}

std::string shard_file_name(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", index, count);
  return name;
}

bool is_shard_file_name(const std::string& name) {
  static const std::regex shard(R"(model-\d{5,}-of-\d{5,}\.safetensors)");
  return std::regex_match(name, shard);
}

std::vector<int> plan_shards(const std::vector<std::uint64_t>& sizes, std::uint64_t max_bytes) {
  std::vector<int> out;
  out.reserve(sizes.size());
  int shard = 0;
  std::uint64_t current = 0;
  bool empty = true;
  for (const std::uint64_t size : sizes) {
    if (max_bytes > 0 && !empty && current + size > max_bytes) {
      ++shard;
      current = 0;
    }
    out.push_back(shard);
    current += size;
    empty = false;
  }
  return out;
}

std::vector<std::string> weights_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir + "/model.safetensors", ec)) return {dir + "/model.safetensors"};
  const std::string index = dir + "/" + kSafetensorsIndexName;
  if (fs::exists(index, ec)) {
    std::vector<std::string> files = {index};
    try {
      for (const auto& shard : read_safetensors_index(index).shards) files.push_back(dir + "/" + shard);
    } catch (const Error&) {
    }
    return files;
  }
  if (fs::exists(dir + "/pytorch_model.bin", ec)) return {dir + "/pytorch_model.bin"};
  return {};
}

}  // namespace hp::core
