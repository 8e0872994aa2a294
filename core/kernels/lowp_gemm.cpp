// bf16 and int8 inference linears (see core/kernels/lowp_gemm.h).
#include "core/kernels/lowp_gemm.h"

#include <torch/version.h>

#include <ATen/autocast_mode.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "core/base/errors.h"  // ConfigError, InternalError
#include "core/kernels/attention_kernel.h"
#include "core/kernels/epilogue.h"
#include "core/kernels/gemm.h"
#include "core/kernels/isa.h"
#include "core/kernels/quantize.h"
#include "core/kernels/runtime.h"  // apply_isa_cap_to_onednn
#include "core/kernels/thread_cache.h"

namespace hp::core {

namespace {

using isa::Level;

// The int8 product's path: the float32 GEMM on the rounded operands (no AVX2), or oneDNN's u8s8s32 GEMM with
// weights in ±127 (u8·s8 products summed exactly: VNNI) or ±63 (pair sums in a saturating int16).
enum class Int8Path { kEmulated, kGemm127, kGemm63 };

Int8Path int8_path() {
  if (!isa::usable(Level::kAvx2)) return Int8Path::kEmulated;
  const bool vnni = isa::usable(Level::kAvx512Vnni) || isa::usable(Level::kAvxVnni);
  return vnni && int8_gemm_exact_at_8_bits() ? Int8Path::kGemm127 : Int8Path::kGemm63;
}

// The highest usable level whose instructions a precision's kernel multiplies with, for --version.
Level int8_level() {
  for (Level l : {Level::kAmx, Level::kAvx512Vnni, Level::kAvx512, Level::kAvxVnni, Level::kAvx2})
    if (isa::usable(l)) return l;
  return Level::kScalar;
}

dnnl_cpu_isa_t onednn_isa(Level l) {
  switch (l) {
    case Level::kScalar: return dnnl_cpu_isa_sse41;  // oneDNN's oldest; our own passes run scalar
    case Level::kAvx2: return dnnl_cpu_isa_avx2;
    case Level::kAvxVnni: return dnnl_cpu_isa_avx2_vnni;
    case Level::kAvx512: return dnnl_cpu_isa_avx512_core;
    case Level::kAvx512Vnni: return dnnl_cpu_isa_avx512_core_vnni;
    case Level::kAvx512Bf16: return dnnl_cpu_isa_avx512_core_bf16;
    case Level::kAmx: return dnnl_cpu_isa_avx512_core_amx;
  }
  return dnnl_cpu_isa_all;
}

// ONEDNN_MAX_CPU_ISA's spelling of a level (read by any oneDNN copy loaded later, LibTorch's included).
const char* onednn_isa_env(Level l) {
  switch (l) {
    case Level::kScalar: return "SSE41";
    case Level::kAvx2: return "AVX2";
    case Level::kAvxVnni: return "AVX2_VNNI";
    case Level::kAvx512: return "AVX512_CORE";
    case Level::kAvx512Vnni: return "AVX512_CORE_VNNI";
    case Level::kAvx512Bf16: return "AVX512_CORE_BF16";
    case Level::kAmx: return "AVX512_CORE_AMX";
  }
  return "ALL";
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

// The int8 weights' rows (output channels) are padded with zero rows to a multiple of this for the GEMM: oneDNN
// 2.6's AVX2 u8s8s32 GEMM ran an N of 476 or 1315 (FFN widths of a slimmed SST-2 export) at 0.64–0.69 of the speed
// of N = 480 or 1312, the padded product taking less time than the unpadded one (bench/lowp_gemm_bench --shapes;
// AMD EPYC Zen 3, 2026-12-03).
constexpr int64_t kInt8RowMultiple = 8;

Int8GemmObserver g_int8_gemm_observer;

// Scratch buffers of one thread's products, grown as needed and kept: a forward pass calls ~40 products.
template <class T>
T* scratch(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  return v.data();
}

struct Int8Scratch {
  std::vector<uint8_t> q;
  std::vector<float> scale;
  std::vector<int32_t> zero, c;
};

// c[m, n] (row stride ldc) = Σ_k a[m, k] · b[n, k], exactly as the GEMM at hand sums: a u8 [M, K], b s8 [N, K]
// row-major, colsum [N] = Σ_k b[n, k] (nullptr: computed). False when the GEMM refuses.
#if TORCH_VERSION_MAJOR >= 2
// LibTorch 2.x: Debian's oneDNN 2 answers "unimplemented" for its int8 GEMM in a process with the wheel's oneDNN 3
// (docs/gpu.md), so ATen's s8·s8 -> s32 product (at::_int_mm) runs it after a shift: a_u8 = a_s8 + 128, hence
// Σ_k a_u8·b = Σ_k a_s8·b + 128·Σ_k b. The same int32 sums, so the same outputs as 1.13's oneDNN path.
bool gemm_u8s8s32(int64_t M, int64_t N, int64_t K, const uint8_t* a, const int8_t* b, const int32_t* colsum,
                  int32_t* c, int64_t ldc) {
  thread_local std::vector<int8_t> shifted;
  int8_t* s = scratch(shifted, M * K);
  for (int64_t i = 0; i < M * K; ++i) s[i] = static_cast<int8_t>(a[i] ^ 0x80);
  const auto B = torch::from_blob(const_cast<int8_t*>(b), {N, K}, torch::kInt8);
  const auto sums = colsum ? torch::from_blob(const_cast<int32_t*>(colsum), {N}, torch::kInt32)
                           : B.to(torch::kInt32).sum(1).to(torch::kInt32);
  const auto prod = at::_int_mm(torch::from_blob(s, {M, K}, torch::kInt8), B.t());
  torch::from_blob(c, {M, N}, {ldc, 1}, torch::kInt32).copy_(prod + 128 * sums.unsqueeze(0));
  return true;
}
#else
// With AMX usable, oneDNN's matmul primitive: its brgemm kernel multiplies on the AMX tiles (brg:avx512_core_amx_int8),
// where oneDNN 2.6's u8s8s32 GEMM has no AMX kernel — 3.5x faster at MiniLM's FFN shape (4096 x 384 . 384 x 1536, 2
// threads, Intel Xeon with AMX, 2026-12-01) — with the same exact int32 sums (TDPBUSD adds u8·s8 products into int32).
// A matmul with a runtime M falls back to that GEMM, so each thread keeps the primitives it made by shape (M varies
// with batch and length: the cache is bounded).
bool gemm_u8s8s32_amx(int64_t M, int64_t N, int64_t K, const uint8_t* a, const int8_t* b, int32_t* c, int64_t ldc) {
  using dt = dnnl::memory::data_type;
  thread_local const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  auto& made = thread_cache<std::array<int64_t, 4>, dnnl::matmul>();
  const dnnl::memory::desc src({M, K}, dt::u8, {K, 1}), wei({K, N}, dt::s8, {1, K}), dst({M, N}, dt::s32, {ldc, 1});
  try {
    auto it = made.find({M, N, K, ldc});
    if (it == made.end()) {
      it = made.emplace(std::array<int64_t, 4>{M, N, K, ldc},
                        dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine)))
               .first;
    }
    dnnl::stream stream(engine);
    it->second.execute(stream, {{DNNL_ARG_SRC, dnnl::memory(src, engine, const_cast<uint8_t*>(a))},
                                {DNNL_ARG_WEIGHTS, dnnl::memory(wei, engine, const_cast<int8_t*>(b))},
                                {DNNL_ARG_DST, dnnl::memory(dst, engine, c)}});
    stream.wait();
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

bool gemm_u8s8s32(int64_t M, int64_t N, int64_t K, const uint8_t* a, const int8_t* b, const int32_t* /*colsum*/,
                  int32_t* c, int64_t ldc) {
  if (isa::usable(Level::kAmx)) return gemm_u8s8s32_amx(M, N, K, a, b, c, ldc);
  const int32_t c_offset = 0;
  return dnnl_gemm_u8s8s32('N', 'T', 'F', M, N, K, 1.0f, a, K, 0, b, K, 0, 0.0f, c, ldc, &c_offset) == dnnl_success;
}
#endif

std::string int8_gemm_name() {
#if TORCH_VERSION_MAJOR >= 2
  return "ATen _int_mm s8s8s32 (activations shifted to s8)";
#else
  if (isa::usable(Level::kAmx)) return "oneDNN " + onednn_version() + " u8s8s32 matmul on AMX tiles";
  return "oneDNN " + onednn_version() + " u8s8s32 GEMM";
#endif
}

// The bf16 matmuls of one weight: the M dimension is given at run time, so one primitive serves every
// batch shape; the second adds into the destination (oneDNN's sum post-op).
struct Bf16Matmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::memory::desc weights;
  dnnl::matmul plain, sum;
};

dnnl::matmul make_matmul(const dnnl::engine& engine, int64_t N, int64_t K, const dnnl::memory::desc& weights,
                         bool accumulate) {
  using dt = dnnl::memory::data_type;
  const auto R = DNNL_RUNTIME_DIM_VAL;
  const dnnl::memory::desc src({R, K}, dt::bf16, {R, 1}), dst({R, N}, dt::f32, {R, 1});
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, engine));
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: return "bf16";
    case Precision::kInt8: return "int8";
  }
  return "?";
}

bool parse_precision(const std::string& name, Precision* out) {
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kInt8})
    if (name == precision_name(p)) {
      *out = p;
      return true;
    }
  return false;
}

Precision precision_setting(const std::string& name, const std::string& key) {
  Precision p;
  if (!parse_precision(name, &p)) throw ConfigError(key + " = '" + name + "'; use fp32, bf16 or int8");
  return p;
}

void apply_isa_cap_to_onednn() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!isa::cap_from_environment()) return;
    const Level cap = isa::cap();
    setenv("ONEDNN_MAX_CPU_ISA", onednn_isa_env(cap), 0);  // a user's own setting stays
    dnnl_set_max_cpu_isa(onednn_isa(cap));  // refused (and harmless) once oneDNN has run a kernel
  });
}

void set_int8_gemm_observer(Int8GemmObserver observer) { g_int8_gemm_observer = std::move(observer); }

bool int8_gemm_exact_at_8_bits() {
  static const bool exact = [] {
    apply_isa_cap_to_onednn();
    // 255 · 127 at every k: exact sums need 64770 per pair of k, past int16. Shapes of the GEMM and GEMV paths.
    for (int64_t M : {1, 33}) {
      const int64_t N = 16, K = 64;
      const std::vector<uint8_t> a(static_cast<size_t>(M * K), 255);
      std::vector<int8_t> b(static_cast<size_t>(N * K), 127);
      for (int64_t n = 1; n < N; n += 2) std::fill_n(b.begin() + n * K, K, static_cast<int8_t>(-127));
      std::vector<int32_t> c(static_cast<size_t>(M * N));
      if (!gemm_u8s8s32(M, N, K, a.data(), b.data(), nullptr, c.data(), N)) return false;
      for (int64_t i = 0; i < M * N; ++i)
        if (c[static_cast<size_t>(i)] != (i % N % 2 ? -1 : 1) * 255 * 127 * K) return false;
    }
    return true;
  }();
  return exact;
}

// LibTorch 2.x: Debian's oneDNN 2 cannot execute its bf16 matmul in a process with the wheel's oneDNN 3 ("could not
// execute a primitive", as its int8 GEMM answers "unimplemented": docs/gpu.md), so bf16 runs as fp32 there.
#if TORCH_VERSION_MAJOR >= 2
constexpr bool kOneDnnBf16 = false;
#else
constexpr bool kOneDnnBf16 = true;
#endif

bool lowp_native(Precision p) {
  if (p == Precision::kInt8) return int8_path() != Int8Path::kEmulated;
  if (p == Precision::kBf16) return kOneDnnBf16 && isa::usable(Level::kAvx512Bf16);
  return true;
}

int int8_weight_max() { return int8_path() == Int8Path::kGemm63 ? kPortableInt8WeightMax : 127; }

namespace {
// What the bf16 and int8 models' attention products run on (core/kernels/attention_kernel.h).
std::string attention_note() {
  return bf16_attention_available() ? "; attention products in bf16 (vdpbf16ps, avx512_bf16)" : "";
}
}  // namespace

std::string precision_backend(Precision p) {
  const std::string name = precision_name(p);
  if (p == Precision::kFp32) return name + ": " + gemm_backend();
  const std::string cap = std::string(" under the cap ") + isa::name(isa::cap());
  if (p == Precision::kBf16) {
    if (lowp_native(p))
      return name + ": oneDNN " + onednn_version() + " bf16 matmul (" + isa::name(Level::kAvx512Bf16) + ")" +
             attention_note();
    if (!kOneDnnBf16 && isa::usable(Level::kAvx512Bf16))
      return name + ": runs as fp32 (LibTorch " + TORCH_VERSION + " carries oneDNN 3, with which Debian's oneDNN " +
             onednn_version() + " cannot run its bf16 matmul in one process: docs/gpu.md)";
    return name + ": runs as fp32 (no AVX512_BF16" + (isa::cpu_has(Level::kAvx512Bf16) ? cap : " on this CPU") +
           "; oneDNN " + onednn_version() + " has no bf16 kernel below it, and rounding the operands for the fp32 " +
           "GEMM would be slower than fp32)";
  }
  switch (int8_path()) {
    case Int8Path::kEmulated:
      return name + ": emulated in float32 (no AVX2" + (isa::cpu_has(Level::kAvx2) ? cap : " on this CPU") + ")";
    case Int8Path::kGemm127:
      return name + ": " + int8_gemm_name() + ", weights ±127 (" + isa::name(int8_level()) +
             ": u8·s8 products summed exactly, probed)" + attention_note();
    case Int8Path::kGemm63: break;
  }
  return name + ": " + int8_gemm_name() + ", weights ±63 (" + isa::name(int8_level()) +
         ": no VNNI, u8·s8 pair sums saturate int16 at ±127, probed)" + attention_note();
}

// LibTorch 2.4 named autocast's switches by device type; 1.13 has one pair for the CPU and one for CUDA.
namespace {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(at::DeviceType t) { return at::autocast::is_autocast_enabled(t); }
at::ScalarType autocast_dtype(at::DeviceType t) { return at::autocast::get_autocast_dtype(t); }
void set_autocast(at::DeviceType t, bool on, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(t, dtype);
  at::autocast::set_autocast_enabled(t, on);
}
#else
bool autocast_enabled(at::DeviceType t) { return t == at::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled(); }
at::ScalarType autocast_dtype(at::DeviceType t) {
  return t == at::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
}
void set_autocast(at::DeviceType t, bool on, at::ScalarType dtype) {
  if (t == at::kCPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(on);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(on);
  }
}
#endif
}  // namespace

Bf16Autocast::Bf16Autocast(bool on, const torch::Device& device) : on_(on), type_(device.type()) {
  if (!on_) return;
  was_enabled_ = autocast_enabled(type_);
  was_dtype_ = autocast_dtype(type_);
  set_autocast(type_, true, at::kBFloat16);
}

Bf16Autocast::~Bf16Autocast() {
  if (!on_) return;
  set_autocast(type_, was_enabled_, was_dtype_);
  if (!was_enabled_) at::autocast::clear_cache();  // the bf16 copies of the weights, made again next step
}

PackedLinear PackedLinear::pack(const torch::Tensor& w_in, Precision p, const torch::Tensor& smooth, int weight_max) {
  // fp32 holds the weight as it is, on any device (a GPU model's training path); the packed precisions are the CPU's.
  TORCH_CHECK(w_in.dim() == 2 && w_in.scalar_type() == torch::kFloat && (p == Precision::kFp32 || w_in.device().is_cpu()),
              "PackedLinear::pack: a float32 [N, K] weight (on the CPU but at fp32), got ", w_in.sizes(), " on ",
              w_in.device());
  apply_isa_cap_to_onednn();
  PackedLinear pl;
  pl.precision_ = p;
  pl.w_ = w_in;
  if (p == Precision::kFp32) return pl;
  auto w = w_in.contiguous();
  const int64_t N = w.size(0), K = w.size(1);
  if (p == Precision::kInt8) {
    if (smooth.defined()) {
      TORCH_CHECK(smooth.dim() == 1 && smooth.size(0) == K && smooth.scalar_type() == torch::kFloat &&
                      (smooth > 0).all().item<bool>() && torch::isfinite(smooth).all().item<bool>(),
                  "PackedLinear::pack: smoothing factors [", K, "], positive and finite, got ", smooth.sizes());
      w = (w * smooth.unsqueeze(0)).contiguous();
      pl.inv_smooth_ = (1.0f / smooth).contiguous();
    }
    pl.weight_max_ = weight_max > 0 ? weight_max : int8_weight_max();
    TORCH_CHECK(pl.weight_max_ == 127 || pl.weight_max_ == kPortableInt8WeightMax,
                "PackedLinear::pack: int8 weights in ±127 or ±63, asked for ±", pl.weight_max_);
    // The GEMM multiplies kInt8RowMultiple-aligned rows: zero rows pad the weight (q_ and colsum_ view the first N).
    const int64_t padded = (N + kInt8RowMultiple - 1) / kInt8RowMultiple * kInt8RowMultiple;
    pl.q_padded_ = torch::zeros({padded, K}, torch::kInt8);
    pl.colsum_padded_ = torch::zeros({padded}, torch::kInt32);
    pl.q_ = pl.q_padded_.narrow(0, 0, N);
    pl.colsum_ = pl.colsum_padded_.narrow(0, 0, N);
    pl.scale_ = torch::empty({N}, torch::kFloat);
    quant::quantize_weight_rows(w.data_ptr<float>(), N, K, pl.q_.data_ptr<int8_t>(), pl.scale_.data_ptr<float>(),
                                pl.colsum_.data_ptr<int32_t>(), pl.weight_max_);
    pl.emulated_ = pl.q_.to(torch::kFloat) * pl.scale_.unsqueeze(1);
    return pl;
  }
  if (!lowp_native(Precision::kBf16) || N == 0 || K == 0) return pl;  // runs as float32 (see the header)
  pl.bf16_ = torch::empty({N, K}, torch::kBFloat16);
  quant::to_bf16_rows(w.data_ptr<float>(), K, N, K, reinterpret_cast<uint16_t*>(pl.bf16_.data_ptr()));
  {
    auto mm = std::make_shared<Bf16Matmul>();
    mm->weights = dnnl::memory::desc({K, N}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ba);
    mm->plain = make_matmul(mm->engine, N, K, mm->weights, false);
    mm->sum = make_matmul(mm->engine, N, K, mm->weights, true);
    pl.primitive_ = mm;
  }
  return pl;
}

void PackedLinear::record(const torch::Tensor& x) const {
  if (!observed_.defined() || x.numel() == 0) return;
  observed_.copy_(torch::maximum(observed_, x.reshape({-1, x.size(-1)}).abs().amax(0)));
}

torch::Tensor PackedLinear::linear(const torch::Tensor& x, const torch::Tensor& b) const {
  if (precision_ == Precision::kFp32 || (precision_ == Precision::kBf16 && !primitive_)) {  // bf16 run as fp32 too
    record(x);  // (the other precisions record in apply)
    return linear_no_grad(x, w_, b);
  }
  auto sizes = x.sizes().vec();
  sizes.back() = w_.size(0);
  auto out = torch::empty({x.numel() / std::max<int64_t>(x.size(-1), 1), w_.size(0)}, x.options());
  auto rows = x.reshape({-1, x.size(-1)});
  if (rows.stride(1) != 1) rows = rows.contiguous();
  if (epilogue_kernels_available() && b.is_contiguous() && b.scalar_type() == torch::kFloat) {
    // The bias is added by the threads that convert the product (at int8), not in a parallel region of its own.
    float* y = out.data_ptr<float>();
    const float* bias = b.data_ptr<float>();
    const int64_t N = out.size(1);
    apply(out, rows, false, [=](int64_t begin, int64_t end) {
      bias_activation_rows(y + begin * N, end - begin, N, N, bias, EpilogueActivation::kNone);
    });
  } else {
    out.copy_(b.expand_as(out));
    apply(out, rows, true);
  }
  return out.view(sizes);
}

torch::Tensor PackedLinear::dequantized() const {
  if (precision_ == Precision::kInt8) return inv_smooth_.defined() ? emulated_ * inv_smooth_.unsqueeze(0) : emulated_;
  return bf16_.defined() ? bf16_.to(torch::kFloat) : w_;
}

void PackedLinear::apply(torch::Tensor& out, const torch::Tensor& x, bool accumulate, const RowEpilogue& after) const {
  TORCH_CHECK(defined() && out.dim() == 2 && x.dim() == 2 && x.size(1) == w_.size(1) && out.size(0) == x.size(0) &&
                  out.size(1) == w_.size(0) && out.scalar_type() == torch::kFloat &&
                  x.scalar_type() == torch::kFloat && out.stride(1) == 1 && x.stride(1) == 1,
              "PackedLinear::apply: shapes ", out.sizes(), " = ", x.sizes(), " x ", w_.sizes(), "^T");
  if (out.numel() == 0) return;
  record(x);
  if (precision_ == Precision::kInt8 && x.size(1) > 0) return apply_int8(out, x, accumulate, after);
  if (precision_ == Precision::kBf16 && primitive_ && lowp_native(Precision::kBf16)) apply_bf16(out, x, accumulate);
  else accumulate ? accumulate_linear(out, x, w_) : matmul_nt(out, x, w_);
  if (after) after(0, out.size(0));
}

void PackedLinear::apply_int8(torch::Tensor& out, const torch::Tensor& x, bool accumulate,
                              const RowEpilogue& after) const {
  thread_local Int8Scratch s;
  const int64_t M = x.size(0), K = x.size(1), N = w_.size(0);
  uint8_t* qx = scratch(s.q, M * K);
  float* sx = scratch(s.scale, M);
  int32_t* zx = scratch(s.zero, M);
  quant::quantize_activation_rows(x.data_ptr<float>(), x.stride(0), M, K, qx, sx, zx,
                                  inv_smooth_.defined() ? inv_smooth_.data_ptr<float>() : nullptr);
  // The same rounded operands through the float32 GEMM without AVX2, and for weights packed in ±127 under a
  // cap lowered since (tests): the GEMM at hand could saturate their pair sums.
  const Int8Path path = int8_path();
  if (path == Int8Path::kEmulated || (path == Int8Path::kGemm63 && weight_max_ > kPortableInt8WeightMax)) {
    auto xd = (torch::from_blob(qx, {M, K}, torch::kUInt8).to(torch::kFloat) -
               torch::from_blob(zx, {M, 1}, torch::kInt32).to(torch::kFloat)) *
              torch::from_blob(sx, {M, 1}, torch::kFloat);
    accumulate ? accumulate_linear(out, xd, emulated_) : matmul_nt(out, xd, emulated_);
    if (after) after(0, M);
    return;
  }
  // The GEMM runs on the padded weight (Np ≥ N rows). Without accumulation or padding the int32 result goes into
  // out's own memory and is converted in place; otherwise into scratch, of which the first N columns are converted.
  const int64_t Np = q_padded_.size(0);
  const bool in_place = !accumulate && Np == N;
  int32_t* c = in_place ? reinterpret_cast<int32_t*>(out.data_ptr<float>()) : scratch(s.c, M * Np);
  const int64_t ldc = in_place ? out.stride(0) : Np;
  if (g_int8_gemm_observer) g_int8_gemm_observer(M, Np, K);
  if (!gemm_u8s8s32(M, Np, K, qx, q_padded_.data_ptr<int8_t>(), colsum_padded_.data_ptr<int32_t>(), c, ldc))
    throw InternalError("core/kernels/lowp_gemm.cpp: the u8s8s32 GEMM failed for " + std::to_string(M) + "x" +
                        std::to_string(K) + " . " + std::to_string(K) + "x" + std::to_string(Np));
  quant::dequantize_rows(c, ldc, out.data_ptr<float>(), out.stride(0), M, N, sx, zx, scale_.data_ptr<float>(),
                         colsum_.data_ptr<int32_t>(), accumulate, after);
}

void PackedLinear::apply_bf16(torch::Tensor& out, const torch::Tensor& x, bool accumulate) const {
  thread_local std::vector<uint16_t> xb;
  const int64_t M = x.size(0), K = x.size(1), N = w_.size(0);
  uint16_t* xr = scratch(xb, M * K);
  quant::to_bf16_rows(x.data_ptr<float>(), x.stride(0), M, K, xr);
  auto& mm = *static_cast<Bf16Matmul*>(primitive_.get());
  using dt = dnnl::memory::data_type;
  const dnnl::memory src({{M, K}, dt::bf16, {K, 1}}, mm.engine, xr);
  const dnnl::memory wei(mm.weights, mm.engine, bf16_.data_ptr());
  const dnnl::memory dst({{M, N}, dt::f32, {out.stride(0), 1}}, mm.engine, out.data_ptr<float>());
  dnnl::stream stream(mm.engine);
  (accumulate ? mm.sum : mm.plain)
      .execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
  stream.wait();
}

}  // namespace hp::core
