// cpuid and HEADPRUNE_MAX_ISA (see core/kernels/isa.h).
#include "core/kernels/isa.h"

#include <array>
#include <atomic>
#include <cstdlib>

#include "core/base/errors.h"  // ConfigError

namespace hp::core::isa {

namespace {

constexpr std::array<const char*, 7> kNames = {"scalar",      "avx2",        "avx_vnni", "avx512",
                                               "avx512_vnni", "avx512_bf16", "amx"};

bool cpu_has_uncached(Level l) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  switch (l) {
    case Level::kScalar: return true;
    case Level::kAvx2: return avx2;
    case Level::kAvxVnni: return avx2 && __builtin_cpu_supports("avxvnni");
    case Level::kAvx512: return avx512;
    case Level::kAvx512Vnni: return avx512 && __builtin_cpu_supports("avx512vnni");
    case Level::kAvx512Bf16:
      return avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
    case Level::kAmx:
      return avx512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16") &&
             __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
             __builtin_cpu_supports("amx-bf16");
  }
  return false;
}

Level initial_cap() {
  const char* env = std::getenv("HEADPRUNE_MAX_ISA");
  if (!env || !*env) return cpu_level();
  Level l;
  if (!parse(env, &l))
    throw ConfigError(std::string("HEADPRUNE_MAX_ISA = '") + env + "' is not an instruction-set level; use one of " +
                      all_names() + " (or unset it for everything this CPU has)");
  return l;
}

std::atomic<int>& cap_storage() {
  static std::atomic<int> c{static_cast<int>(initial_cap())};
  return c;
}

}  // namespace

const char* name(Level l) { return kNames[static_cast<size_t>(l)]; }

bool parse(const std::string& text, Level* out) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (text == kNames[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  return false;
}

std::string all_names() {
  std::string s;
  for (const char* n : kNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

bool cpu_has(Level l) {
  static const std::array<bool, kNames.size()> has = [] {
    std::array<bool, kNames.size()> h{};
    for (size_t i = 0; i < h.size(); ++i) h[i] = cpu_has_uncached(static_cast<Level>(i));
    return h;
  }();
  return has[static_cast<size_t>(l)];
}

Level cpu_level() {
  Level best = Level::kScalar;
  for (size_t i = 0; i < kNames.size(); ++i)
    if (cpu_has(static_cast<Level>(i))) best = static_cast<Level>(i);
  return best;
}

Level cap() { return static_cast<Level>(cap_storage().load(std::memory_order_relaxed)); }

bool cap_from_environment() {
  const char* env = std::getenv("HEADPRUNE_MAX_ISA");
  return env && *env;
}

void set_cap(Level l) { cap_storage().store(static_cast<int>(l), std::memory_order_relaxed); }

Level vector_path() {
  if (usable(Level::kAvx512)) return Level::kAvx512;
  if (usable(Level::kAvx2)) return Level::kAvx2;
  return Level::kScalar;
}

std::vector<Level> vector_paths() {
  std::vector<Level> paths;
  for (Level l : {Level::kScalar, Level::kAvx2, Level::kAvx512})
    if (cpu_has(l)) paths.push_back(l);
  return paths;
}

std::string summary() {
  std::string s = std::string("ISA: CPU ") + name(cpu_level());
  if (cpu_level() != Level::kAmx) {
    std::string missing;
    for (Level l : {Level::kAvx2, Level::kAvxVnni, Level::kAvx512, Level::kAvx512Vnni, Level::kAvx512Bf16, Level::kAmx})
      if (!cpu_has(l)) missing += (missing.empty() ? "" : ", ") + std::string(name(l));
    s += " (has none of " + missing + ")";
  }
  s += std::string(", cap ") + name(cap()) + (cap_from_environment() ? " (HEADPRUNE_MAX_ISA)" : " (none set)");
  s += std::string(" | SIMD passes ") + name(vector_path());
  return s;
}

}  // namespace hp::core::isa
