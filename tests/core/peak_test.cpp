// core/kernels/peak.h: a rate for each product loop the CPU runs under the cap, 0 for the others, and each rate within
// what one core can do (a loop counting its operations wrong by a factor lands outside). Rates are never compared
// with each other or with a target here: that is the benchmark's (bench/lowp_gemm_bench --peak).
#include <catch2/catch.hpp>

#include <cmath>

#include "core/kernels/isa.h"
#include "core/kernels/peak.h"

namespace {

using hp::core::PeakOp;
namespace isa = hp::core::isa;

constexpr PeakOp kOps[] = {PeakOp::kFp32Fma, PeakOp::kBf16Dot, PeakOp::kInt8Dot};

// Whether the instruction of `op` is allowed on this CPU under the cap, read from the ISA levels alone.
bool expected_usable(PeakOp op) {
  switch (op) {
    case PeakOp::kFp32Fma: return isa::usable(isa::Level::kAvx2);
    case PeakOp::kBf16Dot: return isa::usable(isa::Level::kAvx512Bf16);
    case PeakOp::kInt8Dot: return isa::usable(isa::Level::kAvx512Vnni) || isa::usable(isa::Level::kAvxVnni);
  }
  return false;
}

void check_rates() {
  for (const PeakOp op : kOps) {
    INFO(hp::core::peak_op_name(op) << " under the cap " << isa::name(isa::cap()));
    REQUIRE(hp::core::peak_op_usable(op) == expected_usable(op));
    const double gops = hp::core::peak_gops(op, 1, 0.02);
    if (!expected_usable(op)) {
      CHECK(gops == 0);
      continue;
    }
    // One core: above a slow scalar loop, below 2 instructions a cycle of 512 bits at 5 GHz (int8: 128 ops each).
    CHECK(std::isfinite(gops));
    CHECK(gops > 1);
    CHECK(gops < 2 * 128 * 5.0);
  }
}

}  // namespace

TEST_CASE("peak: a rate for each instruction under the cap, 0 for the others", "[peak]") {
  for (const isa::Level level : {isa::Level::kScalar, isa::Level::kAvx2, isa::Level::kAvxVnni, isa::Level::kAvx512,
                                 isa::Level::kAvx512Vnni, isa::Level::kAvx512Bf16, isa::Level::kAmx}) {
    if (!isa::cpu_has(level)) continue;
    isa::ScopedCap cap(level);
    check_rates();
  }
  isa::ScopedCap none(isa::Level::kScalar);
  for (const PeakOp op : kOps) CHECK(hp::core::peak_gops(op, 1, 0.02) == 0);
}
