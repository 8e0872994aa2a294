// The one Catch2 main shared by every test executable. It selects the BLAS kernel as prune's main does, so that a
// test and the prune it runs time and key their measurements alike. A run that called hp::test::skip() and had no
// failure exits with kSkipExitCode so that CTest shows it as skipped (tests/skip.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "core/kernels/blas.h"
#include "skip.h"

namespace {
bool g_skipped = false;
}

namespace hp::test {
void skip(const std::string& why) {
  g_skipped = true;
  WARN("skipped: " << why);
}

namespace {
bool current_case_hidden() {
  const std::string name = Catch::getResultCapture().getCurrentTestName();
  for (const auto& tc : Catch::getRegistryHub().getTestCaseRegistry().getAllTests())
    if (tc.name == name) return tc.isHidden();
  return false;
}
}  // namespace

void skip_optional(const std::string& why) {
  if (current_case_hidden()) return skip(why);
  FAIL_CHECK("an optional check skipped inside a visible test case (" << why << "): move it into a hidden test "
             "case ([.tag]) with a CTest test of its own (tests/CMakeLists.txt), so that its skip does not mark the "
             "file's test as skipped");
}
}  // namespace hp::test

int main(int argc, char* argv[]) {
  try {
    hp::core::ensure_fast_blas(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  const int failed = Catch::Session().run(argc, argv);
  return failed == 0 && g_skipped ? hp::test::kSkipExitCode : failed;
}
