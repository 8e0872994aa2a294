// core/kernels/isa.h against what is independent of it: the kernel's own CPU flags (/proc/cpuinfo) for each level's
// cpuid features, and the level names read back (#61).
#include <catch2/catch.hpp>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/kernels/isa.h"
#include "skip.h"

namespace isa = hp::core::isa;

namespace {

constexpr isa::Level kLevels[] = {isa::Level::kScalar,     isa::Level::kAvx2,       isa::Level::kAvxVnni,
                                  isa::Level::kAvx512,     isa::Level::kAvx512Vnni, isa::Level::kAvx512Bf16,
                                  isa::Level::kAmx};

// The flags of the first processor in /proc/cpuinfo (the kernel clears those whose registers the OS does not save).
std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::set<std::string> flags;
      for (std::string w; words >> w;) flags.insert(w);
      return flags;
    }
  return {};
}

}  // namespace

TEST_CASE("isa: each level's name reads back as the level; other text is no level", "[isa]") {
  std::string all;
  for (const auto l : kLevels) {
    isa::Level back = isa::Level::kScalar;
    INFO(isa::name(l));
    CHECK(isa::parse(isa::name(l), &back));
    CHECK(back == l);
    all += (all.empty() ? "" : ", ") + std::string(isa::name(l));
  }
  CHECK(isa::all_names() == all);
  isa::Level unused;
  for (const char* bad : {"", "AVX2", "avx", "avx512f", "sse4"}) CHECK_FALSE(isa::parse(bad, &unused));
}

TEST_CASE("isa: each level's cpuid features agree with the kernel's CPU flags (/proc/cpuinfo)", "[isa]") {
  const auto f = cpu_flags();
  if (f.empty()) return hp::test::skip("no flags line in /proc/cpuinfo");
  auto all = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (!f.count(n)) return false;
    return true;
  };
  const bool avx2 = all({"avx", "avx2", "fma", "f16c"});
  const bool avx512 = avx2 && all({"avx512f", "avx512dq", "avx512bw", "avx512vl"});
  const bool avx512_vnni = avx512 && all({"avx512_vnni"});
  const bool avx512_bf16 = avx512_vnni && all({"avx512_bf16"});
  CHECK(isa::cpu_has(isa::Level::kScalar));
  CHECK(isa::cpu_has(isa::Level::kAvx2) == avx2);
  CHECK(isa::cpu_has(isa::Level::kAvxVnni) == (avx2 && all({"avx_vnni"})));
  CHECK(isa::cpu_has(isa::Level::kAvx512) == avx512);
  CHECK(isa::cpu_has(isa::Level::kAvx512Vnni) == avx512_vnni);
  CHECK(isa::cpu_has(isa::Level::kAvx512Bf16) == avx512_bf16);
  CHECK(isa::cpu_has(isa::Level::kAmx) == (avx512_bf16 && all({"amx_tile", "amx_int8", "amx_bf16"})));
}
