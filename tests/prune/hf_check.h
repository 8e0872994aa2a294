// Running tools/hf_check.py on an export from a test (tests/prune/slim_test.cpp, arch_test.cpp).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/base/errors.h"
#include "core/base/process.h"
#include "core/io/tensor_io.h"
#include "core/model/bert.h"
#include "fixtures.h"
#include "prune/export/onnx.h"
#include "skip.h"

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

// Exports `slim` (saved in `dir`) to ONNX, which checks ONNX Runtime's logits against headprune's (≤ 1e-4, throwing
// when they differ); skipped, saying why, without ONNX Runtime.
inline void onnx_check_or_skip(const hp::core::Bert& slim, const std::filesystem::path& dir) {
  try {
    hp::prune::export_onnx(slim, dir.string());
    CHECK(std::filesystem::file_size(dir / "model.onnx") > 1000);
  } catch (const hp::InputError& e) {
    hp::test::skip(std::string("the ONNX check: ") + e.what());
  }
}

// The transformers 5 reference Python, or "" (and a skip saying so) when it is absent or incomplete. Optional
// (scripts/setup.sh --v5): only a hidden [.hf5] test case may call it (skip_optional, tests/skip.h).
inline std::string transformers5_or_skip() {
  const std::string py5 = HP_REF_PYTHON_V5;
  if (std::filesystem::exists(py5) &&
      hp::core::python_reference_incomplete(py5, hp::core::PythonRef::kTransformers5).empty())
    return py5;
  hp::test::skip_optional("the transformers 5 check: no complete reference at " + py5 +
                          " (scripts/setup.sh --v5 makes it)");
  return "";
}

}  // namespace hp::test
