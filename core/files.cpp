// Atomic file writes (see core/files.h).
#include "core/files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"  // InputError

namespace hp::core {

void write_file_atomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << content;
    if (!out) throw InputError(tmp + ": cannot write; check that the folder is writable and the disk not full");
  }
  fs::rename(tmp, path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read; check the path");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace hp::core
