// headprune's version and source tree (see core/base/version.h).
#include "core/base/version.h"

namespace hp::core {

std::string headprune_version() { return HP_VERSION; }

std::string source_dir() { return HP_SOURCE_DIR; }

}  // namespace hp::core
