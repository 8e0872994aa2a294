// What the build compiled in (core/CMakeLists.txt, on this one file only, so that no other compile's command
// line carries the checkout's path and ccache shares every other object between clones): the version and the
// source tree, where the Python tools (tools/) and the shipped configs live.
#pragma once

#include <string>

namespace hp::core {

// e.g. "0.1.0".
std::string headprune_version();

// The checkout this build was configured from, e.g. "/work/headprune".
std::string source_dir();

}  // namespace hp::core
