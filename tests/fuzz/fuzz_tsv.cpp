// GLUE TSV rows: the first byte picks a task (SST-2 with a header, STS-B scores, MRPC, the headerless MNLI
// subset) and whether some rows are held out of it (core/data/holdout.h), the rest is its dev file.
#include <string>

#include "core/data/glue.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* kTasks[] = {"sst2", "stsb", "mrpc", "mnli_subset"};
  const auto& task = hp::core::find_task(kTasks[data[0] % 4]);
  const auto& split = task.find_split("dev");
  hp::fuzz::as_file(data + 1, size - 1, "data/" + task.folder + "/" + split.file);
  const int held = (data[0] >> 2) % 8;  // 0: the whole split; else dev[holdout:N] or dev[rest:N]
  const std::string spec = held == 0 ? "dev" : "dev[" + std::string(held % 2 ? "holdout:" : "rest:") + std::to_string(held) + "]";
  hp::fuzz::expect_clean([&] { hp::core::read_task(task, hp::fuzz::scratch() + "/data", spec); });
  return 0;
}
