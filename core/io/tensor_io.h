// Tensor files as TensorMap (name -> CPU tensor): safetensors, Hugging Face pytorch_model.bin
// (torch.save zip format) and an HDF5 export. Raw safetensors parsing: core/io/safetensors.h.
// Which checkpoint keys mean what: core/model/bert_keys.h.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

namespace hp::core {

// Sorted by key, so iteration (and everything written from it) is deterministic.
using TensorMap = std::map<std::string, torch::Tensor>;

// Reads every tensor of a .safetensors file in its stored dtype (F16/BF16 stay F16/BF16; call
// to_float32 to compute with them). Tensors are contiguous CPU copies that own their memory.
// Throws CheckpointError naming the file for any malformed file.
TensorMap read_safetensors(const std::string& path);
// The file's "__metadata__" (empty when absent); validates the whole file like read_safetensors.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

// Writes `tensors` (F64/F32/F16/BF16/I64/I32, any device/layout) atomically: path.tmp, then rename.
// The default metadata {"format": "pt"} is what HF's save_pretrained writes; {} omits it.
void write_safetensors(const std::string& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Floating tensors converted to float32; integer tensors (position_ids) returned unchanged.
TensorMap to_float32(const TensorMap& tensors);

// Reads a state dict saved by torch.save (zip format, torch >= 1.6), e.g. HF's pytorch_model.bin,
// through core/io/torch_pickle.h (LibTorch's pickle_load turns the OrderedDict into None). Tensors keep
// their stored dtype and are independent contiguous copies even where the file shares storages.
// The pickle must hold a flat dict of str -> Tensor. Legacy (pre-1.6) files throw a
// CheckpointError saying how to re-save them.
TensorMap read_torch_bin(const std::string& path);

// Writes each tensor as an HDF5 dataset named by its key, dots kept ("encoder.layer.0.x" is one
// dataset in the root group; a '/' in a key makes groups). Floating tensors are stored as float32,
// integer tensors as int64 (exact). `attrs` become string attributes of the root group. Atomic.
void write_hdf5(const std::string& path, const TensorMap& tensors,
                const std::map<std::string, std::string>& attrs = {});
// Reads every dataset (recursively; keys are paths without the leading '/') as float32 or int64.
TensorMap read_hdf5(const std::string& path);
// The string attributes of the root group.
std::map<std::string, std::string> read_hdf5_attrs(const std::string& path);
// A 1-D dataset of variable-length UTF-8 strings (e.g. the sentences stored in golden files).
std::vector<std::string> read_hdf5_strings(const std::string& path, const std::string& dataset);

}  // namespace hp::core
