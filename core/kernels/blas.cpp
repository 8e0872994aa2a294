// BLAS detection and the one-time re-exec that selects a fast OpenBLAS kernel.
#include "core/kernels/blas.h"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/base/errors.h"  // Error
#include "core/kernels/isa.h"

namespace hp::core {
namespace {

// OpenBLAS picks no AVX kernels for these names.
bool is_generic_kernel(std::string k) {
  std::transform(k.begin(), k.end(), k.begin(), ::tolower);
  for (const char* g : {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "generic", "katmai",
                        "coppermine", "northwood", "banias", "opteron", "barcelona"})
    if (k == g) return true;
  return false;
}

const char* kOpenblasDirs[] = {"/usr/lib/x86_64-linux-gnu/openblas-openmp",
                               "/usr/lib/x86_64-linux-gnu/openblas-pthread"};

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

[[noreturn]] void reexec(int argc, char** argv) {
  std::string exe = self_exe();
  setenv("HEADPRUNE_BLAS_REEXEC", "1", 1);
  std::vector<char*> args(argv, argv + argc);
  args.push_back(nullptr);
  execv(exe.c_str(), args.data());
  throw Error("BLAS: could not re-execute " + exe +
              " to select a fast BLAS; set OPENBLAS_CORETYPE=" + best_openblas_core() + " yourself");
}

}  // namespace

std::string best_openblas_core() {
  __builtin_cpu_init();
  if (isa::usable(isa::Level::kAvx512)) return "SkylakeX";
  if (isa::usable(isa::Level::kAvx2)) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return "";
}

BlasInfo detect_blas() {
  BlasInfo info;
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (sgemm && dladdr(sgemm, &where) && where.dli_fname) {
    char real[PATH_MAX];
    info.library = realpath(where.dli_fname, real) ? real : where.dli_fname;
  }
  using CharFn = char* (*)();
  auto corename = reinterpret_cast<CharFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  auto config = reinterpret_cast<CharFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const std::string& lib = info.library;
  bool reference = lib.find("/blas/libblas") != std::string::npos;
  if (corename && !reference) {
    info.name = "OpenBLAS";
    info.kernel = corename();
    if (config) info.config = config();
    info.slow = is_generic_kernel(info.kernel) && !best_openblas_core().empty();
  } else if (reference) {
    info.name = "reference BLAS";
    info.slow = true;
  } else if (auto mkl_version = reinterpret_cast<void (*)(char*, int)>(dlsym(RTLD_DEFAULT, "MKL_Get_Version_String"))) {
    // PyPI's LibTorch links MKL into libtorch_cpu.so: sgemm_ resolves there, and MKL names itself.
    char version[198] = {};
    mkl_version(version, static_cast<int>(sizeof version) - 1);
    info.name = "MKL";
    info.config = version;
  } else if (lib.find("mkl") != std::string::npos) {
    info.name = "MKL";
  } else {
    info.name = lib.empty() ? "none found" : "unknown";
  }
  return info;
}

void tune_allocator() {
  mallopt(M_MMAP_MAX, 0);  // every block from the heap, reused after free
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // never shrink the heap back
}

void ensure_fast_blas(int argc, char** argv) {
  tune_allocator();
  const char* allow = std::getenv("HEADPRUNE_ALLOW_SLOW_BLAS");
  if (allow && std::string(allow) == "1") return;
  BlasInfo info = detect_blas();
  bool tried = std::getenv("HEADPRUNE_BLAS_REEXEC") != nullptr;
  // HEADPRUNE_MAX_ISA below the CPU: OpenBLAS's kernel follows the cap too (it picks the CPU's own otherwise).
  const std::string best = best_openblas_core();
  if (isa::cap() < isa::cpu_level() && info.name == "OpenBLAS" && !best.empty() && info.kernel != best && !tried &&
      !std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
    reexec(argc, argv);
  }
  if (!info.slow) return;
  if (info.name == "reference BLAS") {
    for (const char* dir : kOpenblasDirs) {
      std::string candidate = std::string(dir) + "/libblas.so.3";
      if (!tried && access(candidate.c_str(), R_OK) == 0) {
        const char* old = std::getenv("LD_LIBRARY_PATH");
        setenv("LD_LIBRARY_PATH", (std::string(dir) + (old ? ":" + std::string(old) : "")).c_str(), 1);
        if (!std::getenv("OPENBLAS_CORETYPE") && !best_openblas_core().empty())
          setenv("OPENBLAS_CORETYPE", best_openblas_core().c_str(), 1);
        reexec(argc, argv);
      }
    }
    throw Error("BLAS: LibTorch is using the reference BLAS (" + info.library +
                "), ~80x slower than OpenBLAS; install it with `apt-get install libopenblas0-openmp` "
                "(or set HEADPRUNE_ALLOW_SLOW_BLAS=1 to run anyway)");
  }
  // OpenBLAS with a generic kernel on a CPU that has AVX2/AVX-512.
  const char* user_core = std::getenv("OPENBLAS_CORETYPE");
  if (!tried && !user_core) {
    setenv("OPENBLAS_CORETYPE", best_openblas_core().c_str(), 1);
    reexec(argc, argv);
  }
  // The user's own choice (some machines set it to avoid a faulty kernel) runs; the runtime line says it is generic.
  if (user_core && !tried) return;
  throw Error("BLAS: OpenBLAS chose the generic kernel '" + info.kernel + "' although this CPU supports " +
              best_openblas_core() + "; set OPENBLAS_CORETYPE=" + best_openblas_core() +
              " (or set HEADPRUNE_ALLOW_SLOW_BLAS=1 to run anyway)");
}

}  // namespace hp::core
