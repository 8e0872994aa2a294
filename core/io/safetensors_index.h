// Sharded safetensors, as Hugging Face transformers writes them (save_pretrained with max_shard_size): the
// tensors split over model-00001-of-0000N.safetensors … beside model.safetensors.index.json,
//   {"metadata": {"total_size": BYTES}, "weight_map": {"tensor name": "model-00001-of-0000N.safetensors", …}}.
// Torch-free: the index parser, the shard plan of a writer and the weights files of a model folder; the
// tensors themselves are read and written by core/io/tensor_io.h, folders by core/io/checkpoint.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hp::core {

inline constexpr const char* kSafetensorsIndexName = "model.safetensors.index.json";

// A validated index: every tensor's shard, and the shard files in name order.
struct ShardIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name (in the index's folder)
  std::vector<std::string> shards;  // the distinct file names of weight_map, sorted
  std::uint64_t total_size = 0;  // metadata.total_size when given (transformers' sum of the tensors' bytes), else 0
};

// Parses an index's text; `where` (its path) names it in errors. Throws CheckpointError, one line naming the
// file, the problem and the fix: not JSON, not an object, no weight_map (or not an object, or empty), a tensor
// listed twice, a shard that is not a plain file name of the folder ("../x", "/abs", "a/b": refused, so an
// index never reads outside its folder). metadata is optional (the weights do not depend on it).
ShardIndex parse_safetensors_index(const std::string& text, const std::string& where);
// Reads and parses `path`.
ShardIndex read_safetensors_index(const std::string& path);

// transformers' shard name: model-00002-of-00003.safetensors (1-based, five digits).
std::string shard_file_name(int index, int count);
// True for names of that form (what an export may leave in its folder).
bool is_shard_file_name(const std::string& name);

// transformers' split (modeling_utils.shard_checkpoint): tensors taken in order, a new shard started when the
// next tensor would take the current one over `max_bytes` of tensor data and it holds one already (a tensor larger
// than max_bytes has a shard of its own). Returns each tensor's shard number (0-based); sizes[i] is tensor i's
// bytes. max_bytes 0: one shard.
std::vector<int> plan_shards(const std::vector<std::uint64_t>& sizes, std::uint64_t max_bytes);

// The files that hold a model folder's weights, in the order a loader reads them: model.safetensors; else the
// index and the shards it names (just the index when it does not parse: loading reports why); else
// pytorch_model.bin; else none. For fingerprints of a folder's weights (which ranks compare, which resume files
// key on).
std::vector<std::string> weights_files(const std::string& dir);

}  // namespace hp::core
