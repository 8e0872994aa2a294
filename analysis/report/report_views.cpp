// Per-example data of the report's attention views (see analysis/report/report_views.h).
#include "analysis/report/report_views.h"

#include <torch/types.h>
#include <torch/utils.h>
#include <zlib.h>

#include <cmath>

#include "analysis/explain.h"
#include "analysis/rollout.h"
#include "core/data/batching.h"
#include "core/base/errors.h"

namespace hp::analysis {

namespace {

// One forward of `model` on the batch: attention at original head indices [L][H][n][n] and the heads present.
struct Forward {
  std::vector<float> attn;
  std::vector<uint8_t> kept;
  core::EncoderOutput out;
};

Forward forward(const core::Bert& model, const core::Batch& b, int H, bool hidden) {
  torch::NoGradGuard no_grad;
  core::EncoderInput in = core::encoder_input(b);
  in.want_attention = true;
  in.want_hidden = hidden;
  Forward f;
  f.out = model.forward(in);
  const auto& cfg = model.config();
  const int L = cfg.num_hidden_layers;
  const long n = b.input_ids.size(1);
  f.attn.assign(static_cast<size_t>(L) * H * n * n, 0.0f);
  f.kept.assign(static_cast<size_t>(L) * H, 0);
  for (int l = 0; l < L; ++l) {
    const auto heads = cfg.kept_heads(l);
    const auto a = f.out.attentions[l][0].to(torch::kFloat32).contiguous();  // [H_l, n, n]
    for (size_t s = 0; s < heads.size(); ++s) {
      f.kept[static_cast<size_t>(l) * H + heads[s]] = 1;
      const float* src = a[static_cast<long>(s)].data_ptr<float>();
      std::copy(src, src + n * n, f.attn.begin() + (static_cast<size_t>(l) * H + heads[s]) * n * n);
    }
  }
  return f;
}

// Class name and probability of the prediction (regression: the score and NaN).
std::pair<std::string, double> prediction(const core::TaskSpec& task, const torch::Tensor& logits) {
  if (task.is_regression()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", logits[0][0].item<double>());
    return {buf, NAN};
  }
  const auto p = torch::softmax(logits[0].to(torch::kFloat64), 0);
  const long c = p.argmax().item<int64_t>();
  return {task.label_name(static_cast<int>(c)), p[c].item<double>()};
}

// Query and key vectors of every head present, at original indices: [L][H][n][Dh] each.
void query_key(const core::Bert& model, const Forward& f, int H, long n, std::vector<float>& q, std::vector<float>& k) {
  torch::NoGradGuard no_grad;
  const auto& cfg = model.config();
  const int L = cfg.num_hidden_layers, Dh = cfg.head_dim();
  q.assign(static_cast<size_t>(L) * H * n * Dh, 0.0f);
  k.assign(q.size(), 0.0f);
  for (int l = 0; l < L; ++l) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".attention.self.";
    const auto& p = model.parameters();
    const auto x = f.out.hidden_states.at(l)[0];  // the layer's input [n, D]
    const auto heads = cfg.kept_heads(l);
    const long Hl = static_cast<long>(heads.size());
    for (auto [name, dst] : {std::pair{"query", &q}, std::pair{"key", &k}}) {
      const auto v = torch::linear(x, p.at(pre + name + ".weight"), p.at(pre + name + ".bias"))
                         .view({n, Hl, Dh})
                         .permute({1, 0, 2})
                         .to(torch::kFloat32)
                         .contiguous();
      for (long s = 0; s < Hl; ++s) {
        const float* src = v[s].data_ptr<float>();
        std::copy(src, src + n * Dh, dst->begin() + (static_cast<size_t>(l) * H + heads[s]) * n * Dh);
      }
    }
  }
}

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string base64_zlib(const std::vector<uint8_t>& bytes) {
  uLongf size = compressBound(bytes.size());
  std::vector<uint8_t> z(size);
  if (compress2(z.data(), &size, bytes.data(), bytes.size(), 9) != Z_OK) throw Error("zlib compress2 failed");
  z.resize(size);
  std::string out;
  out.reserve((z.size() + 2) / 3 * 4);
  for (size_t i = 0; i < z.size(); i += 3) {
    const uint32_t a = z[i], b = i + 1 < z.size() ? z[i + 1] : 0, c = i + 2 < z.size() ? z[i + 2] : 0;
    const uint32_t t = a << 16 | b << 8 | c;
    out += kB64[t >> 18 & 63];
    out += kB64[t >> 12 & 63];
    out += i + 1 < z.size() ? kB64[t >> 6 & 63] : '=';
    out += i + 2 < z.size() ? kB64[t & 63] : '=';
  }
  return out;
}

std::vector<uint8_t> quantize_unit(const std::vector<float>& p) {
  std::vector<uint8_t> q(p.size());
  for (size_t i = 0; i < p.size(); ++i) q[i] = static_cast<uint8_t>(std::lround(std::clamp(p[i], 0.0f, 1.0f) * 255.0f));
  return q;
}

ExampleView view_example(const core::Bert& model, const core::Bert* slim, const core::Tokenizer& tok,
                         const core::TaskSpec& task, const core::Example& ex, const std::string& name,
                         const ViewSettings& s) {
  check_fits(tok, ex, s.max_seq_len, name);
  core::EncodedDataset data = core::encode_examples(tok, {ex}, s.max_seq_len);
  core::BatchOptions bo;
  bo.batch_size = 1;
  bo.pad_id = tok.pad_id();
  const core::Batch b = core::make_batches(data, bo).at(0);
  const auto& cfg = model.config();

  ExampleView v;
  v.name = name;
  v.L = cfg.num_hidden_layers, v.H = cfg.num_attention_heads, v.Dh = cfg.head_dim();
  v.n = static_cast<int>(b.input_ids.size(1));
  for (long i = 0; i < v.n; ++i) {
    v.tokens.push_back(tok.token(static_cast<int32_t>(b.input_ids[0][i].item<int64_t>())));
    v.segments.push_back(static_cast<int>(b.token_type_ids[0][i].item<int64_t>()));
  }
  if (ex.has_label)
    v.label =
        task.is_regression() ? std::to_string(ex.label).substr(0, 5) : task.label_name(static_cast<int>(ex.label));

  Forward f = forward(model, b, v.H, true);
  std::tie(v.prediction, v.probability) = prediction(task, f.out.logits);
  query_key(model, f, v.H, v.n, v.q, v.k);
  v.rollout = attention_rollout(f.attn, v.L, v.H, v.n, f.kept);
  v.attn = std::move(f.attn);
  v.kept = std::move(f.kept);

  if (slim) {
    if (slim->config().num_hidden_layers != v.L || slim->config().num_attention_heads != v.H)
      throw InputError("the slimmed model's shape (" + std::to_string(slim->config().num_hidden_layers) + " layers × " +
                       std::to_string(slim->config().num_attention_heads) + " heads) differs from the model's; " +
                       "pass the model the run pruned (report.model)");
    Forward g = forward(*slim, b, v.H, false);
    v.has_slim = true;
    std::tie(v.slim_prediction, v.slim_probability) = prediction(task, g.out.logits);
    v.slim_rollout = attention_rollout(g.attn, v.L, v.H, v.n, g.kept);
    v.slim_attn = std::move(g.attn);
    v.slim_kept = std::move(g.kept);
  }
  if (s.tree) {
    const Explanation x = explain_example(model, tok, ex, s.max_seq_len, s.steps, s.riemann, false, s.threshold);
    char prob[32];
    std::snprintf(prob, sizeof prob, "%.3f", x.probability);
    v.tree_svg =
        svg_tree(x.tree, x.tokens,
                 "attribution tree: " + name + ", " +
                     (task.is_regression() ? std::string("score") : task.label_name(x.target)) + " (" + prob + ")");
  }
  return v;
}

nlohmann::json view_json(const ExampleView& v) {
  nlohmann::json j;
  j["name"] = v.name;
  j["tokens"] = v.tokens;
  j["segments"] = v.segments;
  j["label"] = v.label.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.label);
  j["prediction"] = v.prediction;
  j["probability"] = std::isnan(v.probability) ? nlohmann::json(nullptr) : nlohmann::json(v.probability);
  j["attn"] = base64_zlib(quantize_unit(v.attn));
  j["rollout"] = base64_zlib(quantize_unit(v.rollout));
  // Query/key vectors: int8 with one symmetric scale per head (its largest |value| maps to 127).
  const size_t per_head = static_cast<size_t>(v.n) * v.Dh;
  std::vector<uint8_t> qk(v.q.size() * 2);
  nlohmann::json scales = nlohmann::json::array();
  for (int l = 0; l < v.L; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int h = 0; h < v.H; ++h) {
      const size_t off = (static_cast<size_t>(l) * v.H + h) * per_head;
      float m = 0;
      for (size_t i = 0; i < per_head; ++i) m = std::max({m, std::fabs(v.q[off + i]), std::fabs(v.k[off + i])});
      const float scale = m > 0 ? m / 127.0f : 1.0f;
      row.push_back(scale);
      for (int which = 0; which < 2; ++which) {
        const std::vector<float>& src = which ? v.k : v.q;
        uint8_t* dst = qk.data() + (static_cast<size_t>(l) * v.H + h) * 2 * per_head + which * per_head;
        for (size_t i = 0; i < per_head; ++i)
          dst[i] = static_cast<uint8_t>(static_cast<int8_t>(std::lround(src[off + i] / scale)));
      }
    }
    scales.push_back(row);
  }
  j["qk"] = base64_zlib(qk);
  j["qk_scale"] = scales;
  if (v.has_slim) {
    j["slim_attn"] = base64_zlib(quantize_unit(v.slim_attn));
    j["slim_rollout"] = base64_zlib(quantize_unit(v.slim_rollout));
    j["slim_prediction"] = v.slim_prediction;
    j["slim_probability"] =
        std::isnan(v.slim_probability) ? nlohmann::json(nullptr) : nlohmann::json(v.slim_probability);
  } else {
    j["slim_attn"] = j["slim_rollout"] = j["slim_prediction"] = j["slim_probability"] = nullptr;
  }
  j["note"] = v.note;
  return j;
}

}  // namespace hp::analysis
