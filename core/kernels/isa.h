// Which x86 instruction sets this process may use: the one place that reads cpuid and HEADPRUNE_MAX_ISA.
// Every hand-written SIMD pass (attention, epilogues, quantisation, head distances) and every precision's
// product asks here, so that a machine with a newer ISA runs (and tests) every older path:
//
//   HEADPRUNE_MAX_ISA = scalar | avx2 | avx_vnni | avx512 | avx512_vnni | avx512_bf16 | amx
//
// caps the levels in that order (oneDNN's own order: AVX-VNNI, the 256-bit VEX form of Alder Lake, sits
// between AVX2 and AVX-512). A level is usable when the CPU has all of its instructions and it is not above
// the cap; the cap is passed on to oneDNN (dnnl_set_max_cpu_isa, by core/kernels/lowp_gemm.cpp) and to
// OpenBLAS's kernel choice (core/kernels/blas.cpp). Tests and benchmarks lower the cap at run time with
// set_cap(); oneDNN keeps the one it read at start-up. Torch-free and intrinsics-free.
#pragma once

#include <string>
#include <vector>

namespace hp::core::isa {

enum class Level { kScalar, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kAvx512Bf16, kAmx };

// The HEADPRUNE_MAX_ISA spelling ("avx512_vnni"); parse() is false for anything else.
const char* name(Level l);
bool parse(const std::string& text, Level* out);
// "scalar, avx2, avx_vnni, avx512, avx512_vnni, avx512_bf16, amx": for error messages.
std::string all_names();

// The CPU has every instruction of the level (cpuid, and XCR0 saying the OS saves the level's registers; AMX
// also needs the kernel's permission for the tile data, which oneDNN asks for itself):
//   avx2: AVX2, FMA, F16C;  avx_vnni: + AVX-VNNI;  avx512: + AVX-512 F, BW, DQ, VL;  avx512_vnni: + VNNI;
//   avx512_bf16: + AVX512_BF16;  amx: + AMX-TILE, AMX-INT8, AMX-BF16.
bool cpu_has(Level l);
// The highest level the CPU has.
Level cpu_level();

// HEADPRUNE_MAX_ISA, read once (a bad value throws ConfigError naming the variable and the choices), or
// the CPU's level; lowered or restored by set_cap(), never raised above HEADPRUNE_MAX_ISA (oneDNN took that cap
// when it started: a path above it would ask oneDNN for kernels it no longer creates).
Level cap();
// Whether HEADPRUNE_MAX_ISA set the cap (for --version).
bool cap_from_environment();
void set_cap(Level l);

// The CPU has it and the cap allows it.
inline bool usable(Level l) { return cpu_has(l) && l <= cap(); }

// The path of the float32 SIMD passes: kAvx512, kAvx2 or kScalar, the highest usable.
Level vector_path();
// The paths vector_path() can take on this CPU, oldest first (tests run each).
std::vector<Level> vector_paths();

// One line for --version: "ISA: CPU avx2 (no AVX-512, no AVX-VNNI), cap avx2 (HEADPRUNE_MAX_ISA) | SIMD passes avx2".
std::string summary();

// The CPU's model name as /proc/cpuinfo gives it ("unknown CPU" without one): part of the keys of what is measured
// per machine (the dispatch probe, the latency table).
std::string cpu_model();

// While alive: the cap lowered to `l` (never raised above the CPU or HEADPRUNE_MAX_ISA); restored on exit. Tests and
// benchmarks.
class ScopedCap {
 public:
  explicit ScopedCap(Level l) : saved_(cap()) { set_cap(l); }
  ~ScopedCap() { set_cap(saved_); }
  ScopedCap(const ScopedCap&) = delete;
  ScopedCap& operator=(const ScopedCap&) = delete;

 private:
  Level saved_;
};

}  // namespace hp::core::isa
