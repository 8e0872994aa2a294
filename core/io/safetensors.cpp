// safetensors parser and writer; see core/io/safetensors.h. Torch-free on purpose: it compiles fast
// and the bad-input catalogue is tested on raw bytes.
#include "core/io/safetensors.h"

#include "core/base/files.h"  // write_file_atomic

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "core/base/errors.h"  // CheckpointError, HP_CHECK

namespace hp::core {
namespace {

// HF's Rust reader refuses headers above 100 MB (MAX_HEADER_SIZE); we use the same bound.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kCorruptFix = "re-download or re-export the checkpoint";

// Order fixed by the enum; dtype_size/dtype_name/parse_dtype all read this one table.
struct DTypeInfo {
  DType dtype;
  const char* name;
  std::size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "F64", 8},   {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
};

std::string supported_dtypes() {
  std::string out;
  for (const auto& d : kDTypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& fix) {
  throw CheckpointError(where + ": " + what + "; " + fix);
}

std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool is_unsigned(const nlohmann::json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0);
}

TensorEntry parse_entry(const std::string& where, const std::string& name, const nlohmann::json& j) {
  const std::string tensor = "tensor '" + name + "'";
  if (!j.is_object()) fail(where, tensor + " header entry is not a JSON object", kCorruptFix);
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(field)) fail(where, tensor + " is missing '" + field + "'", kCorruptFix);
  }
  TensorEntry e;
  e.name = name;
  const auto& jd = j.at("dtype");
  const std::string dname = jd.is_string() ? jd.get<std::string>() : jd.dump();
  const auto dtype = parse_dtype(dname);
  if (!dtype) {
    fail(where, tensor + " has unsupported dtype '" + dname + "' (supported: " + supported_dtypes() + ")",
         "convert it before export, e.g. model.float() in Python");
  }
  e.dtype = *dtype;
  const auto& js = j.at("shape");
  if (!js.is_array()) fail(where, tensor + " shape is not an array", kCorruptFix);
  for (const auto& d : js) {
    if (!is_unsigned(d))
      fail(where, tensor + " shape " + js.dump() + " has a non-integer or negative dimension", kCorruptFix);
    e.shape.push_back(d.get<std::int64_t>());
  }
  const auto& jo = j.at("data_offsets");
  if (!jo.is_array() || jo.size() != 2)
    fail(where, tensor + " data_offsets " + jo.dump() + " is not a pair [begin, end]", kCorruptFix);
  if (!is_unsigned(jo[0]) || !is_unsigned(jo[1]))
    fail(where, tensor + " data_offsets " + jo.dump() + " holds a negative or non-integer offset", kCorruptFix);
  if (jo[0].get<std::uint64_t>() > jo[1].get<std::uint64_t>())
    fail(where, tensor + " data_offsets " + jo.dump() + " end before they begin", kCorruptFix);
  e.begin = jo[0].get<std::uint64_t>();
  e.end = jo[1].get<std::uint64_t>();
  // prod(shape) * dtype size, with overflow detection (an overflow can never match the span).
  std::uint64_t bytes = dtype_size(e.dtype);
  bool overflow = false;
  for (auto d : e.shape) {
    const auto ud = static_cast<std::uint64_t>(d);
    if (ud != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / ud) overflow = true;
    bytes *= ud;
  }
  if (overflow || bytes != e.end - e.begin) {
    fail(where,
         tensor + " shape " + shape_str(e.shape) + " " + dname + " needs " +
             (overflow ? std::string("more than 2^64") : std::to_string(bytes)) + " bytes but data_offsets span " +
             std::to_string(e.end - e.begin),
         kCorruptFix);
  }
  return e;
}

}  // namespace

std::size_t dtype_size(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.size;
  }
  HP_CHECK(false, "dtype_size: unknown DType " << static_cast<int>(dtype));
  return 0;
}

const char* dtype_name(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  HP_CHECK(false, "dtype_name: unknown DType " << static_cast<int>(dtype));
  return "";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& d : kDTypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

// Either a read-only private mmap of a file or an owned byte vector.
struct SafetensorsFile::Storage {
  void* map = nullptr;
  std::size_t map_size = 0;
  std::vector<std::uint8_t> bytes;
  ~Storage() {
    if (map != nullptr) munmap(map, map_size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open (") + std::strerror(errno) + ")", "check the path");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file", "pass the path of a .safetensors file");
  }
  SafetensorsFile f;
  f.where_ = path;
  f.storage_ = std::make_shared<Storage>();
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::uint8_t* bytes = nullptr;
  if (size > 0) {  // mmap of length 0 is an error; an empty file fails validation below
    void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail(path, std::string("cannot mmap (") + std::strerror(err) + ")", "check the file is readable");
    }
    f.storage_->map = m;
    f.storage_->map_size = size;
    bytes = static_cast<const std::uint8_t*>(m);
  }
  ::close(fd);
  f.validate(bytes, size);
  return f;
}

SafetensorsFile SafetensorsFile::parse(std::vector<std::uint8_t> bytes, const std::string& where) {
  SafetensorsFile f;
  f.where_ = where;
  f.storage_ = std::make_shared<Storage>();
  f.storage_->bytes = std::move(bytes);
  f.validate(f.storage_->bytes.data(), f.storage_->bytes.size());
  return f;
}

namespace {

// The 8-byte little-endian header length, checked against the file size and the 100 MB limit.
std::uint64_t header_length(const std::string& w, const std::uint8_t* bytes, std::size_t size) {
  if (size < 8) {
    fail(w, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte safetensors header length",
         "the file is truncated or not safetensors; " + std::string(kCorruptFix));
  }
  const std::uint64_t n = read_u64_le(bytes);
  if (n > kMaxHeaderBytes) {
    fail(w, "header length " + std::to_string(n) + " bytes is above the 100 MB limit",
         "the file is corrupt or not safetensors; " + std::string(kCorruptFix));
  }
  if (n > size - 8) {
    fail(w,
         "header length " + std::to_string(n) + " bytes runs past the end of the file (" + std::to_string(size) +
             " bytes, the first 8 of them the length)",
         "the file is truncated; " + std::string(kCorruptFix));
  }
  if (n == 0)
    fail(w, "header length is 0, so there is no JSON header",
         "the file is not safetensors; " + std::string(kCorruptFix));
  return n;
}

// The JSON header: an object whose top-level keys are unique. JSON objects may repeat a key and parsers
// keep one of them; a safetensors header must not (the other tensor's bytes would be silently ignored), so
// the top-level keys are collected while parsing.
nlohmann::json parse_header(const std::string& w, const std::uint8_t* begin, std::uint64_t n) {
  std::set<std::string> keys;
  std::string duplicate;
  const nlohmann::json::parser_callback_t on_key = [&](int depth, nlohmann::json::parse_event_t event,
                                                       nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(begin, begin + n, on_key);
  } catch (const nlohmann::json::exception& e) {
    fail(w, std::string("header is not valid JSON (") + e.what() + ")", kCorruptFix);
  }
  if (!header.is_object()) fail(w, "header JSON is not an object", kCorruptFix);
  if (!duplicate.empty()) fail(w, "tensor '" + duplicate + "' is listed twice in the header", kCorruptFix);
  return header;
}

// HF's reader requires the entries to tile the buffer exactly: no overlap, no gap, no tail. We error on all
// three (not warn), so every file we accept is one HF accepts too.
void check_tiling(const std::string& w, const std::vector<TensorEntry>& entries, std::uint64_t buffer_size) {
  std::vector<const TensorEntry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  std::uint64_t covered = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry* e : by_offset) {
    if (e->begin < covered) {
      fail(w,
           "tensors '" + prev->name + "' [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) +
               "] and '" + e->name + "' [" + std::to_string(e->begin) + ", " + std::to_string(e->end) + "] overlap",
           kCorruptFix);
    }
    if (e->begin > covered) {
      fail(w,
           "data buffer has a gap of " + std::to_string(e->begin - covered) + " bytes before tensor '" + e->name + "'",
           kCorruptFix);
    }
    covered = e->end;
    prev = e;
  }
  if (covered != buffer_size) {
    fail(w, "data buffer has " + std::to_string(buffer_size - covered) + " trailing bytes not covered by any tensor",
         kCorruptFix);
  }
}

}  // namespace

void SafetensorsFile::validate(const std::uint8_t* bytes, std::size_t size) {
  const std::string& w = where_;
  const std::uint64_t n = header_length(w, bytes, size);
  const nlohmann::json header = parse_header(w, bytes + 8, n);
  const std::uint64_t buffer_size = size - 8 - n;
  buffer_ = bytes + 8 + n;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) fail(w, "__metadata__ is not a JSON object", kCorruptFix);
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          fail(w, "__metadata__ value for '" + mk + "' is not a string", kCorruptFix);
        }
        metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    TensorEntry e = parse_entry(w, key, value);
    if (e.end > buffer_size) {
      fail(w,
           "tensor '" + key + "' data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
               "] run past the data buffer (" + std::to_string(buffer_size) + " bytes)",
           "the file is truncated; " + std::string(kCorruptFix));
    }
    entries_.push_back(std::move(e));
  }
  check_tiling(w, entries_, buffer_size);
  std::sort(entries_.begin(), entries_.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const TensorEntry& e, const std::string& n) { return e.name < n; });
  return (it != entries_.end() && it->name == name) ? &*it : nullptr;
}

const std::uint8_t* SafetensorsFile::data(const TensorEntry& entry) const { return buffer_ + entry.begin; }

std::vector<std::uint8_t> serialize_safetensors(const std::map<std::string, TensorBlob>& tensors,
                                                const std::map<std::string, std::string>& metadata) {
  // Data order: element size descending, then name (HF's order), so each tensor is size-aligned.
  std::vector<std::pair<const std::string*, const TensorBlob*>> order;
  for (const auto& [name, blob] : tensors) {
    if (name == kMetadataKey) {
      fail("write_safetensors", "a tensor is named '__metadata__'", "rename it; the key is reserved");
    }
    std::uint64_t numel = 1;
    for (auto d : blob.shape) {
      HP_CHECK(d >= 0, "serialize_safetensors: tensor '" << name << "' has a negative dimension");
      numel *= static_cast<std::uint64_t>(d);
    }
    HP_CHECK(numel * dtype_size(blob.dtype) == blob.nbytes, "serialize_safetensors: tensor '"
                                                                << name << "' has " << blob.nbytes
                                                                << " bytes for shape " << shape_str(blob.shape));
    HP_CHECK(blob.nbytes == 0 || blob.data != nullptr, "serialize_safetensors: tensor '" << name << "' has no data");
    order.emplace_back(&name, &blob);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return dtype_size(a.second->dtype) > dtype_size(b.second->dtype);
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, blob] : order) {
    header[*name] = {
        {"dtype", dtype_name(blob->dtype)}, {"shape", blob->shape}, {"data_offsets", {offset, offset + blob->nbytes}}};
    offset += blob->nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // HF pads with spaces so data starts 8-aligned

  std::vector<std::uint8_t> out(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::uint8_t* dst = out.data() + 8 + text.size();
  for (const auto& [name, blob] : order) {
    if (blob->nbytes > 0) std::memcpy(dst, blob->data, blob->nbytes);
    dst += blob->nbytes;
  }
  return out;
}

void write_safetensors_file(const std::string& path, const std::map<std::string, TensorBlob>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  const auto bytes = serialize_safetensors(tensors, metadata);
  write_file_atomic(path, bytes.data(), bytes.size());
}

}  // namespace hp::core
