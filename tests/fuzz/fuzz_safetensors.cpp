// safetensors: header length, JSON, dtypes, shapes, offsets (core/io/safetensors.h), and every tensor's bytes.
#include <vector>

#include "core/io/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hp::fuzz::expect_clean([&] {
    const auto file = hp::core::SafetensorsFile::parse(std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
    for (const auto& e : file.entries()) {  // touch each tensor's first and last byte: the offsets hold
      if (e.end == e.begin) continue;
      const uint8_t* p = file.data(e);
      volatile uint8_t sink = p[0] ^ p[e.end - e.begin - 1];
      (void)sink;
    }
  });
  return 0;
}
