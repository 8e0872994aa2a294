// The one Catch2 main shared by every test executable. A run that called hp::test::skip() and had no
// failure exits with kSkipExitCode so that CTest shows it as skipped (tests/skip.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "skip.h"

namespace {
bool g_skipped = false;
}

namespace hp::test {
void skip(const std::string& why) {
  g_skipped = true;
  WARN("skipped: " << why);
}
}  // namespace hp::test

int main(int argc, char* argv[]) {
  const int failed = Catch::Session().run(argc, argv);
  return failed == 0 && g_skipped ? hp::test::kSkipExitCode : failed;
}
