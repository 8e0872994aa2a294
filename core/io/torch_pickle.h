// A minimal, torch-free unpickler for the data.pkl of a torch.save state dict (pytorch_model.bin).
// LibTorch's own torch::pickle_load turns collections.OrderedDict into None, so it cannot read HF
// state dicts; this reads only what torch.save writes for a dict of tensors and rejects the rest.
// Reading the zip and building tensors: core/io/tensor_io.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hp::core {

// One tensor of the state dict: a strided view of storage record data/<storage_key>.
struct PickledTensor {
  std::string name;  // state-dict key
  std::string storage_key;  // record name under data/
  std::string storage_type;  // "FloatStorage", "HalfStorage", "LongStorage", ...
  std::int64_t storage_numel = 0;
  std::int64_t offset = 0;  // in elements
  std::vector<std::int64_t> size;
  std::vector<std::int64_t> stride;
};

// Runs the pickle program (protocols 2-5) and returns the entries of its top-level dict in file
// order. Throws CheckpointError "<where>: ...; fix" when the pickle is corrupt or is not a flat
// dict of str -> Tensor (e.g. a whole pickled model or an optimizer state).
std::vector<PickledTensor> parse_state_dict_pickle(const std::uint8_t* data, std::size_t size,
                                                   const std::string& where);

}  // namespace hp::core
