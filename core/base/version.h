// headprune's version: the CMake project version, compiled in (core/CMakeLists.txt).
#pragma once

#include <string>

namespace hp::core {

// e.g. "0.1.0".
std::string headprune_version();

}  // namespace hp::core
