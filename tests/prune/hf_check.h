// Running tools/hf_check.py on an export from a test (tests/prune/slim_test.cpp, arch_test.cpp).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/io/tensor_io.h"
#include "core/model/bert.h"
#include "fixtures.h"

namespace hp::test {

// Runs tools/hf_check.py (logits within 1e-4, kept-head attention shapes, save_pretrained round trip) with
// `python` on the export in `dir`; `want` are headprune's logits for `in`. Returns its exit status.
inline int hf_check(const std::string& python, const std::filesystem::path& dir, const hp::core::EncoderInput& in,
                    const torch::Tensor& want, const std::string& flags = "") {
  const auto ref = dir / "expected.h5";
  hp::core::write_hdf5(ref.string(), {{"input_ids", in.input_ids},
                                      {"attention_mask", in.attention_mask},
                                      {"token_type_ids", in.token_type_ids},
                                      {"logits", want}});
  const std::string cmd =
      python + " " + kSourceDir + "/tools/hf_check.py " + dir.string() + " " + ref.string() + " --tol 1e-4 " + flags;
  return std::system(cmd.c_str());
}

}  // namespace hp::test
