// Head mask specs: the text form users and runs exchange, "2:0,3;5:11" = mask heads 0 and 3 of
// layer 2 and head 11 of layer 5 (0-based). A spec may also be a file holding such text (one
// "layer:heads" group per line or ';'-separated, '#' comments). Torch-free; the model applies the
// mask as a [L, H] tensor of gates (core/model/bert.h).
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// keep[l][h] == false for masked heads.
using HeadSet = std::vector<std::vector<bool>>;

// Parses `spec` (text, or a path to a file holding it) for a model of `layers` × `heads`.
// Empty spec = nothing masked. Bad syntax or out-of-range indices → ConfigError naming `where`.
HeadSet parse_head_mask(const std::string& spec, int layers, int heads, const std::string& where = "--mask");

// The spec text for the masked heads of `keep` ("" when none is masked).
std::string format_head_mask(const HeadSet& keep);

int count_kept(const HeadSet& keep);

}  // namespace hp::core
