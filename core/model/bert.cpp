// BERT forward pass (see core/model/bert.h).
#include "core/model/bert.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <tuple>
#include <utility>

#include "core/model/arch.h"
#include "core/model/attention.h"
#include "core/model/bert_keys.h"
#include "core/kernels/device.h"  // to_device
#include "core/kernels/epilogue.h"
#include "core/base/errors.h"  // InternalError, CheckpointError
#include "core/kernels/gemm.h"

namespace hp::core {

torch::Tensor apply_head_mask(const torch::Tensor& ctx, const torch::Tensor& mask) {
  // ctx: [B, H, S, Dh]; mask: [H] or [B, H]
  TORCH_CHECK((mask.dim() == 1 || mask.dim() == 2) && mask.size(-1) == ctx.size(1), "head mask of shape ", mask.sizes(),
              " does not match ", ctx.size(1), " heads");
  if (mask.dim() == 2) return ctx * mask.view({mask.size(0), -1, 1, 1});
  return ctx * mask.view({1, -1, 1, 1});
}

torch::Tensor head_activation(const std::string& act, const torch::Tensor& z) {
  if (act == "tanh") return torch::tanh(z);
  if (act == "gelu") return torch::gelu(z);
  if (act == "relu") return torch::relu(z);
  throw InternalError("core/model/arch.cpp: head_act '" + act + "' is not one of tanh, gelu, relu");
}

torch::Tensor head_activation_backward(const std::string& act, const torch::Tensor& grad, const torch::Tensor& z) {
  if (act == "tanh") {
    auto y = torch::tanh(z);
    return grad * (1 - y * y);
  }
  if (act == "gelu") return at::gelu_backward(grad, z, "none");
  if (act == "relu") return grad * (z > 0).to(grad.scalar_type());
  throw InternalError("core/model/arch.cpp: head_act '" + act + "' is not one of tanh, gelu, relu");
}

torch::Tensor extended_attention_mask(const torch::Tensor& attention_mask) {
  // HF: (1 - mask) * finfo(float32).min, broadcast over heads and query positions.
  auto m = attention_mask.to(torch::kFloat32).unsqueeze(1).unsqueeze(2);
  return (1.0 - m) * std::numeric_limits<float>::lowest();
}

Bert::Bert(BertConfig cfg, std::map<std::string, torch::Tensor> params)
    : cfg_(std::move(cfg)), params_(std::move(params)) {
  for (const auto& spec : model_keys(cfg_)) {
    if (!spec.per_layer) {
      HP_CHECK(params_.count(spec.hf), "missing parameter " << spec.hf);
      continue;
    }
    for (int l = 0; l < cfg_.num_hidden_layers; ++l)
      HP_CHECK(params_.count(hf_key(spec, l)), "missing " << hf_key(spec, l));
  }
  auto get = [&](const char* name, int l) -> torch::Tensor {
    for (const auto& spec : bert_key_table())
      if (std::string(spec.name) == name) return params_.at(hf_key(spec, l));
    throw InternalError(std::string("core/model/bert.cpp: no key spec named ") + name);
  };
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    layers_.push_back(LayerRefs{get("attn.q.w", l), get("attn.q.b", l), get("attn.k.w", l), get("attn.k.b", l),
                                get("attn.v.w", l), get("attn.v.b", l), get("attn.o.w", l), get("attn.o.b", l),
                                get("attn.ln.w", l), get("attn.ln.b", l), get("ffn.in.w", l), get("ffn.in.b", l),
                                get("ffn.out.w", l), get("ffn.out.b", l), get("ffn.ln.w", l), get("ffn.ln.b", l)});
  }
  if (!params_.empty()) device_ = params_.begin()->second.device();
  for (const auto& [name, t] : params_)
    HP_CHECK(t.device() == device_, "parameter " << name << " is on " << t.device() << ", the others on " << device_);
  set_precision(Precision::kFp32);
}

Bert Bert::to(const torch::Device& device) const {
  std::map<std::string, torch::Tensor> moved;
  for (const auto& [name, t] : params_) moved.emplace(name, t.to(device));
  Bert b(cfg_, std::move(moved));
  b.set_training(training_);
  return b;
}

EncoderInput Bert::on_device(const EncoderInput& in) const {
  if (device_.is_cpu() && (!in.input_ids.defined() || in.input_ids.device().is_cpu())) return in;  // as before
  EncoderInput r = in;
  for (torch::Tensor* t : {&r.input_ids, &r.token_type_ids, &r.attention_mask, &r.head_mask, &r.neuron_mask,
                           &r.layer_mask, &r.hidden_mask, &r.start_hidden, &r.override_probs})
    *t = to_device(*t, device_);  // differentiable (a CPU gate gets its gradient); asynchronous for host batches
  return r;
}

std::vector<uint32_t> Bert::packed_weight_versions() const {
  std::vector<uint32_t> v;
  for (const auto& w : layers_)
    for (const auto* t : {&w.q_w, &w.k_w, &w.v_w, &w.q_b, &w.k_b, &w.v_b, &w.o_w, &w.in_w, &w.out_w})
      v.push_back(t->_version());
  if (cfg_.head == Head::kSequence) v.push_back(p("pooler.dense.weight")._version());
  return v;
}

void Bert::set_precision(Precision prec, int int8_weight_max) {
  std::lock_guard<std::mutex> lock(*pack_mutex_);
  precision_ = prec;
  int8_weight_max_ = int8_weight_max;
  packed_versions_.clear();  // packed by the next ensure_packs
}

PackedLinear Bert::weight_of(int l, PackedLinear LayerPacks::*which, const torch::Tensor& weight,
                             bool inference) const {
  return inference ? packs_[l].*which : PackedLinear::pack(weight, Precision::kFp32);
}

namespace {

// SmoothQuant's migration strength α. Simulated on the MRPC, SST-2 and STS-B fine-tunes at 0.3–0.6
// (bench/int8_smoothing_sim.py), 0.5 gave the int8 logits the smallest error against float32 on MRPC and SST-2 and
// the second smallest (to 0.4) on STS-B.
constexpr double kSmoothAlpha = 0.5;

// The attention products take bf16 operands (core/kernels/attention_kernel.h) where the linears feeding them run
// natively below fp32: at int8, or at bf16 where bf16 is not run as fp32.
bool lowp_attention(Precision linears) {
  return linears == Precision::kInt8 || (linears == Precision::kBf16 && lowp_native(Precision::kBf16));
}

}  // namespace

// s_k = max|x_k|^α / max_n |w_nk|^(1−α); 1 where a channel gives no finite positive factor, and everywhere for a
// linear with no output rows (a slimmed sublayer with no head or neuron left: nothing to balance against).
torch::Tensor smoothing_factors(const torch::Tensor& w, const torch::Tensor& act_max) {
  if (w.size(0) == 0) return torch::ones({w.size(1)}, torch::kFloat);
  const auto s =
      act_max.clamp_min(1e-5).pow(kSmoothAlpha) / w.abs().amax(0).clamp_min(1e-5).pow(1.0 - kSmoothAlpha);
  return torch::where(torch::isfinite(s) & (s > 0), s, torch::ones_like(s)).contiguous();
}

const PackedLinear& Bert::inference_pack(int l, int which) const {
  ensure_packs();
  HP_CHECK(l >= 0 && l < static_cast<int>(packs_.size()) && which >= 0 && which < 4,
           "inference_pack(" << l << ", " << which << ")");
  const LayerPacks& p = packs_[l];
  return which == 0 ? p.qkv : which == 1 ? p.o : which == 2 ? p.in : p.out;
}

PackedLinear Bert::pack_linear(const torch::Tensor& w, torch::Tensor& act_max) const {
  if (calibrating_) {
    act_max = torch::zeros({w.size(1)}, torch::kFloat);
    auto pl = PackedLinear::pack(w, Precision::kFp32);
    pl.observe(act_max);
    return pl;
  }
  const bool smooth = precision_ == Precision::kInt8 && act_max.defined();
  return PackedLinear::pack(w, precision_, smooth ? smoothing_factors(w, act_max) : torch::Tensor(), int8_weight_max_);
}

void Bert::ensure_packs() const {
  std::lock_guard<std::mutex> lock(*pack_mutex_);
  auto versions = packed_weight_versions();
  if (versions == packed_versions_ && packs_.size() == layers_.size()) return;
  const size_t n = 4 * layers_.size() + 1;
  if (calibrating_) act_max_.assign(n, torch::Tensor());  // filled by this pass's forwards
  torch::Tensor none;  // not calibrated: no smoothing
  const auto slot = [&](size_t i) -> torch::Tensor& { return act_max_.empty() ? none : act_max_[i]; };
  packs_.clear();
  for (size_t l = 0; l < layers_.size(); ++l) {
    const auto& w = layers_[l];
    packs_.push_back(LayerPacks{pack_linear(torch::cat({w.q_w, w.k_w, w.v_w}), slot(4 * l)),
                                pack_linear(w.o_w, slot(4 * l + 1)), pack_linear(w.in_w, slot(4 * l + 2)),
                                pack_linear(w.out_w, slot(4 * l + 3)), torch::cat({w.q_b, w.k_b, w.v_b})});
  }
  if (cfg_.head == Head::kSequence) pooler_ = pack_linear(p("pooler.dense.weight"), slot(n - 1));
  packed_versions_ = std::move(versions);
}

void Bert::calibrate_int8(const std::function<void()>& feed) {
  const auto set = [this](bool on) {
    std::lock_guard<std::mutex> lock(*pack_mutex_);
    calibrating_ = on;
    packed_versions_.clear();  // packed again by the next forward: recording, or from the calibration
  };
  set(true);
  try {
    feed();
  } catch (...) {
    act_max_.clear();
    set(false);
    throw;
  }
  set(false);
}

const torch::Tensor& Bert::p(const std::string& name) const { return params_.at(name); }

torch::Tensor Bert::activation(torch::Tensor x, bool lrp, bool in_place) const {
  const std::string& act = cfg_.hidden_act;
  const bool tanh_form = act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast";
  torch::Tensor y;
  if (in_place && (act == "gelu" || tanh_form)) return torch::gelu_(x, tanh_form ? "tanh" : "none");
  if (in_place && act == "relu") return torch::relu_(x);
  if (act == "gelu") y = torch::gelu(x);  // exact erf form, as HF "gelu"
  else if (tanh_form) y = torch::gelu(x, "tanh");
  else if (act == "relu") y = torch::relu(x);
  else throw CheckpointError("config.json: hidden_act '" + act + "' is not supported; " + kSupportedActivations);
  if (!lrp) return y;
  // LRP: y = x · gate(x) with the gate act(x)/x held constant (its value at 0 is the slope there).
  auto gate = torch::where(x.abs() > 1e-12, y / x, torch::full_like(x, act == "relu" ? 0.0 : 0.5));
  return x * gate.detach();
}

torch::Tensor Bert::norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool lrp,
                         const Masks* masks) const {
  if (masks && masks->hidden.defined()) {
    // Over the kept channels only (CoFi's LayerNorm over the remaining hidden dimensions), 0 at the others.
    const auto& keep = masks->hidden_keep;
    auto centred = (x - (x * keep).sum(-1, true) / masks->hidden_kept) * keep;
    auto sigma = (centred.pow(2).sum(-1, true) / masks->hidden_kept + cfg_.layer_norm_eps).sqrt();
    return centred / (lrp ? sigma.detach() : sigma) * w + b * keep;
  }
  if (!lrp) return torch::layer_norm(x, {x.size(-1)}, w, b, cfg_.layer_norm_eps);
  // LRP: centring is linear; the scale 1/σ is held constant (Ali et al. 2022's LN rule).
  auto centred = x - x.mean(-1, true);
  auto sigma = (centred.pow(2).mean(-1, true) + cfg_.layer_norm_eps).sqrt();
  return centred / sigma.detach() * w + b;
}

torch::Tensor position_ids(const torch::Tensor& input_ids, Positions from, int pad) {
  const auto B = input_ids.size(0), S = input_ids.size(1);
  if (from == Positions::kFromZero)
    return torch::arange(S, input_ids.options().dtype(torch::kLong)).unsqueeze(0).expand({B, S});
  // RoBERTa (HF create_position_ids_from_input_ids): pad + 1, pad + 2, … over the real tokens, pad at padding.
  auto real = input_ids.ne(pad).to(torch::kLong);
  return torch::cumsum(real, 1) * real + pad;
}

torch::Tensor Bert::embed(const EncoderInput& in0) const {
  const EncoderInput in = on_device(in0);
  return embed(in, check_masks(in, in0));
}

torch::Tensor Bert::embed(const EncoderInput& in, const Masks& masks) const {
  const auto B = in.input_ids.size(0), S = in.input_ids.size(1);
  const Arch& arch = arch_of(cfg_.model_type);
  auto positions = position_ids(in.input_ids, arch.positions, cfg_.pad_token_id);
  // word + type + position, in HF BERT's order (float sums are not associative).
  auto x = torch::embedding(p("embeddings.word_embeddings.weight"), in.input_ids);
  if (arch.token_types) {
    auto types = in.token_type_ids.defined() ? in.token_type_ids : torch::zeros({B, S}, in.input_ids.options().dtype(torch::kLong));
    x = x + torch::embedding(p("embeddings.token_type_embeddings.weight"), types);
  }
  x = x + torch::embedding(p("embeddings.position_embeddings.weight"), positions);
  const bool projected = cfg_.embedding_width() != cfg_.hidden_size;  // ELECTRA: up to the encoder's width
  x = norm(x, p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias"), in.lrp_rules,
           projected ? nullptr : &masks);
  x = torch::dropout(x, cfg_.hidden_dropout_prob, training_);
  // The projection in the residual stream's dtype: under bf16 autocast the linear returns bf16.
  if (projected) x = torch::linear(x, p("embeddings_project.weight"), p("embeddings_project.bias")).to(x.scalar_type());
  return masks.hidden.defined() ? x * masks.hidden : x;
}

torch::Tensor Bert::layer_forward(int l, const torch::Tensor& x, const torch::Tensor& ext_mask, const Masks& masks,
                                  EncoderOutput& out, const EncoderInput& in) const {
  const torch::Tensor& head_mask = masks.heads;
  const LayerRefs& w = layers_[l];
  const auto B = x.size(0), S = x.size(1);
  const int H = cfg_.heads_in_layer(l), Dh = cfg_.head_dim();
  // The last layer with cls_only: only position 0 is computed as a query (the classifier reads [CLS]).
  const bool cls_row = in.cls_only && l == cfg_.num_hidden_layers - 1;
  const torch::Tensor xq = cls_row ? x.narrow(1, 0, 1) : x;  // queries and the residual: [B, Sq, D]
  const auto Sq = xq.size(1);
  // No autograd and no training: temporaries may be overwritten (in-place activation, fused residual).
  const bool cpu = device_.is_cpu();  // the packs, fused epilogues and attention kernels are the CPU's
  const bool inference = cpu && !training_ && !torch::GradMode::is_enabled() && !in.lrp_rules;
  auto linear = [inference](const torch::Tensor& t, const torch::Tensor& weight, const torch::Tensor& bias) {
    return inference ? linear_no_grad(t, weight, bias) : linear_frozen(t, weight, bias);  // core/kernels/gemm.h
  };
  torch::Tensor attn;
  if (H == 0) {
    // No heads left: the attention block adds only the output bias before the residual LayerNorm.
    attn = norm(xq + (masks.hidden.defined() ? w.o_b * masks.hidden : w.o_b), w.ln1_w, w.ln1_b, in.lrp_rules, &masks);
    if (in.want_attention) out.attentions.push_back(torch::zeros({B, 0, Sq, S}, x.options()));
    if (in.want_context) out.contexts.push_back(torch::zeros({B, 0, Sq, Dh}, x.options()));
  } else {
    auto heads = [&](const torch::Tensor& t) {
      return t.view({B, t.size(1), H, Dh}).transpose(1, 2);
    };  // [B, H, S, Dh]
    auto values = [&] { return linear(x, w.v_w, w.v_b); };  // [B, S, D]
    torch::Tensor probs, ctx;
    if (l == in.override_layer) {
      TORCH_CHECK(in.override_probs.sizes() == torch::IntArrayRef({B, H, S, S}), "override_probs must be [", B, ", ", H,
                  ", ", S, ", ", S, "], got ", in.override_probs.sizes());
      probs = cls_row ? in.override_probs.narrow(2, 0, 1) : in.override_probs;
      if (in.want_attention) out.attentions.push_back(probs);
      ctx = heads(probs_times_values(probs, values()));
    } else if (cpu && !training_ && !torch::GradMode::is_enabled()) {
      // Queries, keys and values from one product at the model's precision (with cls_only the last layer
      // keeps the [CLS] query only).
      const LayerPacks& pk = packs_[l];
      const auto qkv = pk.qkv.linear(x, pk.qkv_b).view({B, S, 3, H, Dh});
      auto q = qkv.select(2, 0).transpose(1, 2).narrow(2, 0, Sq);
      torch::Tensor ctx_bshd;  // [B, Sq, H, Dh]
      std::tie(probs, ctx_bshd) =
          attention_no_grad(q, qkv.select(2, 1).transpose(1, 2), qkv.select(2, 2).transpose(1, 2), ext_mask,
                            in.want_attention, lowp_attention(pk.qkv.precision()));
      ctx = ctx_bshd.transpose(1, 2);  // [B, H, Sq, Dh] view; the reshape below is then free
      if (in.want_attention) out.attentions.push_back(probs);
    } else if (cpu && !training_ && !in.lrp_rules && !in.want_attention) {
      // Gradients without dropout (criteria): keys and values from one linear, the parallel attention
      // core with its closed-form backward (core/model/attention.h).
      auto kv = linear_frozen(x, torch::cat({w.k_w, w.v_w}), torch::cat({w.k_b, w.v_b}));
      ctx = heads(attention_autograd(linear_frozen(xq, w.q_w, w.q_b), kv, ext_mask, H));
    } else if (!cpu && !in.lrp_rules && !in.want_attention) {
      ctx = sdpa(heads(linear_frozen(xq, w.q_w, w.q_b)), heads(linear_frozen(x, w.k_w, w.k_b)), heads(values()),
                 ext_mask, training_ ? cfg_.attention_probs_dropout_prob : 0.0);
    } else {
      auto q = heads(linear_frozen(xq, w.q_w, w.q_b));
      auto k = heads(linear_frozen(x, w.k_w, w.k_b));
      auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(Dh));  // [B, H, Sq, S]
      probs = torch::softmax(scores + ext_mask, -1);
      if (in.want_attention) out.attentions.push_back(probs);
      if (in.lrp_rules) probs = probs.detach();  // LRP: relevance flows through the values only
      probs = torch::dropout(probs, cfg_.attention_probs_dropout_prob, training_);
      ctx = torch::matmul(probs, heads(values()));  // [B, H, Sq, Dh]
    }
    if (in.want_context) out.contexts.push_back(ctx);
    if (head_mask.defined())
      ctx = apply_head_mask(
          ctx, head_mask.dim() == 3 ? head_mask.select(1, l).narrow(1, 0, H) : head_mask[l].narrow(0, 0, H));
    ctx = ctx.transpose(1, 2).reshape({B, Sq, H * Dh});
    // DistilBERT drops nothing out of its attention output (core/model/arch.h).
    const double attn_dropout = arch_of(cfg_.model_type).attention_output_dropout ? cfg_.hidden_dropout_prob : 0.0;
    attn = add_norm(ctx, weight_of(l, &LayerPacks::o, w.o_w, inference), w.o_b, xq, w.ln1_w, w.ln1_b, inference,
                    in.lrp_rules, attn_dropout, masks);
  }
  return ffn_block(l, attn, masks, out, in, inference);
}

torch::Tensor Bert::ffn_block(int l, const torch::Tensor& attn, const Masks& masks, EncoderOutput& out,
                              const EncoderInput& in, bool inference) const {
  const torch::Tensor& neuron_mask = masks.neurons;
  const LayerRefs& w = layers_[l];
  const int I = cfg_.ffn_width(l);
  const bool lrp = in.lrp_rules;
  if (in.want_ffn) out.ffn_inputs.push_back(attn);
  // No neurons left: the FFN block adds only its output bias before the residual LayerNorm.
  if (I == 0) {
    if (in.want_ffn) out.ffn_acts.push_back(torch::zeros({attn.size(0), attn.size(1), 0}, attn.options()));
    return norm(attn + (masks.hidden.defined() ? w.out_b * masks.hidden : w.out_b), w.ln2_w, w.ln2_b, lrp, &masks);
  }
  auto inter = ffn_in(attn, weight_of(l, &LayerPacks::in, w.in_w, inference), w.in_b, inference, lrp);  // [B, S, I]
  if (in.want_ffn) out.ffn_acts.push_back(inter);
  if (neuron_mask.defined())
    inter = inter * (neuron_mask.dim() == 3 ? neuron_mask.select(1, l).narrow(1, 0, I).unsqueeze(1)
                                            : neuron_mask[l].narrow(0, 0, I));
  return add_norm(inter, weight_of(l, &LayerPacks::out, w.out_w, inference), w.out_b, attn, w.ln2_w, w.ln2_b, inference,
                  lrp, cfg_.hidden_dropout_prob, masks);
}

namespace {

// The fused epilogues (core/kernels/epilogue.h) take float32 CPU tensors; the vectors (biases, LayerNorm) are read
// through raw pointers and must be contiguous. Activations may be strided views (the [CLS] rows).
// x as 2-D rows [*, K] with unit column stride (a view where it can be), as PackedLinear::apply takes them.
torch::Tensor unit_stride_rows(const torch::Tensor& x) {
  auto rows = x.reshape({-1, x.size(-1)});
  return rows.stride(1) == 1 ? rows : rows.contiguous();
}

bool epilogue_ready(std::initializer_list<const torch::Tensor*> tensors) {
  if (!epilogue_kernels_available()) return false;
  for (const auto* t : tensors)
    if (t->scalar_type() != torch::kFloat || !t->device().is_cpu() || (t->dim() == 1 && !t->is_contiguous()))
      return false;
  return true;
}

}  // namespace

torch::Tensor Bert::ffn_in(const torch::Tensor& x, const PackedLinear& pw, const torch::Tensor& b, bool inference,
                           bool lrp) const {
  const std::string& act = cfg_.hidden_act;
  const torch::Tensor& w = pw.weight();
  if (!inference || (act != "gelu" && act != "relu") || !epilogue_ready({&x, &w, &b}))
    return activation(inference ? pw.linear(x, b) : linear_frozen(x, w, b), lrp, inference);
  // The GEMM writes x·wᵀ; one pass then adds the bias and applies the activation.
  auto sizes = x.sizes().vec();
  sizes.back() = w.size(0);
  auto out = torch::empty(sizes, x.options());
  auto rows = out.view({-1, w.size(0)});
  float* y = rows.data_ptr<float>();
  const float* bias = b.data_ptr<float>();
  const int64_t n = rows.size(1), ldy = rows.stride(0);
  const auto kind = act == "gelu" ? EpilogueActivation::kGeluErf : EpilogueActivation::kRelu;
  pw.apply(rows, unit_stride_rows(x), false, [=](int64_t begin, int64_t end) {
    bias_activation_rows(y + begin * ldy, end - begin, n, ldy, bias, kind);
  });
  return out;
}

torch::Tensor Bert::add_norm(const torch::Tensor& x, const PackedLinear& pw, const torch::Tensor& b,
                             const torch::Tensor& residual, const torch::Tensor& ln_w, const torch::Tensor& ln_b,
                             bool inference, bool lrp, double dropout, const Masks& masks) const {
  const torch::Tensor& w = pw.weight();
  if (masks.hidden.defined()) {
    auto y = inference ? pw.linear(x, b) : torch::dropout(linear_frozen(x, w, b), dropout, training_);
    return norm(y * masks.hidden + residual, ln_w, ln_b, lrp, &masks);
  }
  if (!inference || !epilogue_ready({&x, &residual, &w, &b, &ln_w, &ln_b}))
    return norm(linear_plus(x, pw, b, residual, inference, dropout), ln_w, ln_b, lrp);
  // The GEMM writes x·wᵀ; one pass then adds bias and residual and normalises each row.
  const auto D = w.size(0);
  auto res = residual.reshape({-1, D});  // a view, also for the [CLS] rows of a cls_only last layer
  if (res.stride(1) != 1) res = res.contiguous();
  auto out = torch::empty(residual.sizes(), residual.options());
  auto rows = out.view({-1, D});
  float* y = rows.data_ptr<float>();
  const float *r = res.data_ptr<float>(), *bias = b.data_ptr<float>(), *gamma = ln_w.data_ptr<float>(),
              *beta = ln_b.data_ptr<float>();
  const int64_t ldr = res.stride(0);
  const auto eps = static_cast<float>(cfg_.layer_norm_eps);
  pw.apply(rows, unit_stride_rows(x), false, [=](int64_t begin, int64_t end) {
    bias_residual_layer_norm_rows(y + begin * D, D, r + begin * ldr, ldr, bias, gamma, beta, end - begin, D, eps);
  });
  return out;
}

torch::Tensor Bert::linear_plus(const torch::Tensor& x, const PackedLinear& pw, const torch::Tensor& b,
                                const torch::Tensor& residual, bool inference, double dropout) const {
  const torch::Tensor& w = pw.weight();
  if (!inference) return torch::dropout(linear_frozen(x, w, b), dropout, training_) + residual;
  // One pass writes residual + bias; the GEMM then accumulates into it (beta = 1). torch::linear would
  // first broadcast the bias into a fresh output and the sum would take another pass.
  auto out = residual + b;
  auto rows = out.view({-1, w.size(0)});
  pw.apply(rows, unit_stride_rows(x), true);
  return out;
}

namespace {

// The values of a mask that takes no gradient, read where reading costs nothing: the caller's host tensor (`given`,
// before it moved to the model's device) or, on the CPU, the mask itself; undefined where only a GPU copy exists (a
// read there would make the host wait for the GPU in every step).
torch::Tensor host_values(const torch::Tensor& m, const torch::Tensor& given) {
  if (!m.defined() || m.requires_grad()) return {};
  if (given.defined() && given.device().is_cpu() && !given.requires_grad()) return given;
  return m.device().is_cpu() ? m : torch::Tensor();
}

// A mask of ones changes nothing: its multiply is skipped when the host can tell without waiting.
bool all_ones(const torch::Tensor& m, const torch::Tensor& given) {
  const torch::Tensor v = host_values(m, given);
  return v.defined() && v.eq(1).all().item<bool>();
}

}  // namespace

Bert::Masks Bert::check_masks(const EncoderInput& in, const EncoderInput& given) const {
  const auto B = in.input_ids.size(0);
  auto check = [&](torch::Tensor m, const torch::Tensor& host, int width, const char* name) {
    if (!m.defined()) return m;
    const auto d = m.dim();
    TORCH_CHECK(
        (d == 2 || (d == 3 && m.size(0) == B)) && m.size(d - 2) == cfg_.num_hidden_layers && m.size(d - 1) >= width,
        name, " must be [", cfg_.num_hidden_layers, ", ", width, "] or [B, L, ", width, "], got ", m.sizes());
    return all_ones(m, host) ? torch::Tensor() : m;
  };
  Masks m{check(in.head_mask, given.head_mask, cfg_.max_heads(), "head_mask"),
          check(in.neuron_mask, given.neuron_mask, cfg_.max_ffn_width(), "neuron_mask")};
  if (in.layer_mask.defined()) {
    TORCH_CHECK(in.layer_mask.dim() == 1 && in.layer_mask.size(0) == cfg_.num_hidden_layers, "layer_mask must be [",
                cfg_.num_hidden_layers, "], got ", in.layer_mask.sizes());
    m.layers = in.layer_mask;
    if (!m.layers.requires_grad()) {
      // Fixed: which layers to skip is decided on the host, from a host copy (a GPU-only mask is read once here).
      torch::Tensor v = host_values(m.layers, given.layer_mask);
      if (!v.defined()) v = m.layers.cpu();
      v = v.to(torch::kFloat64).contiguous();
      m.layer_values.assign(v.data_ptr<double>(), v.data_ptr<double>() + v.numel());
      if (std::all_of(m.layer_values.begin(), m.layer_values.end(), [](double x) { return x == 1; }))
        m.layers = torch::Tensor(), m.layer_values.clear();
    }
  }
  m.hidden = in.hidden_mask;
  if (m.hidden.defined()) {
    TORCH_CHECK(m.hidden.dim() == 1 && m.hidden.size(0) == cfg_.hidden_size, "hidden_mask must be [",
                cfg_.hidden_size, "], got ", m.hidden.sizes());
    if (all_ones(m.hidden, given.hidden_mask)) {
      m.hidden = torch::Tensor();
      return m;
    }
    m.hidden = m.hidden.to(torch::kFloat32);
    m.hidden_keep = m.hidden.detach().ne(0).to(torch::kFloat32);
    m.hidden_kept = m.hidden_keep.sum();
    // Checked where reading it costs nothing (on a GPU, a mask without channels gives NaN outputs).
    if (device_.is_cpu()) TORCH_CHECK(m.hidden_kept.item<double>() > 0, "hidden_mask removes every hidden channel");
  }
  return m;
}

void Bert::skipped_layer(int l, const torch::Tensor& x, EncoderOutput& out, const EncoderInput& in) const {
  const auto B = x.size(0), S = x.size(1);
  const auto Sq = in.cls_only && l == cfg_.num_hidden_layers - 1 ? 1 : S;
  if (in.want_attention) out.attentions.push_back(torch::zeros({B, 0, Sq, S}, x.options()));
  if (in.want_context) out.contexts.push_back(torch::zeros({B, 0, Sq, cfg_.head_dim()}, x.options()));
  if (in.want_ffn) out.ffn_inputs.push_back(x), out.ffn_acts.push_back(torch::zeros({B, S, 0}, x.options()));
}

EncoderOutput Bert::forward(const EncoderInput& in) const {
  if (in.cls_only && cfg_.head == Head::kToken) {  // a token head reads every position
    EncoderInput every = in;
    every.cls_only = false;
    return forward_here(on_device(every), every);
  }
  return forward_here(on_device(in), in);
}

EncoderOutput Bert::forward_here(const EncoderInput& in, const EncoderInput& given) const {
  TORCH_CHECK(in.input_ids.dim() == 2, "input_ids must be [B, S], got ", in.input_ids.sizes());
  const auto B = in.input_ids.size(0), S = in.input_ids.size(1);
  if (S > cfg_.max_position_embeddings)
    throw InputError("sequence length " + std::to_string(S) + " exceeds max_position_embeddings " +
                     std::to_string(cfg_.max_position_embeddings) + "; lower data.max_seq_len");
  TORCH_CHECK(!(in.cls_only && in.want_context),
              "cls_only computes only [CLS] in the last layer: it excludes want_context");
  const Masks masks = check_masks(in, given);
  const bool cpu = device_.is_cpu();  // the packs, fused epilogues and attention kernels are the CPU's
  if (cpu && !training_ && !torch::GradMode::is_enabled()) ensure_packs();  // the paths that multiply through packs
  auto mask = in.attention_mask.defined() ? in.attention_mask : torch::ones({B, S}, in.input_ids.options());
  auto ext = extended_attention_mask(mask);

  EncoderOutput out;
  const int first = in.start_layer;
  TORCH_CHECK(first >= 0 && first <= cfg_.num_hidden_layers, "start_layer ", first, " out of range");
  torch::Tensor x;
  if (first > 0 || in.start_hidden.defined()) {
    TORCH_CHECK(in.start_hidden.defined() && in.start_hidden.size(0) == B && in.start_hidden.size(1) == S,
                "start_hidden must be [", B, ", ", S, ", D] when start_layer > 0");
    x = in.start_hidden;
  } else {
    x = embed(in, masks);
  }
  if (in.want_hidden) out.hidden_states.push_back(x);
  const int end = in.end_layer < 0 ? cfg_.num_hidden_layers : in.end_layer;
  TORCH_CHECK(end >= first && end <= cfg_.num_hidden_layers, "end_layer ", in.end_layer, " out of range");
  for (int l = first; l < end; ++l) {
    const torch::Tensor z = masks.layers.defined() ? masks.layers[l] : torch::Tensor();
    const double fixed = !z.defined() ? 1.0 : masks.layer_values.empty() ? -1.0 : masks.layer_values[l];  // -1: blend
    if (fixed == 0) {
      skipped_layer(l, x, out, in);  // the identity
    } else if (fixed != 1) {
      auto y = layer_forward(l, x, ext, masks, out, in);
      const auto base = y.size(1) == x.size(1) ? x : x.narrow(1, 0, y.size(1));  // a cls_only last layer
      x = base + z * (y - base);
    } else {
      x = layer_forward(l, x, ext, masks, out, in);
    }
    if (in.want_hidden) out.hidden_states.push_back(x);
  }
  out.last_hidden = x;
  if (end < cfg_.num_hidden_layers) return out;
  const double cls_dropout = cfg_.classifier_dropout >= 0 ? cfg_.classifier_dropout : cfg_.hidden_dropout_prob;
  if (cfg_.head == Head::kToken) {  // a tag per token: [B, S, C]
    out.logits = torch::linear(torch::dropout(x, cls_dropout, training_), p("classifier.weight"), p("classifier.bias"));
    return out;
  }
  // At fp32 the pooler stays ATen's linear (a [B, D] product); at bf16 or int8 it is packed like the encoder's.
  const bool packed = cpu && (precision_ != Precision::kFp32 || calibrating_) && !training_ &&
                      !torch::GradMode::is_enabled() && !in.lrp_rules;
  // The classification head (core/model/arch.h): act(dense(x0)), then the output layer; BERT's pooler is its
  // dense layer, RoBERTa's and ELECTRA's classifier.dense, DistilBERT's pre_classifier.
  const Arch& arch = arch_of(cfg_.model_type);
  auto x0 = x.select(1, 0);
  if (arch.dropout_before_head) x0 = torch::dropout(x0, cls_dropout, training_);
  auto pre_pool = packed ? pooler_.linear(x0, p("pooler.dense.bias"))
                         : torch::linear(x0, p("pooler.dense.weight"), p("pooler.dense.bias"));
  out.pooled = head_activation(arch.head_act, pre_pool);
  if (in.lrp_rules)  // LRP: act(z) = z · (act(z)/z) with that ratio held constant
    out.pooled =
        pre_pool * torch::where(pre_pool.abs() > 1e-12, out.pooled / pre_pool, torch::ones_like(pre_pool)).detach();
  out.logits =
      torch::linear(torch::dropout(out.pooled, cls_dropout, training_), p("classifier.weight"), p("classifier.bias"));
  return out;
}

}  // namespace hp::core
