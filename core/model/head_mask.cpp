// Parsing and printing head mask specs (see core/model/head_mask.h).
#include "core/model/head_mask.h"

#include <fstream>
#include <sstream>
#include <utility>
#include <sys/stat.h>

#include "core/base/errors.h"  // ConfigError
#include "core/base/log.h"     // log_warn

namespace hp::core {
namespace {

std::string strip(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

int parse_index(const std::string& text, int limit, const char* what, const std::string& where,
                const std::string& group) {
  std::string t = strip(text);
  size_t used = 0;
  int v = -1;
  try {
    v = std::stoi(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // All digits but past int: a number, out of range (not "not a number").
  const bool digits = !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
  if (digits && used == 0) used = t.size(), v = limit;
  if (t.empty() || used != t.size())
    throw ConfigError(where + ": '" + group + "': " + what + " '" + t +
                      "' is not a number; write layer:head,head;… e.g. \"2:0,3;5:11\"");
  if (v < 0 || v >= limit)
    throw ConfigError(where + ": '" + group + "': " + what + " " + t + " is out of range; the model has " +
                      std::to_string(limit) + " " + what + "s (0.." + std::to_string(limit - 1) + ")");
  return v;
}

// Marks the units an entry names ("7" or a range "0-511") as masked in `row`.
void mask_entry(const std::string& entry, std::vector<bool>& row, const char* what, const std::string& where,
                const std::string& group) {
  const std::string e = strip(entry);
  const size_t dash = e.find('-', 1);
  const int limit = static_cast<int>(row.size());
  const int lo = parse_index(dash == std::string::npos ? e : e.substr(0, dash), limit, what, where, group);
  const int hi = dash == std::string::npos ? lo : parse_index(e.substr(dash + 1), limit, what, where, group);
  if (hi < lo) throw ConfigError(where + ": '" + group + "': the range " + e + " is empty; write low-high, e.g. 0-511");
  for (int u = lo; u <= hi; ++u) row[u] = false;
}

// The spec's text: itself, or the groups of the file it names.
std::pair<std::string, std::string> spec_text(const std::string& spec, const std::string& where) {
  struct stat st {};
  if (!spec.empty() && spec.find(':') == std::string::npos && stat(spec.c_str(), &st) != 0)
    throw ConfigError(where + ": '" + spec +
                      "' is neither a mask spec (layer:heads) nor a readable file; e.g. \"2:0,3;5:11\"");
  if (spec.empty() || stat(spec.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {spec, where};
  std::ifstream in(spec);
  std::ostringstream text;
  std::string line;
  while (std::getline(in, line)) text << line.substr(0, line.find('#')) << ';';
  return {text.str(), spec};
}

}  // namespace

StructureMask parse_mask(const std::string& spec_in, int layers, int heads, int neurons, const std::string& where_in,
                         int hidden) {
  StructureMask m{HeadSet(layers, std::vector<bool>(heads, true)), NeuronSet(layers, std::vector<bool>(neurons, true)),
                  {}};
  std::vector<bool> kept_layers(layers, true), kept_hidden(static_cast<size_t>(hidden), true);
  const auto [spec, where] = spec_text(spec_in, where_in);
  std::stringstream groups(spec);
  std::string group;
  int groups_read = 0;
  while (std::getline(groups, group, ';')) {
    group = strip(group);
    if (group.empty()) continue;
    size_t colon = group.find(':');
    if (colon == std::string::npos)
      throw ConfigError(where + ": '" + group + "' has no ':'; write layer:head,head e.g. \"2:0,3\"");
    const bool whole = strip(group.substr(0, colon)) == "layers";
    const bool channels = strip(group.substr(0, colon)) == "hidden";
    const bool ffn = !whole && !channels && group[0] == 'f';
    if (ffn && neurons == 0)
      throw ConfigError(where + ": '" + group + "' masks FFN neurons; this takes head groups only (layer:heads)");
    if (channels && hidden == 0)
      throw ConfigError(where + ": '" + group + "' removes hidden channels; this takes " +
                        (neurons == 0 ? "head groups only (layer:heads)" : "heads, neurons and layers only"));
    const int l = whole || channels ? -1
                                    : parse_index(group.substr(ffn ? 1 : 0, colon - (ffn ? 1 : 0)), layers, "layer",
                                                  where, group);
    std::vector<bool>& row = whole ? kept_layers : channels ? kept_hidden : ffn ? m.neurons[l] : m.heads[l];
    const char* unit = whole ? "layer" : channels ? "hidden channel" : ffn ? "neuron" : "head";
    std::stringstream entries(group.substr(colon + 1));
    std::string entry;
    int named = 0;
    while (std::getline(entries, entry, ',')) {
      if (strip(entry).empty()) continue;
      mask_entry(entry, row, unit, where, group);
      ++named;
    }
    if (named == 0)
      throw ConfigError(where + ": '" + group + "' names no " + unit + "s after the ':'; write " +
                        (whole ? "layers:1,3" : channels ? "hidden:0-63" : ffn ? "f2:0-511" : "2:0,3") +
                        (whole      ? ", or leave the group out to keep every layer"
                         : channels ? ", or leave the group out to keep every channel"
                                    : ", or leave the group out to keep the whole layer"));
    ++groups_read;
  }
  if (count_kept_layers(kept_layers, layers) < layers) {
    if (count_kept_layers(kept_layers, layers) == 0)
      throw ConfigError(where + ": the \"layers:\" group removes all " + std::to_string(layers) +
                        " layers; keep at least one");
    for (int l = 0; l < layers; ++l)
      if (!kept_layers[l]) m.heads[l].assign(heads, false), m.neurons[l].assign(neurons, false);
    m.layers = std::move(kept_layers);
  }
  if (count_kept({kept_hidden}) < hidden) {
    if (count_kept({kept_hidden}) == 0)
      throw ConfigError(where + ": the \"hidden:\" group removes all " + std::to_string(hidden) +
                        " hidden channels; keep at least one");
    m.hidden = std::move(kept_hidden);
  }
  // An empty file is what a gates run that kept every head writes (head_mask.txt): accepted, and said.
  if (groups_read == 0 && where != where_in)
    log_warn("mask", where + ": the mask file names no heads or neurons (empty, or only comments), so every head " +
                         std::string(neurons > 0 ? "and neuron " : "") + "is kept");
  return m;
}

namespace {

// "0-511,600" for the false entries of `row` ("" when none).
std::string masked_ranges(const std::vector<bool>& row) {
  std::string ranges;
  for (size_t i = 0; i < row.size(); ++i) {
    if (row[i]) continue;
    size_t j = i;
    while (j + 1 < row.size() && !row[j + 1]) ++j;
    ranges += (ranges.empty() ? "" : ",") + std::to_string(i) + (j > i ? "-" + std::to_string(j) : "");
    i = j;
  }
  return ranges;
}

}  // namespace

std::string format_mask(const StructureMask& mask) {
  std::string out;
  for (size_t l = 0; l < mask.heads.size(); ++l) {
    if (!layer_kept(mask.layers, l)) continue;
    std::string heads;
    for (size_t h = 0; h < mask.heads[l].size(); ++h)
      if (!mask.heads[l][h]) heads += (heads.empty() ? "" : ",") + std::to_string(h);
    if (!heads.empty()) out += (out.empty() ? "" : ";") + std::to_string(l) + ":" + heads;
  }
  for (size_t l = 0; l < mask.neurons.size(); ++l) {
    const std::string ranges = layer_kept(mask.layers, l) ? masked_ranges(mask.neurons[l]) : "";
    if (!ranges.empty()) out += (out.empty() ? "" : ";") + ("f" + std::to_string(l)) + ":" + ranges;
  }
  if (const std::string ranges = masked_ranges(mask.layers); !ranges.empty())
    out += (out.empty() ? "" : ";") + ("layers:" + ranges);
  if (const std::string ranges = masked_ranges(mask.hidden); !ranges.empty())
    out += (out.empty() ? "" : ";") + ("hidden:" + ranges);
  return out;
}

std::string describe_counts(const StructureMask& keep) {
  std::string what = "heads per layer";
  for (const auto& row : keep.heads) what += " " + std::to_string(count_kept({row}));
  what += ", FFN widths";
  for (const auto& row : keep.neurons) what += " " + std::to_string(count_kept({row}));
  if (!keep.layers.empty()) what += ", " + format_mask({{}, {}, keep.layers});  // "layers:1,4" removed
  if (!keep.hidden.empty())
    what += ", " + std::to_string(count_kept({keep.hidden})) + "/" + std::to_string(keep.hidden.size()) +
            " hidden channels";
  return what;
}

HeadSet parse_head_mask(const std::string& spec_in, int layers, int heads, const std::string& where_in) {
  StructureMask m = parse_mask(spec_in, layers, heads, 0, where_in);
  if (!m.layers.empty())
    throw ConfigError(where_in + ": '" + spec_in + "' removes whole layers (\"layers:\"); this takes head groups only "
                      "(layer:heads)");
  return m.heads;
}

std::string format_head_mask(const HeadSet& keep) { return format_mask({keep, {}, {}}); }

int count_kept_layers(const std::vector<bool>& layers, int total) {
  if (layers.empty()) return total;
  int n = 0;
  for (bool k : layers) n += k;
  return n;
}

int count_kept(const HeadSet& keep) {
  int n = 0;
  for (const auto& row : keep)
    for (bool k : row) n += k;
  return n;
}

double hidden_fraction(const std::vector<bool>& hidden) {
  return hidden.empty() ? 1.0 : static_cast<double>(count_kept({hidden})) / static_cast<double>(hidden.size());
}

double structure_cost(const StructureMask& keep, const UnitCosts& full) {
  const UnitCosts costs = full.at_hidden(hidden_fraction(keep.hidden));
  double cost = 0;
  for (size_t l = 0; l < keep.heads.size(); ++l)
    if (layer_kept(keep.layers, l))
      cost += costs.head * count_kept({keep.heads[l]}) +
              (l < keep.neurons.size() ? costs.neuron * count_kept({keep.neurons[l]}) : 0.0);
  return cost;
}

}  // namespace hp::core
