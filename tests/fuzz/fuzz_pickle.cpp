// The data.pkl of pytorch_model.bin: the restricted unpickler (core/io/torch_pickle.h).
#include "core/io/torch_pickle.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hp::fuzz::expect_clean([&] { hp::core::parse_state_dict_pickle(data, size, "fuzz/data.pkl"); });
  return 0;
}
