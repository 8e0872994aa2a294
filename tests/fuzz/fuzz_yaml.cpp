// The YAML config and a --set override: the first line of the input is the assignment, the rest the file.
#include <string>

#include "core/base/config.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto nl = text.find('\n');
  const std::string set = text.substr(0, nl), yaml = nl == std::string::npos ? "" : text.substr(nl + 1);
  const auto path = hp::fuzz::as_file(reinterpret_cast<const uint8_t*>(yaml.data()), yaml.size(), "config.yaml");
  hp::fuzz::expect_clean([&] {
    hp::core::Config cfg;
    hp::core::load_yaml(cfg, path);
    if (!set.empty()) hp::core::apply_set(cfg, set);
    hp::core::validate(cfg);
    hp::core::dump_yaml(cfg);
  });
  return 0;
}
