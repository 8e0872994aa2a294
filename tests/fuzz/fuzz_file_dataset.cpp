// A user's data files (core/data/file_dataset.h): the input read as CSV, TSV and JSON lines, and when it reads,
// its columns chosen, labels typed and rows turned into Examples.
#include <string>
#include <vector>

#include "core/data/file_dataset.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hp::fuzz::as_file(data, size, "data/train.txt");
  for (const auto f : {hp::core::FileFormat::kCsv, hp::core::FileFormat::kTsv, hp::core::FileFormat::kJsonl}) {
    hp::fuzz::expect_clean([&] {
      const hp::core::TableFile t = hp::core::read_table(path, f);
      const hp::core::FileColumns c = hp::core::choose_columns(t, {}, "");
      const hp::core::FileLabels labels = hp::core::infer_labels(t, "", {});
      hp::core::to_examples(t, c, labels);
    });
  }
  return 0;
}
