// Parsing and printing head mask specs (see core/model/head_mask.h).
#include "core/model/head_mask.h"

#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "core/base/errors.h"  // ConfigError

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
  if (t.empty() || used != t.size())
    throw ConfigError(where + ": '" + group + "': " + what + " '" + t +
                      "' is not a number; write layer:head,head;… e.g. \"2:0,3;5:11\"");
  if (v < 0 || v >= limit)
    throw ConfigError(where + ": '" + group + "': " + what + " " + t + " is out of range; the model has " +
                      std::to_string(limit) + " " + what + "s (0.." + std::to_string(limit - 1) + ")");
  return v;
}

}  // namespace

HeadSet parse_head_mask(const std::string& spec_in, int layers, int heads, const std::string& where_in) {
  HeadSet keep(layers, std::vector<bool>(heads, true));
  std::string spec = spec_in, where = where_in;
  struct stat st {};
  if (!spec.empty() && spec.find(':') == std::string::npos && stat(spec.c_str(), &st) != 0)
    throw ConfigError(where + ": '" + spec +
                      "' is neither a mask spec (layer:heads) nor a readable file; e.g. \"2:0,3;5:11\"");
  if (!spec.empty() && stat(spec.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    std::ifstream in(spec);
    std::ostringstream text;
    std::string line;
    while (std::getline(in, line)) text << line.substr(0, line.find('#')) << ';';
    where = spec;
    spec = text.str();
  }
  std::stringstream groups(spec);
  std::string group;
  while (std::getline(groups, group, ';')) {
    group = strip(group);
    if (group.empty()) continue;
    size_t colon = group.find(':');
    if (colon == std::string::npos)
      throw ConfigError(where + ": '" + group + "' has no ':'; write layer:head,head e.g. \"2:0,3\"");
    int l = parse_index(group.substr(0, colon), layers, "layer", where, group);
    std::stringstream hs(group.substr(colon + 1));
    std::string h;
    while (std::getline(hs, h, ',')) {
      if (strip(h).empty()) continue;
      keep[l][parse_index(h, heads, "head", where, group)] = false;
    }
  }
  return keep;
}

std::string format_head_mask(const HeadSet& keep) {
  std::string out;
  for (size_t l = 0; l < keep.size(); ++l) {
    std::string heads;
    for (size_t h = 0; h < keep[l].size(); ++h)
      if (!keep[l][h]) heads += (heads.empty() ? "" : ",") + std::to_string(h);
    if (!heads.empty()) out += (out.empty() ? "" : ";") + std::to_string(l) + ":" + heads;
  }
  return out;
}

int count_kept(const HeadSet& keep) {
  int n = 0;
  for (const auto& row : keep)
    for (bool k : row) n += k;
  return n;
}

}  // namespace hp::core
