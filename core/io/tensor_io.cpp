// TensorMap IO: safetensors (via core/io/safetensors.h), torch.save .bin (via torch::pickle_load) and
// HDF5 (H5Cpp). Assumes a little-endian host, as safetensors and torch.save data are little-endian.
#include "core/io/tensor_io.h"

#include "core/base/files.h"  // write_file_atomic

#include <H5Cpp.h>
#include <caffe2/serialize/inline_container.h>  // PyTorchStreamReader

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "core/base/errors.h"  // CheckpointError
#include "core/io/safetensors.h"
#include "core/io/torch_pickle.h"  // parse_state_dict_pickle

namespace hp::core {
namespace {

constexpr const char* kCorruptFix = "re-download or re-export the checkpoint";

// DType <-> torch dtype; one table read both ways.
struct DTypeMap {
  DType dtype;
  torch::ScalarType scalar;
};
constexpr DTypeMap kTorchDTypes[] = {
    {DType::kF64, torch::kFloat64},   {DType::kF32, torch::kFloat32}, {DType::kF16, torch::kFloat16},
    {DType::kBF16, torch::kBFloat16}, {DType::kI64, torch::kInt64},   {DType::kI32, torch::kInt32},
};

torch::ScalarType to_torch(DType d) {
  for (const auto& m : kTorchDTypes) {
    if (m.dtype == d) return m.scalar;
  }
  HP_CHECK(false, "to_torch: unmapped DType " << dtype_name(d));
  return torch::kFloat32;
}

std::optional<DType> from_torch(torch::ScalarType s) {
  for (const auto& m : kTorchDTypes) {
    if (m.scalar == s) return m.dtype;
  }
  return std::nullopt;
}

// torch.save storage class names (torch.<Name>) -> dtype; one table.
struct StorageType {
  const char* name;
  torch::ScalarType scalar;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", torch::kFloat32},     {"DoubleStorage", torch::kFloat64}, {"HalfStorage", torch::kFloat16},
    {"BFloat16Storage", torch::kBFloat16}, {"LongStorage", torch::kInt64},     {"IntStorage", torch::kInt32},
    {"ShortStorage", torch::kInt16},       {"CharStorage", torch::kInt8},      {"ByteStorage", torch::kUInt8},
    {"BoolStorage", torch::kBool},
};

std::optional<torch::ScalarType> storage_scalar_type(const std::string& name) {
  for (const auto& s : kStorageTypes) {
    if (name == s.name) return s.scalar;
  }
  return std::nullopt;
}

[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& fix) {
  throw CheckpointError(where + ": " + what + "; " + fix);
}

// c10 and HDF5 messages span lines (backtraces); our errors are one line.
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  if (!is || std::filesystem::is_directory(path)) {
    fail(path, "cannot open for reading", "check the path");
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  if (is.bad()) fail(path, "read error", "check the file is readable");
  return bytes;
}

}  // namespace

TensorMap read_safetensors(const std::string& path) {
  const auto file = SafetensorsFile::open(path);
  TensorMap out;
  for (const auto& e : file.entries()) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(to_torch(e.dtype)));
    const auto nbytes = e.end - e.begin;
    if (nbytes > 0) std::memcpy(t.data_ptr(), file.data(e), nbytes);
    out.emplace(e.name, std::move(t));
  }
  return out;
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path) {
  return SafetensorsFile::open(path).metadata();
}

namespace {
void write_safetensors_here(const std::string& path, const TensorMap& tensors,
                            const std::map<std::string, std::string>& metadata);
void write_hdf5_here(const std::string& path, const TensorMap& tensors,
                     const std::map<std::string, std::string>& attrs);
}  // namespace

void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  shared_write([&] { write_safetensors_here(path, tensors, metadata); });
}

void write_hdf5(const std::string& path, const TensorMap& tensors, const std::map<std::string, std::string>& attrs) {
  shared_write([&] { write_hdf5_here(path, tensors, attrs); });
}

namespace {
void write_safetensors_here(const std::string& path, const TensorMap& tensors,
                            const std::map<std::string, std::string>& metadata) {
  std::vector<torch::Tensor> keep;  // CPU contiguous copies must outlive the blobs
  std::map<std::string, TensorBlob> blobs;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) fail(path, "tensor '" + name + "' is undefined", "drop it before writing");
    const auto dtype = from_torch(tensor.scalar_type());
    if (!dtype) {
      fail(path,
           "tensor '" + name + "' has dtype " + std::string(c10::toString(tensor.scalar_type())) +
               ", which safetensors export does not support",
           "convert it to float32, float16, bfloat16, int64 or int32");
    }
    keep.push_back(tensor.to(torch::kCPU).contiguous());
    const auto& t = keep.back();
    blobs[name] =
        TensorBlob{*dtype, t.sizes().vec(), t.data_ptr(), static_cast<std::size_t>(t.numel()) * t.element_size()};
  }
  write_safetensors_file(path, blobs, metadata);
}
}  // namespace

TensorMap to_float32(const TensorMap& tensors) {
  TensorMap out;
  for (const auto& [name, t] : tensors) {
    out.emplace(name, t.is_floating_point() ? t.to(torch::kFloat32) : t);
  }
  return out;
}

TensorMap read_torch_bin(const std::string& path) {
  const auto bytes = read_bytes(path);
  const bool zip = bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0;
  if (!zip) {
    // Pre-1.6 torch.save files are a bare pickle stream, which starts with the PROTO opcode 0x80.
    if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
      fail(path, "legacy (pre-1.6) torch.save format, which headprune cannot read",
           "convert it without running its pickle: with torch>=1.13, safetensors.torch.save_file(torch.load(p, weights_only=True), 'model.safetensors') beside it (weights_only refuses code in the file; a plain torch.load would run it)");
    }
    fail(path, "not a torch.save zip archive (" + std::to_string(bytes.size()) + " bytes)",
         "the file is truncated or not a pytorch_model.bin; " + std::string(kCorruptFix));
  }
  TensorMap out;
  try {
    std::istringstream stream(std::string(bytes.data(), bytes.size()));
    caffe2::serialize::PyTorchStreamReader reader(&stream);
    const auto [pkl, pkl_size] = reader.getRecord("data.pkl");
    const auto entries = parse_state_dict_pickle(static_cast<const std::uint8_t*>(pkl.get()), pkl_size, path);
    std::map<std::string, torch::Tensor> storages;  // shared storages (tied weights) load once
    for (const auto& e : entries) {
      const auto scalar = storage_scalar_type(e.storage_type);
      if (!scalar) {
        fail(path, "tensor '" + e.name + "' has unsupported storage type " + e.storage_type,
             "convert it to float32 before saving");
      }
      auto it = storages.find(e.storage_key);
      if (it == storages.end()) {
        const auto [rec, rec_size] = reader.getRecord("data/" + e.storage_key);
        const auto want = static_cast<std::uint64_t>(e.storage_numel) * c10::elementSize(*scalar);
        if (e.storage_numel < 0 || rec_size != want) {  // checked before allocating
          fail(path,
               "storage data/" + e.storage_key + " has " + std::to_string(rec_size) + " bytes, expected " +
                   std::to_string(want),
               kCorruptFix);
        }
        auto s = torch::empty({e.storage_numel}, *scalar);
        if (rec_size > 0) std::memcpy(s.data_ptr(), rec.get(), rec_size);
        it = storages.emplace(e.storage_key, s).first;
      }
      // The view must lie inside the storage: offset + sum((size-1)*stride) < numel.
      std::int64_t last = e.offset;
      bool empty = false;
      for (std::size_t d = 0; d < e.size.size(); ++d) {
        if (e.size[d] == 0) empty = true;
        if (e.size[d] < 0 || e.stride[d] < 0)
          fail(path, "tensor '" + e.name + "' has a negative size or stride", kCorruptFix);
        last += (e.size[d] - 1) * e.stride[d];
      }
      if (e.offset < 0 || (!empty && last >= e.storage_numel)) {
        fail(path, "tensor '" + e.name + "' reaches past its storage", kCorruptFix);
      }
      // clone(): entries may be views of one shared storage (tied weights); ours are independent.
      out.emplace(e.name, it->second.as_strided(e.size, e.stride, e.offset).clone(at::MemoryFormat::Contiguous));
    }
  } catch (const c10::Error& e) {
    fail(path, "cannot read the torch.save archive (" + first_line(e.what_without_backtrace()) + ")", kCorruptFix);
  }
  return out;
}

namespace {

void write_hdf5_here(const std::string& path, const TensorMap& tensors,
                     const std::map<std::string, std::string>& attrs) {
  // The file is built in memory (HDF5's core driver, no backing store) and its image written by the one
  // atomic file writer: HDF5 never touches the disk, so a disk that fills mid-write gives that writer's
  // one-line error and no .tmp left, instead of an HDF5 library left half-flushed (it crashed at exit).
  // The cost: the image is held in memory once more while it is written. (The writer also checks the path
  // and makes its folder, and removes that folder again if the write fails.)
  std::vector<char> image;
  try {
    H5::Exception::dontPrint();
    H5::FileAccPropList fapl;
    fapl.setCore(1 << 20, false);
    H5::H5File file(path, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, fapl);
    H5::LinkCreatPropList lcpl;
    lcpl.setCreateIntermediateGroup(true);  // a '/' in a key makes groups
    for (const auto& [name, tensor] : tensors) {
      if (name.empty() || name.front() == '/' || name.back() == '/') {
        fail(path, "tensor key '" + name + "' is not a valid HDF5 dataset name",
             "use a non-empty key without leading or trailing '/'");
      }
      const bool integral = !tensor.is_floating_point();
      const auto t = tensor.to(torch::kCPU, integral ? torch::kInt64 : torch::kFloat32).contiguous();
      std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
      const H5::DataSpace space =
          dims.empty() ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(static_cast<int>(dims.size()), dims.data());
      const H5::PredType& file_type = integral ? H5::PredType::STD_I64LE : H5::PredType::IEEE_F32LE;
      const H5::PredType& mem_type = integral ? H5::PredType::NATIVE_INT64 : H5::PredType::NATIVE_FLOAT;
      auto ds = file.createDataSet(name, file_type, space, H5::DSetCreatPropList::DEFAULT, H5::DSetAccPropList::DEFAULT,
                                   lcpl);
      if (t.numel() > 0) ds.write(t.data_ptr(), mem_type);
    }
    const H5::StrType str_type(H5::PredType::C_S1, H5T_VARIABLE);
    for (const auto& [key, value] : attrs) {
      file.openGroup("/").createAttribute(key, str_type, H5::DataSpace(H5S_SCALAR)).write(str_type, value);
    }
    file.flush(H5F_SCOPE_GLOBAL);
    const ssize_t size = H5Fget_file_image(file.getId(), nullptr, 0);
    if (size <= 0 || (image.resize(static_cast<size_t>(size)),
                      H5Fget_file_image(file.getId(), image.data(), image.size()) != size))
      fail(path, "HDF5 could not hand over the file it built in memory", "check the tensors are not too large for memory");
    file.close();
  } catch (const H5::Exception& e) {
    fail(path, "HDF5 write failed in " + e.getFuncName() + " (" + first_line(e.getDetailMsg()) + ")",
         "check the tensors and keys written");
  }
  write_file_atomic(path, image.data(), image.size());
}
}  // namespace

namespace {

void read_group(const std::string& path, const H5::Group& group, const std::string& prefix, TensorMap& out) {
  for (hsize_t i = 0; i < group.getNumObjs(); ++i) {
    const std::string name = group.getObjnameByIdx(i);
    const std::string key = prefix.empty() ? name : prefix + "/" + name;
    const H5O_type_t type = group.childObjType(name);
    if (type == H5O_TYPE_GROUP) {
      read_group(path, group.openGroup(name), key, out);
      continue;
    }
    if (type != H5O_TYPE_DATASET) continue;  // named datatypes carry no tensor
    const auto ds = group.openDataSet(name);
    const auto space = ds.getSpace();
    std::vector<hsize_t> dims(static_cast<std::size_t>(space.getSimpleExtentNdims()));
    if (!dims.empty()) space.getSimpleExtentDims(dims.data());
    const auto cls = ds.getTypeClass();
    if (cls == H5T_STRING) continue;  // text rides along (read_hdf5_strings); not a tensor
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
      fail(path, "dataset '" + key + "' is not numeric", "store tensors as float or integer datasets");
    }
    const bool integral = cls == H5T_INTEGER;
    std::vector<std::int64_t> shape(dims.begin(), dims.end());
    auto t = torch::empty(shape, integral ? torch::kInt64 : torch::kFloat32);
    if (t.numel() > 0) {
      ds.read(t.data_ptr(), integral ? H5::PredType::NATIVE_INT64 : H5::PredType::NATIVE_FLOAT);
    }
    out.emplace(key, std::move(t));
  }
}

}  // namespace

TensorMap read_hdf5(const std::string& path) {
  TensorMap out;
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_RDONLY);
    read_group(path, file.openGroup("/"), "", out);
  } catch (const H5::Exception& e) {
    fail(path, "HDF5 read failed in " + e.getFuncName() + " (" + first_line(e.getDetailMsg()) + ")",
         "check the path and that it is an HDF5 file written by headprune");
  }
  return out;
}

std::map<std::string, std::string> read_hdf5_attrs(const std::string& path) {
  std::map<std::string, std::string> out;
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_RDONLY);
    const auto root = file.openGroup("/");
    for (int i = 0; i < root.getNumAttrs(); ++i) {
      const auto attr = root.openAttribute(static_cast<unsigned>(i));
      if (attr.getTypeClass() != H5T_STRING) continue;
      std::string value;
      attr.read(attr.getStrType(), value);
      out[attr.getName()] = value;
    }
  } catch (const H5::Exception& e) {
    fail(path, "HDF5 read failed in " + e.getFuncName() + " (" + first_line(e.getDetailMsg()) + ")",
         "check the path and that it is an HDF5 file");
  }
  return out;
}

std::vector<std::string> read_hdf5_strings(const std::string& path, const std::string& dataset) {
  std::vector<std::string> out;
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_RDONLY);
    const auto ds = file.openDataSet(dataset);
    if (ds.getTypeClass() != H5T_STRING)
      fail(path, "dataset '" + dataset + "' does not hold strings", "read it with read_hdf5");
    const auto space = ds.getSpace();
    hsize_t n = 0;
    space.getSimpleExtentDims(&n);
    std::vector<char*> raw(n, nullptr);
    H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
    type.setCset(ds.getStrType().getCset());  // h5py writes UTF-8; HDF5 will not convert charsets
    ds.read(raw.data(), type);
    for (char* s : raw) out.emplace_back(s ? s : "");
    H5Dvlen_reclaim(type.getId(), space.getId(), H5P_DEFAULT, raw.data());
  } catch (const H5::Exception& e) {
    fail(path,
         "HDF5 read of '" + dataset + "' failed in " + e.getFuncName() + " (" + first_line(e.getDetailMsg()) + ")",
         "check the dataset name");
  }
  return out;
}

}  // namespace hp::core
