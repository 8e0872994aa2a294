// Runtime BLAS check: which library serves LibTorch's sgemm_, and which OpenBLAS kernel it chose.
// Debian's LibTorch calls whatever libblas.so.3 is selected: the reference BLAS is ~80x slower than
// OpenBLAS, and OpenBLAS mis-detects some CPUs as "Prescott" (~5x slower). ensure_fast_blas() fixes
// both by re-executing once with the right environment, or throws saying what to install.
#pragma once

#include <string>

namespace hp::core {

struct BlasInfo {
  std::string library;  // file that provides sgemm_ (resolved through the dynamic linker)
  std::string name;  // "OpenBLAS", "reference BLAS", "MKL", or "unknown"
  std::string kernel;  // OpenBLAS core name, e.g. "SkylakeX"; empty otherwise
  std::string config;  // OpenBLAS build string (version, threading)
  bool slow = false;  // reference BLAS, or a generic OpenBLAS kernel on a CPU with AVX2/AVX-512
};

BlasInfo detect_blas();

// The best OpenBLAS core type this CPU supports ("SkylakeX", "Haswell", "Sandybridge"), or "" if none.
std::string best_openblas_core();

// Keeps freed memory in the process instead of returning it to the OS: glibc serves blocks over
// 32 MB with fresh mmap()s, and the page faults of re-touching them (BERT's [B, S, 4D] activations)
// cost ~10% of a forward pass. Resident memory then stays at its peak. Called by ensure_fast_blas().
void tune_allocator();

// Call first in main(). Tunes the allocator; then if the BLAS is slow and fixable, re-execs this program once with
// OPENBLAS_CORETYPE and/or LD_LIBRARY_PATH set (only to what the CPU supports); if not fixable,
// throws hp::Error telling what to install. An OPENBLAS_CORETYPE the user set is kept, generic or not (the runtime
// line says so). Set HEADPRUNE_ALLOW_SLOW_BLAS=1 to skip the check.
void ensure_fast_blas(int argc, char** argv);

}  // namespace hp::core
