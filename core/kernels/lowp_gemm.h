// The inference linears at a lower precision (run.precision: fp32 | bf16 | int8). A weight is prepared once
// (PackedLinear::pack, when a model is set to a precision) and every product then takes float32 activations
// and writes float32 outputs, so the model around it (LayerNorm, softmax, GELU, the epilogues of
// core/kernels/epilogue.h) stays float32; the attention products take bf16 operands at int8 and bf16 where the CPU
// has AVX512_BF16 (core/kernels/attention_kernel.h), float32 elsewhere. One dispatch point per precision, chosen from
// core/kernels/isa.h (the CPU's instructions under HEADPRUNE_MAX_ISA):
// - int8: weights s8 per output channel, activations u8 per row on the fly (core/kernels/quantize.h has the
//   scheme and the error bound), int32 accumulation in oneDNN's dnnl_gemm_u8s8s32 on every CPU with AVX2.
//   The weights' range follows the instructions the GEMM multiplies with (int8_weight_max()): ±127 where a
//   u8·s8 product is accumulated exactly in int32 (AVX-512 VNNI, AVX-VNNI: vpdpbusd), ±63 where two of them
//   are first added in a saturating int16 (AVX2 and AVX-512 without VNNI: vpmaddubsw; 255·127·2 = 64770 would
//   saturate at 32767, 255·63·2 = 32130 cannot). Which one oneDNN runs is not trusted but probed once: a
//   product whose exact result needs more than int16 pair sums (int8_gemm_exact_at_8_bits()). Without AVX2
//   (scalar) the same rounded operands are multiplied by the float32 GEMM (emulated, no speedup).
// - bf16: weights and activations rounded to bf16, products accumulated in float32 by oneDNN's matmul where
//   the CPU has AVX512_BF16 (or AMX). Elsewhere bf16 runs as float32: oneDNN 2.6 has no bf16 on AVX2, and an
//   emulation (rounding the operands, then the float32 GEMM) is slower than float32 itself.
// precision_backend() says which path each precision takes, and why. Weights are taken as they are when packed;
// a model whose weights change repacks (Bert::set_precision), as does one whose cap changes (tests).
#pragma once

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>

namespace hp::core {

enum class Precision { kFp32, kBf16, kInt8 };

// "fp32", "bf16", "int8"; parse_precision returns false for anything else.
const char* precision_name(Precision p);
bool parse_precision(const std::string& name, Precision* out);
// A config's precision name (run.precision, validated): the Precision, or ConfigError naming `key`.
Precision precision_setting(const std::string& name, const std::string& key = "run.precision");

// The precision runs on its own instructions under the current cap: int8 with AVX2 (or newer), bf16 with
// AVX512_BF16 (or AMX). Otherwise int8 is emulated and bf16 runs as float32.
bool lowp_native(Precision p);
// The int8 weights' range the current path needs: 127 or 63 (see above). Every pack without an explicit range
// takes this one.
int int8_weight_max();
// The int8 ONNX export's range: ONNX Runtime multiplies with vpmaddubsw on AVX2 CPUs, wherever the model runs.
constexpr int kPortableInt8WeightMax = 63;
// Whether oneDNN's u8s8s32 GEMM, as this process runs it, sums u8·s8 products without int16 saturation (probed
// once, on products of 255 and ±127).
bool int8_gemm_exact_at_8_bits();
// Tests: called with (M, N, K) of every int8 GEMM this process runs, as the GEMM receives them (N padded to the
// weights' row multiple); empty: none. Set it only while no other thread multiplies.
using Int8GemmObserver = std::function<void(int64_t, int64_t, int64_t)>;
void set_int8_gemm_observer(Int8GemmObserver observer);
// One line per precision for --version and benchmarks, e.g. "int8: oneDNN 2.6.3 u8s8s32 GEMM, weights ±63
// (avx2: vpmaddubsw saturates int16 at ±127)" or "bf16: runs as fp32 (this CPU has no AVX512_BF16)".
std::string precision_backend(Precision p);


// While alive and `on`: LibTorch's CPU autocast to bf16, so that the matrix products of a forward (and with them
// their backward) run in bf16 with fp32 accumulation (oneDNN; AVX512_BF16, emulated by oneDNN without it), while
// LayerNorm, softmax and the losses stay fp32 (autocast's own op lists). Training's train.precision: bf16.
// On a CUDA device (`device`), LibTorch's CUDA autocast to bf16 in the same way.
class Bf16Autocast {
 public:
  explicit Bf16Autocast(bool on, const torch::Device& device = torch::kCPU);
  ~Bf16Autocast();
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool on_, was_enabled_ = false;
  at::DeviceType type_ = at::kCPU;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

class PackedLinear {
 public:
  PackedLinear() = default;  // nothing packed: fp32
  // w [N, K] float32. For kFp32 keeps w itself.
  // `smooth` [K] (int8 only; undefined = none): SmoothQuant's per-input-channel factors s_k > 0. The weight is
  // quantised as w_nk · s_k and each activation row as x_mk / s_k, so the product is unchanged in exact
  // arithmetic while an input channel with outliers no longer sets the whole row's scale (Xiao et al. 2023;
  // the factors come from calibration, Bert::calibrate_int8).
  // `weight_max` (int8 only): the weights' range, 127 or 63; 0 takes int8_weight_max().
  static PackedLinear pack(const torch::Tensor& w, Precision p, const torch::Tensor& smooth = {}, int weight_max = 0);

  Precision precision() const { return precision_; }
  bool defined() const { return w_.defined(); }
  // The float32 weight it was packed from (the autograd paths multiply this one).
  const torch::Tensor& weight() const { return w_; }
  // out[rows, N] = x[rows, K] · Ŵᵀ (accumulate: out += …), x and out float32 2-D with unit column stride.
  // `after(begin, end)` then runs on the output rows [begin, end): at int8 on each thread's rows, by that thread,
  // once it has converted them from int32 (no second parallel region), otherwise once over all rows after the
  // product.
  using RowEpilogue = std::function<void(int64_t, int64_t)>;
  void apply(torch::Tensor& out, const torch::Tensor& x, bool accumulate, const RowEpilogue& after = {}) const;
  // x · Ŵᵀ + b over the last dimension of x (any leading shape): the bias first, then an accumulating apply.
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const;
  // The weight the product uses, dequantised to float32 [N, K] in the space of x (smoothing undone; tests and
  // the error bound).
  torch::Tensor dequantized() const;
  bool smoothed() const { return inv_smooth_.defined(); }
  // Calibration: from now on every product also records max_m |x_mk| per input channel k into `channel_max`
  // ([K] float32, updated in place and shared by this pack's copies; undefined stops recording).
  void observe(const torch::Tensor& channel_max) { observed_ = channel_max; }
  // int8 only: the weights' range (127 or 63), per-channel scales [N] and the s8 weights [N, K].
  int weight_max() const { return weight_max_; }
  const torch::Tensor& scales() const { return scale_; }
  const torch::Tensor& int8_weights() const { return q_; }

 private:
  void apply_int8(torch::Tensor& out, const torch::Tensor& x, bool accumulate, const RowEpilogue& after) const;
  void apply_bf16(torch::Tensor& out, const torch::Tensor& x, bool accumulate) const;
  void record(const torch::Tensor& x) const;

  Precision precision_ = Precision::kFp32;
  int weight_max_ = 127;
  torch::Tensor w_;  // fp32 [N, K] as given
  torch::Tensor q_, scale_, colsum_;  // int8: s8 [N, K], float [N], int32 [N] (q_, colsum_: views of the padded ones)
  torch::Tensor q_padded_, colsum_padded_;  // int8: [Np, K] and [Np], zero past N (lowp_gemm.cpp: kInt8RowMultiple)
  torch::Tensor inv_smooth_;  // int8 with smoothing: 1 / s_k [K], contiguous
  torch::Tensor emulated_;  // int8: the dequantised weight [N, K] the emulation multiplies
  torch::Tensor bf16_;  // bf16 where native: the rounded weight as bf16 [N, K]
  torch::Tensor observed_;  // calibration: the running per-channel max |x| [K]
  std::shared_ptr<void> primitive_;  // bf16: the oneDNN matmul (runtime M), shared between copies
};

}  // namespace hp::core
