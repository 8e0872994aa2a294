// A sentence-transformers folder's JSON files (core/io/sentence_model.h): modules.json, 1_Pooling/config.json,
// sentence_bert_config.json and config_sentence_transformers.json, each parser on the same bytes. What is accepted is within the ranges the reader
// promises.
#include <filesystem>
#include <string>

#include "core/io/sentence_model.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  hp::fuzz::expect_clean([&] {
    for (const auto& m : hp::core::parse_modules_json(text, "fuzz/modules.json")) {
      const std::filesystem::path path(m.path);
      if (path.is_absolute()) __builtin_trap();  // a module's folder is inside the model folder
      for (const auto& part : path)
        if (part == "..") __builtin_trap();
    }
  });
  hp::fuzz::expect_clean([&] {
    const auto p = hp::core::parse_pooling_config(text, "fuzz/config.json");
    if (p.modes.empty() || p.dimension < 1) __builtin_trap();
  });
  hp::fuzz::expect_clean([&] {
    if (hp::core::parse_max_seq_length(text, "fuzz/sentence_bert_config.json") < 0) __builtin_trap();
  });
  hp::fuzz::expect_clean([&] { hp::core::parse_do_lower_case(text, "fuzz/sentence_bert_config.json"); });
  hp::fuzz::expect_clean([&] { hp::core::parse_default_prompt(text, "fuzz/config_sentence_transformers.json"); });
  return 0;
}
