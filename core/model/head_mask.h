// Mask specs: the text form users and runs exchange, "2:0,3;5:11" = mask heads 0 and 3 of layer 2 and
// head 11 of layer 5 (0-based). Groups "fL:…" mask FFN intermediate neurons of layer L, with ranges:
// "f2:0-511,600" masks neurons 0..511 and 600 of layer 2 (ranges "a-b" work for heads too). The group
// "layers:…" removes whole layers: "layers:1,3-4" makes layers 1, 3 and 4 the identity (both sublayers and
// their LayerNorms skipped), which the export then drops, numbering the rest 0, 1, …. A spec may also
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
// Empty spec = nothing masked. Bad syntax, out-of-range indices or an "fL:" or "layers:" group (where only
// heads are taken) → ConfigError naming `where`.
HeadSet parse_head_mask(const std::string& spec, int layers, int heads, const std::string& where = "--mask");

// The spec text for the masked heads of `keep` ("" when none is masked).
std::string format_head_mask(const HeadSet& keep);

int count_kept(const HeadSet& keep);

// The cost of one head and of one FFN neuron in a budget's unit (FLOPs or parameters: eval/flops.h), which is
// additive over the units kept.
struct UnitCosts {
  double head = 0, neuron = 0;
};

// Heads, FFN neurons and layers kept by a spec with "fL:" and "layers:" groups. A removed layer's heads and
// neurons are removed with it (parse_mask clears them).
struct StructureMask {
  HeadSet heads;
  NeuronSet neurons;
  std::vector<bool> layers = {};  // keep[l]; empty = every layer kept
};

// Layer l is kept (an empty list keeps every layer).
inline bool layer_kept(const std::vector<bool>& layers, size_t l) { return layers.empty() || layers.at(l); }
int count_kept_layers(const std::vector<bool>& layers, int total);

// Parses `spec` for a model of `layers` × `heads` heads and `neurons` FFN neurons per layer. Bad syntax or
// out-of-range indices, or removing every layer → ConfigError naming `where`. `layers` of the result is empty
// unless the spec removes a layer.
StructureMask parse_mask(const std::string& spec, int layers, int heads, int neurons,
                         const std::string& where = "--mask");

// The budget a structure spends: kept heads × costs.head + kept neurons × costs.neuron (units of removed layers
// are not counted).
double structure_cost(const StructureMask& keep, const UnitCosts& costs);

// The spec text of all three (head groups, then "fL:" groups with ranges, then "layers:" with ranges; "" when
// nothing is masked). The heads and neurons of a removed layer are not listed: "layers:" removes them.
std::string format_mask(const StructureMask& mask);

}  // namespace hp::core
