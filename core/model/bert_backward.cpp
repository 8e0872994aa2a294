// ∂loss/∂(attention probabilities) by a hand-written backward (see Bert::attention_grads in core/model/bert.h).
#include <tuple>
#include <torch/autograd.h>
#include <torch/utils.h>

#include "core/model/attention.h"
#include "core/model/bert.h"
#include "core/base/errors.h"
#include "core/kernels/gemm.h"

namespace hp::core {

namespace {

// What one layer's backward needs from its forward. Sq = the query rows carried past attention (all S,
// or 1 in the last layer, whose [CLS] row is all the loss reads).
struct LayerTape {
  torch::Tensor w_qkv;  // the query, key and value weights stacked: [3·H·Dh, D]
  torch::Tensor q, k, v;  // [B, H, S, Dh] views into one [B, S, 3, H, Dh] projection
  torch::Tensor probs;  // [B, H, S, S]
  torch::Tensor u1, mean1, rstd1;  // attention block before its LayerNorm [B, Sq, D], and the LN statistics
  torch::Tensor z;  // FFN pre-activation [B, Sq, I]
  torch::Tensor u2, mean2, rstd2;  // FFN block before its LayerNorm, and the statistics
};

torch::Tensor activation_backward(const std::string& act, const torch::Tensor& grad, const torch::Tensor& z) {
  if (act == "gelu") return at::gelu_backward(grad, z, "none");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") return at::gelu_backward(grad, z, "tanh");
  if (act == "relu") return grad * (z > 0).to(grad.scalar_type());
  throw CheckpointError("config.json: hidden_act '" + act + "' is not supported; " + kSupportedActivations);
}

torch::Tensor activation_forward(const std::string& act, const torch::Tensor& z) {
  if (act == "gelu") return torch::gelu(z);
  if (act == "relu") return torch::relu(z);
  return torch::gelu(z, "tanh");  // the tanh forms (activation_backward rejects anything else first)
}

// A [B, S, ...] tensor holding `rows` (its first Sq rows) and zeros after.
torch::Tensor pad_rows(const torch::Tensor& rows, int64_t S) {
  if (rows.size(1) == S) return rows;
  auto sizes = rows.sizes().vec();
  sizes[1] = S;
  auto out = torch::zeros(sizes, rows.options());
  out.narrow(1, 0, rows.size(1)).copy_(rows);
  return out;
}

// The FFN block of the tape on the attention block's output h1 [B, Sq, D]: t.z and t.u2 (before the LayerNorm).
// A 0-neuron FFN (I = 0) leaves the block its output bias.
void ffn_forward(LayerTape& t, const torch::Tensor& h1, const torch::Tensor& in_w, const torch::Tensor& in_b,
                 const torch::Tensor& out_w, const torch::Tensor& out_b, const std::string& act) {
  t.z = linear_no_grad(h1, in_w, in_b);  // [B, Sq, I]
  t.u2 = h1 + out_b;  // a new contiguous tensor: the GEMM below accumulates into it
  const auto rows = h1.size(0) * h1.size(1);
  auto out = t.u2.view({rows, h1.size(2)});
  if (t.z.size(-1) > 0) accumulate_linear(out, activation_forward(act, t.z).view({rows, t.z.size(-1)}), out_w);
}

// ∂loss/∂h1 from ∂loss/∂u2: the residual path plus the FFN's (none with 0 neurons).
torch::Tensor ffn_backward(const LayerTape& t, const torch::Tensor& du2, const torch::Tensor& in_w,
                           const torch::Tensor& out_w, const std::string& act) {
  if (t.z.size(-1) == 0) return du2;
  return du2 + linear_input_grad(activation_backward(act, linear_input_grad(du2, out_w), t.z), in_w);
}

// Pooler and classifier on the last hidden state's [CLS] row (filling out.last_hidden, pooled and logits), then the loss's
// gradient back to that row: [B, 1, D].
torch::Tensor classifier_forward_backward(EncoderOutput& out, const std::string& head_act,
                                          const torch::Tensor& last_hidden, const torch::Tensor& pool_w,
                                          const torch::Tensor& pool_b, const torch::Tensor& cls_w,
                                          const torch::Tensor& cls_b,
                                          const std::function<torch::Tensor(const torch::Tensor&)>& dloss) {
  out.last_hidden = last_hidden;
  const auto z = torch::linear(last_hidden.select(1, 0), pool_w, pool_b);
  out.pooled = head_activation(head_act, z);
  out.logits = torch::linear(out.pooled, cls_w, cls_b);
  torch::Tensor dlogits;
  {
    torch::AutoGradMode grad_mode(true);  // dloss may differentiate the loss with autograd
    dlogits = dloss(out.logits);
  }
  TORCH_CHECK(dlogits.sizes() == out.logits.sizes(), "attention_grads: dloss returned ", dlogits.sizes(),
              " for logits ", out.logits.sizes());
  return head_activation_backward(head_act, dlogits.mm(cls_w), z).mm(pool_w).unsqueeze(1);
}

// Plain inputs: no masks, no start layer or hidden, no overridden probabilities, no LRP rules.
bool plain_input(const EncoderInput& in) {
  return !in.head_mask.defined() && !in.neuron_mask.defined() && !in.layer_mask.defined() &&
         !in.hidden_mask.defined() && in.start_layer == 0 && !in.start_hidden.defined() && in.override_layer < 0 &&
         !in.lrp_rules;
}

}  // namespace

Bert::AttentionGrads Bert::attention_grads(const EncoderInput& in,
                                           const std::function<torch::Tensor(const torch::Tensor&)>& dloss) const {
  TORCH_CHECK(!training_, "attention_grads: the model must be in eval mode (no dropout)");
  TORCH_CHECK(plain_input(in), "attention_grads: plain inputs only (no masks, start layer, override or LRP rules)");
  // Off the CPU, and under a token head (whose loss reads every row), autograd does it.
  if (!device_.is_cpu() || cfg_.head == Head::kToken) return attention_grads_autograd(in, dloss);
  torch::NoGradGuard no_grad;
  const auto B = in.input_ids.size(0), S = in.input_ids.size(1);
  const int L = cfg_.num_hidden_layers, Dh = cfg_.head_dim();
  const std::vector<int64_t> D = {cfg_.hidden_size};
  const double eps = cfg_.layer_norm_eps;
  const auto ext =
      extended_attention_mask(in.attention_mask.defined() ? in.attention_mask : torch::ones({B, S}, torch::kLong));

  // Forward, recording the tape.
  AttentionGrads r;
  std::vector<LayerTape> tape(L);
  torch::Tensor x = embed(in);
  for (int l = 0; l < L; ++l) {
    const LayerRefs& w = layers_[l];
    LayerTape& t = tape[l];
    const int H = cfg_.heads_in_layer(l);
    const int64_t Sq = l == L - 1 ? 1 : S;
    const auto xq = x.narrow(1, 0, Sq);
    t.u1 = xq + w.o_b;  // a new contiguous tensor: the GEMM below accumulates into it
    if (H == 0) {
      t.probs = torch::zeros({B, 0, S, S});
    } else {
      // Queries, keys and values from one GEMM (and their input gradient from one below).
      t.w_qkv = torch::cat({w.q_w, w.k_w, w.v_w});
      const auto qkv = linear_no_grad(x, t.w_qkv, torch::cat({w.q_b, w.k_b, w.v_b})).view({B, S, 3, H, Dh});
      t.q = qkv.select(2, 0).transpose(1, 2);
      t.k = qkv.select(2, 1).transpose(1, 2);
      t.v = qkv.select(2, 2).transpose(1, 2);
      torch::Tensor ctx;  // [B, S, H, Dh]
      std::tie(t.probs, ctx) = attention_no_grad(t.q, t.k, t.v, ext, true);
      auto rows = t.u1.view({B * Sq, -1});
      accumulate_linear(rows, ctx.narrow(1, 0, Sq).reshape({B * Sq, H * Dh}), w.o_w);
    }
    torch::Tensor h1;
    std::tie(h1, t.mean1, t.rstd1) = at::native_layer_norm(t.u1, D, w.ln1_w, w.ln1_b, eps);
    ffn_forward(t, h1, w.in_w, w.in_b, w.out_w, w.out_b, cfg_.hidden_act);
    std::tie(x, t.mean2, t.rstd2) = at::native_layer_norm(t.u2, D, w.ln2_w, w.ln2_b, eps);
    r.out.attentions.push_back(t.probs);
  }
  // Backward: classifier and pooler, then each layer from the top down to layer 0's probabilities.
  auto dy = classifier_forward_backward(r.out, arch_of(cfg_.model_type).head_act, x, p("pooler.dense.weight"),
                                        p("pooler.dense.bias"), p("classifier.weight"), p("classifier.bias"), dloss);
  r.grads.resize(L);
  for (int l = L - 1; l >= 0; --l) {
    const LayerRefs& w = layers_[l];
    const LayerTape& t = tape[l];
    const int H = cfg_.heads_in_layer(l);
    const int64_t Sq = t.u1.size(1);
    auto du2 = std::get<0>(
        at::native_layer_norm_backward(dy, t.u2, D, t.mean2, t.rstd2, w.ln2_w, w.ln2_b, {true, false, false}));
    const auto dh1 = ffn_backward(t, du2, w.in_w, w.out_w, cfg_.hidden_act);
    auto du1 = std::get<0>(
        at::native_layer_norm_backward(dh1, t.u1, D, t.mean1, t.rstd1, w.ln1_w, w.ln1_b, {true, false, false}));
    if (H == 0) {
      r.grads[l] = torch::zeros({B, 0, S, S});
      dy = pad_rows(du1, S);
      continue;
    }
    const auto dctx = linear_input_grad(du1, w.o_w);  // [B, Sq, H·Dh]
    const auto q = t.q.narrow(2, 0, Sq), pq = t.probs.narrow(2, 0, Sq);
    if (l == 0) {  // nothing below layer 0's probabilities is asked for
      r.grads[l] = attention_backward_no_grad(q, t.k, t.v, pq, dctx, nullptr);
      break;
    }
    // [dQ | dK | dV] straight into the projection's layout, then one GEMM with the stacked weights.
    auto dqkv = (Sq == S ? torch::empty({B, S, 3, H, Dh}) : torch::zeros({B, S, 3, H, Dh}));
    const AttentionInputGrads g{dqkv.select(2, 0).transpose(1, 2).narrow(2, 0, Sq), dqkv.select(2, 1).transpose(1, 2),
                                dqkv.select(2, 2).transpose(1, 2)};
    r.grads[l] = attention_backward_no_grad(q, t.k, t.v, pq, dctx, &g);
    dy = linear_input_grad(dqkv.view({B, S, 3 * H * Dh}), t.w_qkv);
    dy.narrow(1, 0, Sq).add_(du1);
  }
  return r;
}

Bert::AttentionGrads Bert::attention_grads_autograd(
    const EncoderInput& in, const std::function<torch::Tensor(const torch::Tensor&)>& dloss) const {
  TORCH_CHECK(!training_, "attention_grads: the model must be in eval mode (no dropout)");
  TORCH_CHECK(plain_input(in), "attention_grads: plain inputs only (no masks, start layer, override or LRP rules)");
  torch::AutoGradMode grad_on(true);
  EncoderInput from = on_device(in);
  {
    torch::NoGradGuard no_grad;
    from.start_hidden = embed(from);
  }
  from.start_hidden.requires_grad_(true);
  from.want_attention = true;
  AttentionGrads r;
  r.out = forward(from);
  std::vector<torch::Tensor> maps;  // the layers with heads (a 0-head layer's empty map is not in the graph)
  for (const auto& a : r.out.attentions)
    if (a.requires_grad()) maps.push_back(a);
  const auto dlogits = dloss(r.out.logits.detach());
  const auto grads = maps.empty() ? std::vector<torch::Tensor>{}
                                  : torch::autograd::grad({r.out.logits}, maps, {dlogits}, false, false, true);
  size_t i = 0;
  for (auto& a : r.out.attentions) {
    const bool in_graph = a.requires_grad();
    r.grads.push_back(in_graph && grads[i].defined() ? grads[i] : torch::zeros_like(a));
    i += in_graph ? 1 : 0;
    a = a.detach();
  }
  r.out.logits = r.out.logits.detach();
  return r;
}

}  // namespace hp::core
