// headprune's version (see core/base/version.h).
#include "core/base/version.h"

namespace hp::core {

std::string headprune_version() { return HP_VERSION; }

}  // namespace hp::core
