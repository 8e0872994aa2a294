// model.safetensors.index.json of a sharded checkpoint (core/io/safetensors_index.h): JSON, weight_map, shard names.
#include <algorithm>
#include <string>

#include "core/io/safetensors_index.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hp::fuzz::expect_clean([&] {
    const auto index = hp::core::parse_safetensors_index(std::string(reinterpret_cast<const char*>(data), size),
                                                         "fuzz.index.json");
    // What a loader relies on: every shard is a plain file name that weight_map names, in sorted order.
    for (const auto& shard : index.shards)
      if (shard.empty() || shard == ".." || shard.find('/') != std::string::npos) __builtin_trap();
    for (const auto& [tensor, shard] : index.weight_map)
      if (!std::binary_search(index.shards.begin(), index.shards.end(), shard)) __builtin_trap();
  });
  return 0;
}
