// The tests' one way to run a model on an input file: the logits of `model` on the input_ids, token_type_ids and
// attention_mask of an HDF5 file (the tiny model's inputs, or a reference written by a tools/ script).
#pragma once

#include <string>

#include <torch/utils.h>

#include "core/io/tensor_io.h"
#include "core/model/bert.h"

namespace hp::test {

inline torch::Tensor logits_on(const hp::core::Bert& model, const std::string& inputs_h5) {
  auto g = hp::core::read_hdf5(inputs_h5);
  hp::core::EncoderInput in;
  in.input_ids = g.at("input_ids");
  in.token_type_ids = g.at("token_type_ids");
  in.attention_mask = g.at("attention_mask");
  torch::NoGradGuard no_grad;
  return model.forward(in).logits;
}

}  // namespace hp::test
