// Skipping a test that finds its model, Python or data missing (Catch2 v2 has no SKIP): skip() logs the
// reason; the shared main (tests/catch_main.cpp) then exits with kSkipExitCode if nothing failed, and CTest
// counts the test as skipped (SKIP_RETURN_CODE), never as passed. A failure still fails.
#pragma once

#include <string>

namespace hp::test {

inline constexpr int kSkipExitCode = 77;
// Records a skip with its reason (printed as a Catch2 warning). The caller returns afterwards.
void skip(const std::string& why);

}  // namespace hp::test
