// Mask specs ("2:0,3;5:11", "f2:0-511", "layers:1,3-4", "hidden:0-7"), against a 12 x 12 model with 64 FFN neurons
// per layer and 32 hidden channels,
// and their round trip through format_mask (and format_head_mask for the head-only form).
#include <string>

#include "core/model/head_mask.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  if (spec.find('/') != std::string::npos) return 0;  // a spec may name a file; paths are not fuzzed here
  hp::fuzz::expect_clean([&] {
    const auto m = hp::core::parse_mask(spec, 12, 12, 64, "--mask", 32);
    const auto back = hp::core::parse_mask(hp::core::format_mask(m), 12, 12, 64, "--mask", 32);
    if (back.heads != m.heads || back.neurons != m.neurons || back.layers != m.layers || back.hidden != m.hidden)
      __builtin_trap();
  });
  hp::fuzz::expect_clean([&] {
    const auto keep = hp::core::parse_head_mask(spec, 12, 12);
    if (hp::core::parse_head_mask(hp::core::format_head_mask(keep), 12, 12) != keep) __builtin_trap();
  });
  return 0;
}
