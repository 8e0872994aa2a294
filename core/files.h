// Small file helpers shared by every writer: atomic text writes (write *.tmp, then rename).
#pragma once

#include <string>

namespace hp::core {

// Writes `content` to `path` atomically, creating parent folders. Throws InputError on failure.
void write_file_atomic(const std::string& path, const std::string& content);

// Whole file as a string. Throws InputError naming the path.
std::string read_file(const std::string& path);

}  // namespace hp::core
