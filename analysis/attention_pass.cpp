// The streamed attention pass of `prune analyze` (see analysis/attention_pass.h).
#include "analysis/attention_pass.h"
#include "core/model/head_loss.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>
#include <torch/utils.h>
#include <torch/autograd.h>

#include "core/dist/distributed.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "prune/heads/criteria.h"  // confidence_sums: the criteria's own definition

namespace hp::analysis {

namespace {

// Flat binary image of a PassResult for resume: POD vectors one after another, behind a header.
class Blob {
 public:
  template <class T>
  void put(const std::vector<T>& v) {
    put_scalar(static_cast<uint64_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  template <class T>
  void put_scalar(const T& x) {
    out_.append(reinterpret_cast<const char*>(&x), sizeof(T));
  }
  template <class T, size_t N>
  void put_array(const std::array<T, N>& a) {
    out_.append(reinterpret_cast<const char*>(a.data()), N * sizeof(T));
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string s) : s_(std::move(s)) {}
  template <class T>
  bool get(std::vector<T>& v) {
    uint64_t n = 0;
    if (!get_scalar(n) || n > (s_.size() - pos_) / sizeof(T)) return false;
    v.resize(n);
    std::memcpy(v.data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  template <class T>
  bool get_scalar(T& x) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(&x, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  template <class T, size_t N>
  bool get_array(std::array<T, N>& a) {
    if (s_.size() - pos_ < N * sizeof(T)) return false;
    std::memcpy(a.data(), s_.data() + pos_, N * sizeof(T));
    pos_ += N * sizeof(T);
    return true;
  }
  bool at_end() const { return pos_ == s_.size(); }

 private:
  std::string s_;
  size_t pos_ = 0;
};

constexpr uint32_t kMagic = 0x48505041;  // "HPPA"

void save_checkpoint(const std::string& path, const std::string& fingerprint, long batches_done, const PassResult& r) {
  Blob b;
  b.put_scalar(kMagic);
  b.put(std::vector<char>(fingerprint.begin(), fingerprint.end()));
  b.put_scalar(static_cast<int64_t>(batches_done));
  b.put_scalar(r.tokens);
  b.put_scalar(r.seconds);
  b.put(r.js);
  b.put(r.confidence_sum);
  b.put(r.sep_grad_sum), b.put(r.all_grad_sum), b.put(r.sep_grad_count), b.put(r.all_grad_count);
  b.put_array(r.syntax.occurrences);
  for (const auto& c : r.syntax.baseline_correct) b.put_array(c);
  for (const auto& h : r.syntax.gold_offset_hist) b.put(h);
  for (const auto& h : r.heads) {
    b.put_array(h.surface_sum), b.put_array(h.surface_count), b.put(h.offset_hist);
    for (const auto& c : h.correct) b.put_array(c);
    for (const auto& s : h.sieve) b.put(s);
  }
  core::write_file_atomic(path, b.str());
}

// Restores `r` (already sized) from `path`; returns the batches done, or 0 when absent or not this pass.
long load_checkpoint(const std::string& path, const std::string& fingerprint, PassResult& r) {
  if (path.empty() || !std::filesystem::exists(path)) return 0;
  Reader in(core::read_file(path));
  uint32_t magic = 0;
  std::vector<char> fp;
  int64_t done = 0;
  PassResult t = r;
  bool ok = in.get_scalar(magic) && magic == kMagic && in.get(fp) && std::string(fp.begin(), fp.end()) == fingerprint &&
            in.get_scalar(done) && in.get_scalar(t.tokens) && in.get_scalar(t.seconds) && in.get(t.js) &&
            in.get(t.confidence_sum) && in.get(t.sep_grad_sum) && in.get(t.all_grad_sum) && in.get(t.sep_grad_count) &&
            in.get(t.all_grad_count) && in.get_array(t.syntax.occurrences);
  for (auto& c : t.syntax.baseline_correct) ok = ok && in.get_array(c);
  for (auto& h : t.syntax.gold_offset_hist) ok = ok && in.get(h);
  for (auto& h : t.heads) {
    ok = ok && in.get_array(h.surface_sum) && in.get_array(h.surface_count) && in.get(h.offset_hist);
    for (auto& c : h.correct) ok = ok && in.get_array(c);
    for (auto& s : h.sieve) ok = ok && in.get(s);
  }
  ok = ok && in.at_end() && t.js.size() == r.js.size();
  if (!ok) {
    core::log_warn("analyze", path + " belongs to other settings or is damaged; starting this pass afresh");
    return 0;
  }
  r = std::move(t);
  return static_cast<long>(done);
}

// The key masks of one batch for add_noop: [B, S, 2] float32, column 0 the real (unpadded) keys, column 1
// the [SEP] keys. Built once per batch from plain arrays.
torch::Tensor noop_key_masks(const core::Batch& b, const std::vector<ExampleInfo>& info) {
  const auto B = b.input_ids.size(0), S = b.input_ids.size(1);
  std::vector<float> m(static_cast<size_t>(B * S * 2), 0.0f);
  for (int64_t e = 0; e < B; ++e) {
    const auto& ex = info[b.index[e]];
    for (int j = 0; j < ex.n; ++j) {
      m[(e * S + j) * 2] = 1.0f;
      m[(e * S + j) * 2 + 1] = ex.sep[j] ? 1.0f : 0.0f;
    }
  }
  return torch::from_blob(m.data(), {B, S, 2}, torch::kFloat32).clone();
}

// Adds each example's mean |∂L/∂A| over real queries × [SEP] keys and × all real keys, per head
// (DEFINITIONS §7: examples weigh equally). grad: [B, H, S, S]; keys from noop_key_masks.
void add_noop(const torch::Tensor& grad, const torch::Tensor& keys, int l, int max_heads, PassResult& r) {
  const auto B = grad.size(0), H = grad.size(1), S = grad.size(3);
  const auto real = keys.select(2, 0);  // [B, S]
  // Σ over keys of |g| · mask for every query row (one small GEMM per pair), then over the real queries.
  const auto per_query = torch::matmul(grad.abs(), keys.unsqueeze(1));  // [B, H, S, 2]
  const auto sums = (per_query * real.view({B, 1, S, 1})).sum(2).to(torch::kFloat64);  // [B, H, 2]
  const auto counts = keys.sum(1).to(torch::kFloat64);  // [B, 2]: n, [SEP] keys
  const auto n = counts.select(1, 0).view({B, 1});
  const auto at_all = (sums.select(2, 0) / (n * n)).sum(0).contiguous();
  const auto at_sep = (sums.select(2, 1) / (n * counts.select(1, 1).view({B, 1}))).sum(0).contiguous();
  const double* pa = at_all.data_ptr<double>();
  const double* ps = at_sep.data_ptr<double>();
  for (int64_t h = 0; h < H; ++h) {
    const size_t k = static_cast<size_t>(l) * max_heads + h;
    r.sep_grad_sum[k] += ps[h];
    r.all_grad_sum[k] += pa[h];
    r.sep_grad_count[k] += static_cast<double>(B);
    r.all_grad_count[k] += static_cast<double>(B);
  }
}

// Every summed field of a pass, for the data-parallel reduction: f(container) on each, in a fixed order.
template <class F>
void for_each_sum(PassResult& r, F&& f) {
  f(r.js), f(r.confidence_sum), f(r.sep_grad_sum), f(r.all_grad_sum), f(r.sep_grad_count), f(r.all_grad_count);
  f(r.syntax.occurrences);
  for (auto& c : r.syntax.baseline_correct) f(c);
  for (auto& h : r.syntax.gold_offset_hist) f(h);
  for (auto& h : r.heads) {
    f(h.surface_sum), f(h.surface_count), f(h.offset_hist);
    for (auto& c : h.correct) f(c);
  }
}

// Sums every rank's share of the pass (data-parallel analyze): counts and sums add up; a per-example sieve
// score is set on the one rank that saw the example (NaN elsewhere), so the merged value is that one.
void reduce_over_ranks(PassResult& r) {
  if (!core::dist::active()) return;
  std::vector<double> d;
  std::vector<int64_t> n;
  auto gather = [&](auto& c) {
    for (auto v : c) {
      if constexpr (std::is_floating_point_v<std::decay_t<decltype(v)>>) d.push_back(v);
      else n.push_back(static_cast<int64_t>(v));
    }
  };
  for_each_sum(r, gather);
  d.push_back(r.tokens);
  auto dt = torch::from_blob(d.data(), {static_cast<int64_t>(d.size())}, torch::kFloat64).clone();
  auto nt = torch::from_blob(n.data(), {static_cast<int64_t>(n.size())}, torch::kInt64).clone();
  core::dist::all_reduce_sum(dt, "the analysis pass");
  core::dist::all_reduce_sum(nt, "the analysis pass");
  const double* dp = dt.data_ptr<double>();
  const int64_t* np = nt.data_ptr<int64_t>();
  auto scatter = [&](auto& c) {
    for (auto& v : c) {
      using V = std::decay_t<decltype(v)>;
      if constexpr (std::is_floating_point_v<V>) v = static_cast<V>(*dp++);
      else v = static_cast<V>(*np++);
    }
  };
  for_each_sum(r, scatter);
  r.tokens = *dp;
  std::vector<float> sieve, seen;
  for (const auto& h : r.heads)
    for (const auto& role : h.sieve)
      for (float v : role) sieve.push_back(std::isnan(v) ? 0.f : v), seen.push_back(std::isnan(v) ? 0.f : 1.f);
  auto st = torch::from_blob(sieve.data(), {static_cast<int64_t>(sieve.size())}, torch::kFloat32).clone();
  auto ct = torch::from_blob(seen.data(), {static_cast<int64_t>(seen.size())}, torch::kFloat32).clone();
  core::dist::all_reduce_sum(st, "the analysis pass");
  core::dist::all_reduce_sum(ct, "the analysis pass");
  const float* sp = st.data_ptr<float>();
  const float* cp = ct.data_ptr<float>();
  for (auto& h : r.heads)
    for (auto& role : h.sieve)
      for (float& v : role) v = *cp++ > 0 ? *sp : std::numeric_limits<float>::quiet_NaN(), ++sp;
}

// A zeroed result for `in`: the heads analysed (present in the model and kept), every accumulator sized.
PassResult empty_result(const PassInput& in) {
  const auto& cfg = in.model->config();
  const int L = cfg.num_hidden_layers, Hmax = cfg.max_heads(), N = L * Hmax;
  PassResult r;
  r.layers = L, r.max_heads = Hmax;
  r.examples = static_cast<long>(in.data->size());
  r.present.assign(N, 0);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < cfg.heads_in_layer(l); ++h)
      r.present[l * Hmax + h] = !in.keep.defined() || in.keep[l][h].item<float>() > 0.5f;
  r.heads.resize(N);
  for (auto& h : r.heads) h.reset(in.max_len, r.examples);
  r.syntax.reset(in.max_len);
  r.js.assign(static_cast<size_t>(N) * N, 0.0);
  r.confidence_sum.assign(N, 0.0);
  r.sep_grad_sum.assign(N, 0.0), r.all_grad_sum.assign(N, 0.0);
  r.sep_grad_count.assign(N, 0.0), r.all_grad_count.assign(N, 0.0);
  r.noop = in.noop;
  return r;
}

// Where a pass starts, and where this process keeps its resume file.
struct ResumePoint {
  long done = 0;  // batches already accumulated in the result
  bool complete = false;  // finished earlier: its record stands
  std::string checkpoint, fingerprint;  // this process's own resume file (a rank's share when data-parallel)
};

// Restores `r` from the pass's checkpoint. Data-parallel: each rank runs every world-th batch and keeps its
// own resume file (its share alone); the shares are summed at the end and rank 0 writes the pass's checkpoint.
ResumePoint resume(const PassInput& in, long batches, PassResult& r) {
  const bool parallel = core::dist::active();
  PassResult fresh;
  if (parallel) fresh = r;
  ResumePoint at;
  at.done = load_checkpoint(in.checkpoint, in.fingerprint, r);
  at.complete = at.done >= batches;
  at.checkpoint =
      parallel && !in.checkpoint.empty() ? in.checkpoint + ".rank" + std::to_string(core::dist::rank()) : in.checkpoint;
  at.fingerprint = parallel ? in.fingerprint + "|rank " + std::to_string(core::dist::rank()) + " of " +
                                  std::to_string(core::dist::world())
                            : in.fingerprint;
  if (parallel && !at.complete) {  // a partial one-process record is no rank's share: start from this rank's own
    r = std::move(fresh);
    at.done = load_checkpoint(at.checkpoint, at.fingerprint, r);
  }
  if (at.done > 0)
    core::log_info(in.tag, "resuming after " + std::to_string(at.done) + " of " + std::to_string(batches) + " batches");
  return at;
}

// One batch's attention maps, [B, H_l, S, S] float32 per layer, and with in.noop the loss's gradient at each.
struct BatchMaps {
  std::vector<torch::Tensor> maps, grads;
};

BatchMaps forward_batch(const PassInput& in, const core::Batch& b) {
  core::EncoderInput ei = core::encoder_input(b);
  ei.want_attention = true;
  core::EncoderOutput out;
  BatchMaps m;
  if (in.noop) {
    // One forward that keeps what the backward needs, and the backward by hand down to layer 0's maps
    // (Bert::attention_grads; tested equal to autograd).
    auto got = in.model->attention_grads(ei, [&](const torch::Tensor& logits) {
      auto leaf = logits.detach().requires_grad_(true);
      return torch::autograd::grad({core::per_example_loss(leaf, b.labels.to(leaf.device()), in.regression).sum()},
                                   {leaf})[0];
    });
    out = std::move(got.out);
    for (const auto& g : got.grads) m.grads.push_back(g.to(torch::kCPU));
  } else {
    torch::NoGradGuard no_grad;
    out = in.model->forward(ei);
  }
  torch::NoGradGuard no_grad;
  for (const auto& a : out.attentions) m.maps.push_back(a.detach().to(torch::kCPU, torch::kFloat32).contiguous());
  return m;
}

// Every analysed head's map of every example to its accumulator. Each head's accumulator is touched by
// one thread only: deterministic for any thread count.
void add_head_maps(const PassInput& in, const core::Batch& b, const std::vector<torch::Tensor>& maps, PassResult& r) {
  const int Hmax = r.max_heads;
  const long B = b.input_ids.size(0), S = b.input_ids.size(1);
  at::parallel_for(0, static_cast<int64_t>(r.heads.size()), 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      if (!r.present[k]) continue;
      const int l = static_cast<int>(k / Hmax), h = static_cast<int>(k % Hmax);
      const int64_t Hl = maps[l].size(1);
      const float* base = maps[l].data_ptr<float>();
      for (long e = 0; e < B; ++e) r.heads[k].add(base + ((e * Hl + h) * S) * S, S, (*in.info)[b.index[e]], b.index[e]);
    }
  });
}

// Per example: the treebank's syntax counts and the Jensen–Shannon divergences between every pair of
// analysed heads.
void add_examples(const PassInput& in, const core::Batch& b, const std::vector<torch::Tensor>& maps, PassResult& r) {
  const int Hmax = r.max_heads, N = r.layers * Hmax;
  const long B = b.input_ids.size(0), S = b.input_ids.size(1);
  std::vector<int> analysed;
  for (int k = 0; k < N; ++k)
    if (r.present[k]) analysed.push_back(k);
  for (long e = 0; e < B; ++e) {
    const auto& ex = (*in.info)[b.index[e]];
    if (ex.treebank()) r.syntax.add(ex);
    std::vector<const float*> ptrs;
    for (int k : analysed) {
      const int l = k / Hmax, h = k % Hmax;
      ptrs.push_back(maps[l].data_ptr<float>() + ((e * maps[l].size(1) + h) * S) * S);
    }
    std::vector<double> js(analysed.size() * analysed.size(), 0.0);
    add_js_divergences(ptrs, S, ex.n, js);
    for (size_t x = 0; x < analysed.size(); ++x)
      for (size_t y = 0; y < analysed.size(); ++y) r.js[analysed[x] * N + analysed[y]] += js[x * analysed.size() + y];
  }
}

// One batch into every accumulator: Voita's confidence, the token count, the per-head statistics, the
// head distances and, with in.noop, the no-op gradients.
void add_batch(const PassInput& in, const core::Batch& b, const BatchMaps& m, PassResult& r) {
  torch::NoGradGuard no_grad;
  const int N = r.layers * r.max_heads;
  auto conf = prune::confidence_sums(m.maps, b.attention_mask, r.max_heads).contiguous();
  const double* cp = conf.data_ptr<double>();
  for (int k = 0; k < N; ++k) r.confidence_sum[k] += cp[k];
  r.tokens += b.attention_mask.sum().item<double>();
  add_head_maps(in, b, m.maps, r);
  add_examples(in, b, m.maps, r);
  if (in.noop) {
    const auto keys = noop_key_masks(b, *in.info);
    for (int l = 0; l < r.layers; ++l)
      if (m.maps[l].size(1) > 0) add_noop(m.grads[l], keys, l, r.max_heads, r);
  }
}

}  // namespace

PassResult run_pass(const PassInput& in) {
  HP_CHECK(in.model && in.data && in.info && in.info->size() == in.data->size(), "analysis pass input incomplete");
  PassResult r = empty_result(in);
  core::BatchOptions bo;
  bo.batch_size = in.batch_size;
  bo.sort_by_length = true;
  const auto batches = core::make_batches(*in.data, bo);
  const long total = static_cast<long>(batches.size());
  const ResumePoint at = resume(in, total, r);
  if (at.complete) return r;
  long examples_done = 0;
  for (long i = 0; i < at.done && i < total; ++i) examples_done += batches[i].input_ids.size(0);

  const bool parallel = core::dist::active();
  core::Progress progress(in.tag, r.examples - examples_done);
  const auto start = std::chrono::steady_clock::now();
  const double seconds_before = r.seconds;
  auto last_save = start;
  long since_start = 0;
  for (long bi = at.done; bi < total; ++bi) {
    if (parallel && !core::dist::mine(bi)) continue;
    const auto& b = batches[bi];
    add_batch(in, b, forward_batch(in, b), r);
    since_start += b.input_ids.size(0) * core::dist::world();  // rank 0's progress stands for all
    progress.update(std::min(since_start, r.examples - examples_done));
    const auto now = std::chrono::steady_clock::now();
    r.seconds = seconds_before + std::chrono::duration<double>(now - start).count();
    if (!at.checkpoint.empty() && std::chrono::duration<double>(now - last_save).count() > 20.0) {
      if (parallel) core::write_own_file([&] { save_checkpoint(at.checkpoint, at.fingerprint, bi + 1, r); });
      else save_checkpoint(at.checkpoint, at.fingerprint, bi + 1, r);
      last_save = now;
    }
  }
  progress.finish();
  reduce_over_ranks(r);
  r.seconds = seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!in.checkpoint.empty()) save_checkpoint(in.checkpoint, in.fingerprint, total, r);
  if (parallel && !at.checkpoint.empty()) std::filesystem::remove(at.checkpoint);
  return r;
}

}  // namespace hp::analysis
