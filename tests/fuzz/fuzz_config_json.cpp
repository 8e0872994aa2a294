// config.json: every field range-checked before anything is allocated, then written back and read again.
#include <string>

#include "core/model/bert_config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hp::fuzz::expect_clean([&] {
    const auto cfg =
        hp::core::parse_bert_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
    // What was accepted round-trips (the export writes it; the loader and Hugging Face read it back).
    const auto again = hp::core::parse_bert_config(hp::core::bert_config_json(cfg), "fuzz/written.json");
    if (again.hidden_size != cfg.hidden_size || again.total_heads() != cfg.total_heads() ||
        again.num_labels != cfg.num_labels)
      __builtin_trap();
  });
  return 0;
}
