// Mask specs: the text form users and runs exchange, "2:0,3;5:11" = mask heads 0 and 3 of layer 2 and
// head 11 of layer 5 (0-based). Groups "fL:…" mask FFN intermediate neurons of layer L, with ranges:
// "f2:0-511,600" masks neurons 0..511 and 600 of layer 2 (ranges "a-b" work for heads too). The group
// "layers:…" removes whole layers: "layers:1,3-4" makes layers 1, 3 and 4 the identity (both sublayers and
// their LayerNorms skipped), which the export then drops, numbering the rest 0, 1, …. The group "hidden:…"
// removes hidden channels (CoFi's z_hidden), shared by every layer: "hidden:0-15" zeroes channels 0..15 of the
// embeddings and of every sublayer's output, and every LayerNorm normalises over the channels kept. A spec may also
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
// additive over the units kept, and the parts of each that are proportional to the hidden width D (a head's Q, K,
// V rows and output columns; all of a neuron's weights): with D' of D hidden channels kept a head costs
// head − head_hidden · (1 − D'/D), a neuron neuron − neuron_hidden · (1 − D'/D).
struct UnitCosts {
  double head = 0, neuron = 0;
  double head_hidden = 0, neuron_hidden = 0;
  // The two costs with a fraction `kept` of the hidden channels.
  UnitCosts at_hidden(double kept) const {
    return {head - head_hidden * (1 - kept), neuron - neuron_hidden * (1 - kept), head_hidden * kept,
            neuron_hidden * kept};
  }
};

// Heads, FFN neurons and layers kept by a spec with "fL:" and "layers:" groups. A removed layer's heads and
// neurons are removed with it (parse_mask clears them).
struct StructureMask {
  HeadSet heads;
  NeuronSet neurons;
  std::vector<bool> layers = {};  // keep[l]; empty = every layer kept
  std::vector<bool> hidden = {};  // keep[c] per hidden channel; empty = every channel kept
};

// The fraction of hidden channels kept (1 for an empty list).
double hidden_fraction(const std::vector<bool>& hidden);

// Layer l is kept (an empty list keeps every layer).
inline bool layer_kept(const std::vector<bool>& layers, size_t l) { return layers.empty() || layers.at(l); }
int count_kept_layers(const std::vector<bool>& layers, int total);

// Parses `spec` for a model of `layers` × `heads` heads, `neurons` FFN neurons per layer and `hidden` channels.
// Bad syntax or out-of-range indices, removing every layer or every hidden channel, or a "hidden:" group where
// `hidden` is 0 → ConfigError naming `where`. `layers` (`hidden`) of the result is empty unless the spec removes a
// layer (a channel).
StructureMask parse_mask(const std::string& spec, int layers, int heads, int neurons,
                         const std::string& where = "--mask", int hidden = 0);

// The budget a structure spends: kept heads × costs.head + kept neurons × costs.neuron at the hidden channels kept
// (UnitCosts::at_hidden; units of removed layers are not counted).
double structure_cost(const StructureMask& keep, const UnitCosts& costs);

// The structure's counts in words, for logs (a neuron spec runs to thousands of numbers): "heads per layer 3 1, FFN
// widths 28 32", then "layers:1" when layers were removed and "26/32 hidden channels" when channels were.
std::string describe_counts(const StructureMask& keep);

// The spec text of all four (head groups, then "fL:" groups with ranges, then "layers:", then "hidden:" with
// ranges; "" when nothing is masked). The heads and neurons of a removed layer are not listed: "layers:" removes them.
std::string format_mask(const StructureMask& mask);

}  // namespace hp::core
