// cpuid and HEADPRUNE_MAX_ISA (see core/kernels/isa.h).
#include "core/kernels/isa.h"

#include <algorithm>
#include <cpuid.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/base/errors.h"  // ConfigError

namespace hp::core::isa {

namespace {

constexpr std::array<const char*, 7> kNames = {"scalar",      "avx2",        "avx_vnni", "avx512",
                                               "avx512_vnni", "avx512_bf16", "amx"};

// The CPU's features from cpuid itself (GCC's and clang's __builtin_cpu_supports know different subsets of
// these names), each instruction set counted only when the OS saves its registers (XCR0).
struct Features {
  bool avx2 = false, avx512 = false, avx_vnni = false, avx512_vnni = false, avx512_bf16 = false, amx = false;
};

uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

Features read_features() {
  Features f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d)) return f;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr = xcr0();
  const bool ymm_state = (xcr & 0x6) == 0x6, zmm_state = (xcr & 0xE6) == 0xE6, tile_state = (xcr & 0x60000) == 0x60000;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const uint32_t b7 = b, c7 = c, d7 = d;
  unsigned a71 = 0;
  if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) a71 = a;
  f.avx2 = ymm_state && fma && f16c && (b7 & (1u << 5));
  // AVX-512 F, DQ, BW, VL (oneDNN's avx512_core).
  f.avx512 = f.avx2 && zmm_state && (b7 & (1u << 16)) && (b7 & (1u << 17)) && (b7 & (1u << 30)) && (b7 & (1u << 31));
  f.avx_vnni = f.avx2 && (a71 & (1u << 4));
  f.avx512_vnni = f.avx512 && (c7 & (1u << 11));
  f.avx512_bf16 = f.avx512_vnni && (a71 & (1u << 5));
  // AMX-BF16, AMX-TILE, AMX-INT8, and the OS saving the tile state.
  f.amx = f.avx512_bf16 && tile_state && (d7 & (1u << 22)) && (d7 & (1u << 24)) && (d7 & (1u << 25));
  return f;
}

bool cpu_has_uncached(Level l) {
  static const Features f = read_features();
  switch (l) {
    case Level::kScalar: return true;
    case Level::kAvx2: return f.avx2;
    case Level::kAvxVnni: return f.avx_vnni;
    case Level::kAvx512: return f.avx512;
    case Level::kAvx512Vnni: return f.avx512_vnni;
    case Level::kAvx512Bf16: return f.avx512_bf16;
    case Level::kAmx: return f.amx;
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

// HEADPRUNE_MAX_ISA's level (or the CPU's), read once: the ceiling of every later cap, since oneDNN was capped there
// when it started (core/kernels/lowp_gemm.cpp) and cannot be raised again.
Level ceiling() {
  static const Level c = initial_cap();
  return c;
}

std::atomic<int>& cap_storage() {
  static std::atomic<int> c{static_cast<int>(ceiling())};
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

void set_cap(Level l) { cap_storage().store(static_cast<int>(std::min(l, ceiling())), std::memory_order_relaxed); }

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

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
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
