// BERT encoder + pooler + sequence classifier, numerically as Hugging Face BertForSequenceClassification
// (post-LayerNorm, exact erf GELU), with a multiplicative per-head mask/gate on each head's context
// before the output projection (Michel et al. 2019's ξ_h, Voita et al. 2019's gate) and on each FFN
// intermediate neuron. Layers may have different head counts and FFN widths (slimmed models), including 0. Weights live in a flat map keyed by HF names.
// Loading/saving: core/io/checkpoint.h. The key table: core/model/bert_keys.h.
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/kernels/lowp_gemm.h"
#include "core/model/arch.h"
#include "core/model/bert_config.h"

namespace hp::core {

struct EncoderInput {
  torch::Tensor input_ids;  // [B, S] int64
  torch::Tensor token_type_ids;  // [B, S] int64; undefined = zeros
  torch::Tensor attention_mask;  // [B, S] 0/1; undefined = all ones
  // [L, Hmax] multiplicative gate per head (layer l uses its first heads_in_layer(l) entries), or
  // [B, L, Hmax] for one gate per example; undefined = all ones (no cost). Differentiable:
  // d loss / d head_mask is Michel's importance.
  torch::Tensor head_mask;
  // [L, Imax] multiplicative gate per FFN intermediate neuron (layer l uses its first ffn_width(l) entries),
  // or [B, L, Imax]; undefined = all ones. A 0 removes the neuron exactly (its activation never reaches the
  // output matrix). Differentiable: d loss / d neuron_mask is the neurons' mask gradient (Kwon et al. 2022).
  torch::Tensor neuron_mask;
  // [L] gate per layer: layer l's output is x + z_l · (layer_l(x) − x), so 0 makes the layer the identity (both
  // sublayers and their LayerNorms skipped: what removing it from the stack does) and 1 leaves it; undefined = all
  // ones. A 0 that needs no gradient skips the layer's work; the per-layer lists of EncoderOutput then hold
  // empty entries for it ([B, 0, Sq, S] attention, [B, 0, Sq, Dh] contexts, [B, S, 0] FFN activations, the
  // input itself as the FFN input and hidden state). Differentiable.
  torch::Tensor layer_mask;
  // [D] gate per hidden channel, shared by every layer (CoFi's z_hidden): the embeddings' output and every
  // sublayer's output (before its residual sum) are multiplied by it, and every LayerNorm normalises over the
  // channels whose gate is not 0 and outputs 0 at the others. So at 0/1 values the model is the one whose 0
  // channels are removed from every tensor (prune/export/slim.h). Undefined = all ones. Differentiable. With an embedding
  // projection (ELECTRA) the projection's output is multiplied and the embeddings' LayerNorm is left whole.
  torch::Tensor hidden_mask;
  bool want_attention = false;  // fill EncoderOutput::attentions
  bool want_context = false;  // fill EncoderOutput::contexts
  bool want_hidden = false;  // fill EncoderOutput::hidden_states
  bool want_ffn = false;  // fill EncoderOutput::ffn_inputs and ffn_acts
  // Start at layer `start_layer` from `start_hidden` [B, S, D] (that layer's input, e.g. a cached
  // hidden_states[start_layer]) instead of the embeddings: criteria reuse the layers below.
  // input_ids still gives the shape; attention_mask must match.
  int start_layer = 0;
  torch::Tensor start_hidden;
  // Stop after layer end_layer - 1 (< 0: run every layer): last_hidden is that layer's output, and pooled and
  // logits stay undefined unless the last layer ran. With start_layer, one layer at a time (mask tuning).
  int end_layer = -1;
  // In layer `override_layer`, use `override_probs` [B, H_l, S, S] as the attention probabilities
  // instead of computing them (attention attribution scales them by α and differentiates).
  int override_layer = -1;
  torch::Tensor override_probs;
  // LRP propagation rules (prune/heads/criteria.h): the LayerNorm scale 1/σ, the attention probabilities
  // and the activation gates act(x)/x are detached, so the network is locally linear and
  // input × gradient is layer-wise relevance (LRP-0). Same forward values; only gradients change.
  bool lrp_rules = false;
  // The last layer computes only position 0 ([CLS], all the pooler reads): same logits and pooled
  // output for a 1/L smaller cost; last_hidden (and that layer's hidden state) is then [B, 1, D], and
  // with want_attention that layer's attention is its [CLS] row [B, H, 1, S]. Not with want_context. A token
  // head (BertConfig::head) reads every position, so the model ignores it there.
  bool cls_only = false;
};

struct EncoderOutput {
  torch::Tensor last_hidden;  // [B, S, D]
  torch::Tensor pooled;  // [B, D]
  torch::Tensor logits;  // [B, C] (C = 1 for regression); a token head's [B, S, C]
  std::vector<torch::Tensor> hidden_states;  // L+1 × [B, S, D]: embeddings, then each layer
  std::vector<torch::Tensor> attentions;  // L × [B, H_l, S, S] attention probabilities
  std::vector<torch::Tensor> contexts;  // L × [B, H_l, S, Dh] head outputs before masking
  std::vector<torch::Tensor> ffn_inputs;  // L × [B, S, D] the attention block's output (after its LayerNorm)
  std::vector<torch::Tensor> ffn_acts;  // L × [B, S, I_l] FFN activations before the neuron mask
  // With start_layer = s > 0 the three lists begin at layer s (hidden_states[0] = start_hidden).
};

// Applies a per-head gate to context vectors. ctx: [B, H, S, Dh]; mask: [H] or [B, H].
torch::Tensor apply_head_mask(const torch::Tensor& ctx, const torch::Tensor& mask);

// Position ids of input_ids [B, S] as the architecture counts them (core/model/arch.h): 0, 1, … or, for
// RoBERTa, pad + 1, pad + 2, … over the real tokens and pad at padding.
torch::Tensor position_ids(const torch::Tensor& input_ids, Positions from, int pad);

// The classification head's activation (Arch::head_act: tanh, gelu or relu) and its derivative applied to `grad`.
torch::Tensor head_activation(const std::string& act, const torch::Tensor& z);
torch::Tensor head_activation_backward(const std::string& act, const torch::Tensor& grad, const torch::Tensor& z);

// HF's additive attention mask: 0 where attended, float32 min where padded. mask: [B, S] → [B, 1, 1, S].
torch::Tensor extended_attention_mask(const torch::Tensor& attention_mask);

// SmoothQuant's per-input-channel factors of calibrated int8 for a weight w [N, K] from calibration's
// act_max [K] (max |x_k| over the calibration examples): s_k = max|x_k|^α / max_n |w_nk|^(1−α), α = 0.5
// (kSmoothAlpha in bert.cpp); 1 where a channel gives no finite positive factor. PackedLinear::pack takes them.
torch::Tensor smoothing_factors(const torch::Tensor& w, const torch::Tensor& act_max);

class Bert {
 public:
  // `params` are keyed by HF names without prefix (core/model/bert_keys.h); shapes must already be checked.
  Bert(BertConfig cfg, std::map<std::string, torch::Tensor> params);

  EncoderOutput forward(const EncoderInput& in) const;
  // The embedding layer's output [B, S, D] (word + type + position, LayerNorm, dropout).
  torch::Tensor embed(const EncoderInput& in) const;

  // Eval mode, plain inputs: the forward (logits; every layer's full attention maps in `out.attentions`)
  // and, by a hand-written backward over it, `grads`: ∂loss/∂(attention probabilities) of every layer,
  // L × [B, H_l, S, S], for the loss whose gradient with respect to the logits `dloss` returns. The loss
  // reads the last layer's [CLS] row only, so that layer's other rows have exactly zero gradient.
  // Autograd gives the same numbers (tested) at about twice the cost: it cannot use the inference GEMMs
  // and attention kernel, and differentiates rows the loss never reads. Clark's no-op evidence (analysis/).
  // Implemented in core/model/bert_backward.cpp.
  struct AttentionGrads {
    EncoderOutput out;
    std::vector<torch::Tensor> grads;
  };
  AttentionGrads attention_grads(const EncoderInput& in,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& dloss) const;
  // The same by autograd (a forward that keeps its graph from the embedding output up), on any device:
  // attention_grads runs it on a model off the CPU, whose hand-written backward is built from the CPU's kernels.
  // A layer without heads has an empty map and gradient, as there.
  AttentionGrads attention_grads_autograd(const EncoderInput& in,
                                          const std::function<torch::Tensor(const torch::Tensor&)>& dloss) const;

  // The same model with every parameter on `device` (a copy unless it is already there; precision fp32). forward()
  // moves its inputs to the model's device; its outputs stay there. On a GPU every product is ATen's (the CPU
  // kernels, packs and precisions of core/kernels are the CPU's), with scaled-dot-product attention where no
  // attention maps are asked for; attention_grads() is CPU-only.
  Bert to(const torch::Device& device) const;
  torch::Device device() const { return device_; }

  const BertConfig& config() const { return cfg_; }
  // HF-named parameters (the same tensors the model computes with).
  const std::map<std::string, torch::Tensor>& parameters() const { return params_; }
  // Changing a weight in place (an optimizer step, a loaded state) is seen by the next inference forward, which
  // packs again (the tensors' version counters say when); replacing a map entry is not.
  std::map<std::string, torch::Tensor>& mutable_parameters() { return params_; }
  // The precision of the inference forward's linears (no autograd, not training; core/kernels/lowp_gemm.h):
  // packs every encoder linear and the pooler from the current weights. Autograd forwards (training, the
  // criteria, LRP) and the classifier stay float32. `int8_weight_max` (int8 only): the weights' range, 0 for the
  // one this CPU's int8 path takes (int8_weight_max() of core/kernels/lowp_gemm.h), kPortableInt8WeightMax for
  // the arithmetic of the int8 ONNX export.
  void set_precision(Precision p, int int8_weight_max = 0);
  Precision precision() const { return precision_; }
  // int8 calibration (SmoothQuant, Xiao et al. 2023): runs `feed` — inference forwards over calibration
  // examples, under no-grad — with every packed linear at float32, recording the largest |input| per channel of
  // each. From then on the int8 packs smooth each linear with s_k = sqrt(max|x_k| / max_n |w_nk|) (α = 0.5)
  // (PackedLinear::pack), which keeps an outlier channel from setting the scale of every activation row.
  // Kept across set_precision and weight changes; calibrating again replaces it.
  void calibrate_int8(const std::function<void()>& feed);
  bool int8_calibrated() const { return !act_max_.empty(); }
  // What calibration recorded, for tests: per layer the max |input| per channel of qkv, o, in, out, then the
  // pooler's (empty before calibrate_int8).
  const std::vector<torch::Tensor>& int8_activation_max() const { return act_max_; }
  // For tests: layer l's inference pack `which` (0 qkv, 1 o, 2 in, 3 out) as the next inference forward
  // multiplies it (packed now from the current weights, precision and calibration where they changed).
  const PackedLinear& inference_pack(int l, int which) const;
  void set_training(bool training) { training_ = training; }
  bool is_training() const { return training_; }

 private:
  struct LayerRefs {
    torch::Tensor q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, ln1_w, ln1_b, in_w, in_b, out_w, out_b, ln2_w, ln2_b;
  };
  // The weights as the inference forward multiplies them, at precision_ (fp32: o, in, out are the tensors of
  // LayerRefs themselves; the queries, keys and values are one [3·D_l, D] product with qkv_b its bias).
  struct LayerPacks {
    PackedLinear qkv, o, in, out;
    torch::Tensor qkv_b;
  };
  // Masks as forward() normalised them (undefined when all ones and not differentiated). hidden_keep: 1 where the
  // hidden gate is not 0 (the channels a LayerNorm normalises over), hidden_kept their number (0-dim float32 on the
  // device: a gated training step reads nothing back to the host).
  struct Masks {
    torch::Tensor heads, neurons, layers, hidden, hidden_keep, hidden_kept;
    std::vector<double> layer_values;  // a fixed (no-gradient) layer mask's values; empty: none, or differentiated
  };
  // `in` with its tensors on the model's device (the same object when they are there already).
  EncoderInput on_device(const EncoderInput& in) const;
  // `in` on the device; `given` as the caller passed it (its host masks are where values are read for free).
  EncoderOutput forward_here(const EncoderInput& in, const EncoderInput& given) const;
  torch::Tensor layer_forward(int l, const torch::Tensor& x, const torch::Tensor& ext_mask, const Masks& masks,
                              EncoderOutput& out, const EncoderInput& in) const;
  // The FFN sublayer of layer l on the attention block's output: LayerNorm(attn + W2·mask·act(W1·attn)).
  torch::Tensor ffn_block(int l, const torch::Tensor& attn, const Masks& masks, EncoderOutput& out,
                          const EncoderInput& in, bool inference) const;
  torch::Tensor embed(const EncoderInput& in, const Masks& masks) const;
  Masks check_masks(const EncoderInput& in, const EncoderInput& given) const;
  // Layer l skipped by a layer mask of 0 (no gradient): the placeholders of its EncoderOutput lists.
  void skipped_layer(int l, const torch::Tensor& x, EncoderOutput& out, const EncoderInput& in) const;
  torch::Tensor activation(torch::Tensor x, bool lrp, bool in_place) const;
  // linear(x, w, b) + residual; dropout (at rate `dropout`) on the linear when training. With `inference` (no autograd,
  // not training) in one fused pass plus an accumulating GEMM.
  // The packs from the current weights when one of them changed in place since they were made.
  void ensure_packs() const;
  // Linear `which` of layer l as this forward multiplies it: its pack in the inference forward (which made the
  // packs), else the fp32 `weight` (training, gradients, LRP).
  PackedLinear weight_of(int l, PackedLinear LayerPacks::*which, const torch::Tensor& weight, bool inference) const;
  std::vector<uint32_t> packed_weight_versions() const;
  // The pack of weight w at precision_, smoothed by the calibration's `act_max` where there is one; while
  // calibrating, the float32 pack recording its inputs into act_max (made here).
  PackedLinear pack_linear(const torch::Tensor& w, torch::Tensor& act_max) const;
  torch::Tensor linear_plus(const torch::Tensor& x, const PackedLinear& w, const torch::Tensor& b,
                            const torch::Tensor& residual, bool inference, double dropout) const;
  // LayerNorm; with masks.hidden over the kept channels only, 0 at the others.
  torch::Tensor norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool lrp,
                     const Masks* masks = nullptr) const;
  // activation(linear(x, w, b)). With `inference`, gelu or relu and AVX-512: a GEMM, then bias and
  // activation in one pass (core/kernels/epilogue.h).
  torch::Tensor ffn_in(const torch::Tensor& x, const PackedLinear& w, const torch::Tensor& b, bool inference,
                       bool lrp) const;
  // norm(linear_plus(...)). With `inference` and AVX-512: a GEMM, then bias, residual and LayerNorm in
  // one pass (core/kernels/epilogue.h).
  // With masks.hidden: norm(residual + hidden · linear(x)), unfused.
  torch::Tensor add_norm(const torch::Tensor& x, const PackedLinear& w, const torch::Tensor& b,
                         const torch::Tensor& residual, const torch::Tensor& ln_w, const torch::Tensor& ln_b,
                         bool inference, bool lrp, double dropout, const Masks& masks) const;
  const torch::Tensor& p(const std::string& name) const;

  BertConfig cfg_;
  std::map<std::string, torch::Tensor> params_;
  std::vector<LayerRefs> layers_;
  Precision precision_ = Precision::kFp32;
  int int8_weight_max_ = 0;  // 0: the int8 path's own (set_precision)
  mutable std::vector<LayerPacks> packs_;
  mutable PackedLinear pooler_;
  mutable std::vector<uint32_t> packed_versions_;
  // int8 calibration: per layer the max |input| per channel of qkv, o, in, out, then the pooler's (empty: none).
  mutable std::vector<torch::Tensor> act_max_;
  bool calibrating_ = false;
  std::shared_ptr<std::mutex> pack_mutex_ = std::make_shared<std::mutex>();
  bool training_ = false;
  torch::Device device_{torch::kCPU};  // where the parameters are (all on one device)
};

}  // namespace hp::core
