// What every mask-tuning test checks of its result: folded into the weights, the 0/1 masks of the choice give
// what masking with the scales gives, the slimmed model too (≤ 1e-5), and the tuned student is closer to the
// unpruned model's logits than the untuned choice on the sample it was fitted to.
#pragma once

#include <catch2/catch.hpp>
#include <torch/utils.h>

#include "eval/evaluator.h"
#include "prune/search/mask_tuning.h"
#include "prune/export/slim.h"

namespace hp::test {

// `in`: the sample's batch, no masks. Returns the slimmed model.
inline core::Bert check_tuned(const core::Bert& model, const prune::StructureKeep& keep,
                              const prune::MaskScales& scales, const core::EncoderInput& in) {
  torch::NoGradGuard no_grad;
  auto masked_in = in;
  masked_in.head_mask = eval::head_mask_tensor(keep.heads);
  masked_in.neuron_mask = eval::neuron_mask_tensor(keep.neurons);
  masked_in.layer_mask = eval::layer_mask_tensor(keep.layers);
  masked_in.hidden_mask = eval::hidden_mask_tensor(keep.hidden);
  auto scaled_in = masked_in;
  scaled_in.head_mask = scales.heads, scaled_in.neuron_mask = scales.neurons;
  const auto scaled = model.forward(scaled_in).logits;
  const auto folded = prune::fold_scales(model, scales);
  CHECK((folded.forward(masked_in).logits - scaled).abs().max().item<double>() <= 1e-5);
  core::Bert slim = prune::slim_model(folded, keep);
  CHECK((slim.forward(in).logits - scaled).abs().max().item<double>() <= 1e-5);
  const auto teacher = model.forward(in).logits;
  const double tuned = (scaled - teacher).pow(2).mean().item<double>();
  const double untuned = (model.forward(masked_in).logits - teacher).pow(2).mean().item<double>();
  INFO("logit MSE untuned " << untuned << ", tuned " << tuned);
  CHECK(tuned < untuned);
  return slim;
}

}  // namespace hp::test
