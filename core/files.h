// Small file helpers shared by every writer: results are written to PATH.tmp and renamed over PATH, so a
// reader (or a resumed run) never sees half a file, and only ever over a regular file.
#pragma once

#include <cstddef>
#include <string>

namespace hp::core {

// Makes `path` ready to receive a new regular file: refuses anything that a write-then-rename would
// destroy or cannot replace (a device such as /dev/null, a folder, a FIFO, a socket), and creates missing
// parent folders. Throws InputError naming the path and the fix.
void prepare_output_file(const std::string& path);

// Renames the finished `tmp` over `path`; on failure removes `tmp` and throws InputError.
void commit_output_file(const std::string& tmp, const std::string& path);

// Writes `content` (or `size` bytes) to `path` atomically: prepare_output_file, PATH.tmp, rename.
// Nothing is left behind on failure. Throws InputError.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, const void* bytes, std::size_t size);

// Whole file as a string. Throws InputError naming the path.
std::string read_file(const std::string& path);

}  // namespace hp::core
