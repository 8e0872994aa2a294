// safetensors: a torch-free parser and writer of Hugging Face's tensor file format
// (u64 little-endian header length N, N bytes of JSON header, then the raw data buffer).
// The parser validates everything HF's Rust reader does and throws hp::CheckpointError.
// Torch-facing TensorMap reading/writing lives in core/io/tensor_io.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hp::core {

// Element types we read and write. F32/F16/BF16 hold weights; I64/I32 hold ids (position_ids).
enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32 };

// Bytes per element of `dtype`.
std::size_t dtype_size(DType dtype);
// The header spelling: "F32", "BF16", ...
const char* dtype_name(DType dtype);
// Parses the header spelling; nullopt for anything we do not support.
std::optional<DType> parse_dtype(const std::string& name);

// One header entry. begin/end are byte offsets relative to the start of the data buffer.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// A validated safetensors image: entries sorted by name, metadata, and the data buffer.
// Owns its bytes (a read-only mmap for files, a copy for in-memory parses).
class SafetensorsFile {
 public:
  // Maps `path` and validates it; throws CheckpointError naming the file on any problem.
  static SafetensorsFile open(const std::string& path);
  // Validates an in-memory image; `where` names it in error messages.
  static SafetensorsFile parse(std::vector<std::uint8_t> bytes, const std::string& where);

  const std::string& where() const { return where_; }
  const std::vector<TensorEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The entry called `name`, or nullptr.
  const TensorEntry* find(const std::string& name) const;
  // Start of the entry's bytes (entry.end - entry.begin of them); valid while *this lives.
  const std::uint8_t* data(const TensorEntry& entry) const;

 private:
  struct Storage;  // mmap or vector; declared in the .cpp
  SafetensorsFile() = default;
  void validate(const std::uint8_t* bytes, std::size_t size);

  std::string where_;
  std::shared_ptr<Storage> storage_;
  const std::uint8_t* buffer_ = nullptr;  // data buffer start (after the header)
  std::vector<TensorEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: raw little-endian bytes of prod(shape) elements of dtype, not owned.
struct TensorBlob {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t nbytes = 0;
};

// Serialises tensors to a safetensors image. Deterministic: header keys sorted (nlohmann map
// order), data laid out by element size descending then name (as HF does, so every tensor is
// aligned to its element size), header padded with spaces to a multiple of 8. Empty metadata omits
// "__metadata__".
std::vector<std::uint8_t> serialize_safetensors(const std::map<std::string, TensorBlob>& tensors,
                                                const std::map<std::string, std::string>& metadata);

// Writes serialize_safetensors(...) atomically: `path`.tmp, then rename over `path`.
void write_safetensors_file(const std::string& path, const std::map<std::string, TensorBlob>& tensors,
                            const std::map<std::string, std::string>& metadata);

}  // namespace hp::core
