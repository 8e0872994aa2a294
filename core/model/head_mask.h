// Mask specs: the text form users and runs exchange, "2:0,3;5:11" = mask heads 0 and 3 of layer 2 and
// head 11 of layer 5 (0-based). Groups "fL:…" mask FFN intermediate neurons of layer L, with ranges:
// "f2:0-511,600" masks neurons 0..511 and 600 of layer 2 (ranges "a-b" work for heads too). A spec may also
// be a file holding such text (one group per line or ';'-separated, '#' comments). Torch-free; the model
// applies the masks as [L, H] and [L, I] tensors of gates (core/model/bert.h).
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// keep[l][h] == false for masked heads.
using HeadSet = std::vector<std::vector<bool>>;
// keep[l][i] == false for masked FFN intermediate neurons.
using NeuronSet = std::vector<std::vector<bool>>;

// Parses `spec` (text, or a path to a file holding it) for a model of `layers` × `heads`.
// Empty spec = nothing masked. Bad syntax, out-of-range indices or an "fL:" group (neurons, where only heads
// are taken) → ConfigError naming `where`.
HeadSet parse_head_mask(const std::string& spec, int layers, int heads, const std::string& where = "--mask");

// The spec text for the masked heads of `keep` ("" when none is masked).
std::string format_head_mask(const HeadSet& keep);

int count_kept(const HeadSet& keep);

// The cost of one head and of one FFN neuron in a budget's unit (FLOPs or parameters: eval/flops.h), which is
// additive over the units kept.
struct UnitCosts {
  double head = 0, neuron = 0;
};

// Heads and FFN neurons kept by a spec with "fL:" groups.
struct StructureMask {
  HeadSet heads;
  NeuronSet neurons;
};

// Parses `spec` for a model of `layers` × `heads` heads and `neurons` FFN neurons per layer. Bad syntax or
// out-of-range indices → ConfigError naming `where`.
StructureMask parse_mask(const std::string& spec, int layers, int heads, int neurons,
                         const std::string& where = "--mask");

// The budget a structure spends: kept heads × costs.head + kept neurons × costs.neuron.
double structure_cost(const StructureMask& keep, const UnitCosts& costs);

// The spec text of both (head groups, then "fL:" groups with ranges; "" when nothing is masked).
std::string format_mask(const StructureMask& mask);

}  // namespace hp::core
