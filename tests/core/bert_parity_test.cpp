// Parity of our BERT with Hugging Face transformers 4.40.2, through the golden files written by
// tests/golden/make_goldens.py: hidden states, attentions, logits, head masks and head-mask gradients,
// for a tiny random BERT (safetensors and pytorch_model.bin) and for the real all-MiniLM-L6-v2.
#include <catch2/catch.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>

#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "core/text/tokenizer.h"
#include "fixtures.h"
#include "skip.h"

namespace {

using hp::core::TensorMap;

// HF sums attention and LayerNorm in another order; float32 outputs agree to ~2e-6. 1e-5 leaves room for
// that and fails a wrong LayerNorm epsilon (1e-12 → 1e-5 moves the logits by ~1e-4).
constexpr double kLogitTol = 1e-5;
// Head-mask gradients are small (1e-4..1e-2 for MiniLM): compare relative to the largest entry.
constexpr double kGradRelTol = 1e-4;

using namespace hp::test;  // the fixture paths (tests/fixtures.h)

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// Max difference over real (non-padding) token positions. x: [B, S, ...]; mask: [B, S].
double masked_diff(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& mask) {
  auto keep = mask.to(torch::kBool);
  return max_abs_diff(a.index({keep}), b.index({keep}));
}

hp::core::EncoderInput input_of(TensorMap& g) {
  hp::core::EncoderInput in;
  in.input_ids = g.at("input_ids");
  in.token_type_ids = g.at("token_type_ids");
  in.attention_mask = g.at("attention_mask");
  return in;
}

torch::Tensor head_mask_grad(const hp::core::Bert& model, hp::core::EncoderInput in, const torch::Tensor& labels,
                             bool per_example_abs) {
  const auto& c = model.config();
  auto total = torch::zeros({c.num_hidden_layers, c.num_attention_heads});
  const long B = in.input_ids.size(0);
  for (long start = 0; start < (per_example_abs ? B : 1); ++start) {
    auto mask = torch::ones({c.num_hidden_layers, c.num_attention_heads}, torch::requires_grad());
    hp::core::EncoderInput sub = in;
    sub.head_mask = mask;
    torch::Tensor y = labels;
    if (per_example_abs) {
      sub.input_ids = in.input_ids.narrow(0, start, 1);
      sub.token_type_ids = in.token_type_ids.narrow(0, start, 1);
      sub.attention_mask = in.attention_mask.narrow(0, start, 1);
      y = labels.narrow(0, start, 1);
    }
    auto logits = model.forward(sub).logits;
    auto loss = torch::cross_entropy_loss(logits, y);
    loss.backward();
    total += per_example_abs ? mask.grad().abs() : mask.grad();
  }
  return total;
}

}  // namespace

TEST_CASE("tiny BERT matches HF: hidden states, attentions, pooled, logits", "[core][parity]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  auto in = input_of(g);
  in.want_hidden = in.want_attention = true;
  torch::NoGradGuard no_grad;
  auto out = model.forward(in);
  const auto& mask = g.at("attention_mask");
  REQUIRE(out.hidden_states.size() == 3);
  for (size_t l = 0; l < out.hidden_states.size(); ++l) {
    INFO("hidden state " << l);
    CHECK(masked_diff(out.hidden_states[l], g.at("hidden_states")[l], mask) <= kLogitTol);
  }
  for (size_t l = 0; l < out.attentions.size(); ++l) {
    INFO("attention layer " << l);
    // Rows of padded queries differ in meaning only; compare the real query rows.
    auto ours = out.attentions[l].transpose(1, 2), ref = g.at("attentions")[l].transpose(1, 2);  // [B, S, H, S]
    CHECK(masked_diff(ours, ref, mask) <= kLogitTol);
  }
  CHECK(max_abs_diff(out.pooled, g.at("pooled")) <= kLogitTol);
  CHECK(max_abs_diff(out.logits, g.at("logits")) <= kLogitTol);
  // The check is sensitive: the golden logits are far from a constant.
  CHECK(g.at("logits").std().item<double>() > 0.1);
}

TEST_CASE("head masks give the same outputs as HF's head_mask", "[core][parity]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  torch::NoGradGuard no_grad;
  for (const char* k : {"mask1", "mask2", "mask3"}) {
    INFO("head mask " << k);
    auto in = input_of(g);
    in.head_mask = g.at(std::string("head_mask/") + k);
    auto out = model.forward(in);
    CHECK(max_abs_diff(out.logits, g.at(std::string("logits_masked/") + k)) <= kLogitTol);
    CHECK(masked_diff(out.last_hidden, g.at(std::string("hidden_masked/") + k), g.at("attention_mask")) <= kLogitTol);
    // Masking must change something, or this test proves nothing.
    CHECK(max_abs_diff(out.logits, g.at("logits")) > 1e-3);
  }
}

TEST_CASE("head-mask gradient equals HF's (Michel's importance)", "[core][parity]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  auto in = input_of(g);
  auto labels = g.at("labels");
  auto grad = head_mask_grad(model, in, labels, /*per_example_abs=*/false);
  auto ref = g.at("head_mask_grad");
  CHECK(max_abs_diff(grad, ref) <= kGradRelTol * ref.abs().max().item<double>() + 1e-7);
  auto grad_abs = head_mask_grad(model, in, labels, /*per_example_abs=*/true);
  auto ref_abs = g.at("head_mask_grad_abs_per_example");
  CHECK(max_abs_diff(grad_abs, ref_abs) <= kGradRelTol * ref_abs.abs().max().item<double>() + 1e-7);
  CHECK(ref_abs.abs().max().item<double>() > 1e-3);
}

TEST_CASE("pytorch_model.bin and the regression head load as HF does", "[core][parity]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  torch::NoGradGuard no_grad;
  auto from_bin = hp::core::load_bert(kTinyBertBin);
  CHECK(max_abs_diff(from_bin.forward(input_of(g)).logits, g.at("logits")) <= kLogitTol);
  auto reg = hp::core::load_bert(kTinyBertReg);
  REQUIRE(reg.config().num_labels == 1);
  CHECK(max_abs_diff(reg.forward(input_of(g)).logits, g.at("reg_logits")) <= kLogitTol);
}

namespace {

// Our tokenizer from `dir` reproduces the input ids HF stored in golden file `h5`, row by row.
void check_golden_ids(const std::string& h5, const std::string& dir) {
  auto g = hp::core::read_hdf5(h5);
  auto a = hp::core::read_hdf5_strings(h5, "text_a");
  auto b = hp::core::read_hdf5_strings(h5, "text_b");
  auto tok = hp::core::Tokenizer::from_model_dir(dir);
  const auto& ids = g.at("input_ids");
  const auto& mask = g.at("attention_mask");
  for (size_t i = 0; i < a.size(); ++i) {
    auto enc = tok.encode(a[i], b[i].empty() ? nullptr : &b[i], 512);
    long n = mask[i].sum().item<long>();
    auto ref = ids[i].narrow(0, 0, n);
    std::vector<int32_t> want(ref.data_ptr<int64_t>(), ref.data_ptr<int64_t>() + n);
    INFO(h5 << " row " << i << ": " << a[i] << " | " << b[i]);
    CHECK(enc.ids == want);
  }
}

}  // namespace

TEST_CASE("tokenizer ids equal HF's on the tiny golden sentences", "[core][parity][tokenizer]") {
  check_golden_ids(kTinyBertH5, kTinyBert);
}

TEST_CASE("tokenizer ids equal HF's on the MiniLM golden sentences", "[core][parity][tokenizer][real]") {
  if (!std::filesystem::exists(kMiniLM))
    return hp::test::skip(kMiniLM + " is absent; run scripts/setup.sh to install the real model");
  check_golden_ids(kMiniLMH5, kMiniLM);
}

TEST_CASE("all-MiniLM-L6-v2 matches HF: hidden states, attentions, logits, masks, gradients", "[core][parity][real]") {
  if (!std::filesystem::exists(kMiniLM))
    return hp::test::skip(kMiniLM + " is absent; run scripts/setup.sh to install the real model");
  auto g = hp::core::read_hdf5(kMiniLMH5);
  hp::core::LoadOptions opts;
  opts.num_labels = 2;
  hp::core::LoadReport report;
  auto model = hp::core::load_bert(kMiniLM, opts, &report);
  REQUIRE(report.prefix.empty());  // sentence-transformers layout: no "bert." prefix
  REQUIRE(report.classifier_initialized);  // no classifier in the package: one is made…
  {
    torch::NoGradGuard no_grad;  // …and replaced by the golden's.
    model.mutable_parameters().at("classifier.weight").copy_(g.at("classifier_weight"));
    model.mutable_parameters().at("classifier.bias").copy_(g.at("classifier_bias"));
  }
  auto in = input_of(g);
  in.want_attention = true;
  {
    torch::NoGradGuard no_grad;
    auto out = model.forward(in);
    auto rows = g.at("last_hidden_rows");
    for (long r = 0; r < rows.size(0); ++r) {
      long row = rows[r].item<long>();
      INFO("row " << row);
      CHECK(masked_diff(out.last_hidden[row].unsqueeze(0), g.at("last_hidden")[r].unsqueeze(0),
                        g.at("attention_mask")[row].unsqueeze(0)) <= kLogitTol);
    }
    CHECK(max_abs_diff(out.pooled, g.at("pooled")) <= kLogitTol);
    CHECK(max_abs_diff(out.logits, g.at("logits")) <= kLogitTol);
    long row = g.at("attentions_row").item<long>();
    const auto& ref_att = g.at("attentions");  // [L, H, n, n]
    long n = ref_att.size(2);
    for (size_t l = 0; l < out.attentions.size(); ++l)
      CHECK(max_abs_diff(out.attentions[l][row].narrow(1, 0, n).narrow(2, 0, n), ref_att[l]) <= kLogitTol);

    in.head_mask = g.at("head_mask");
    auto masked = model.forward(in);
    CHECK(max_abs_diff(masked.logits, g.at("logits_masked")) <= kLogitTol);
    CHECK(max_abs_diff(masked.last_hidden.select(1, 0), g.at("cls_hidden_masked")) <= kLogitTol);
  }
  auto plain = input_of(g);
  auto grad = head_mask_grad(model, plain, g.at("labels"), /*per_example_abs=*/false);
  auto ref = g.at("head_mask_grad");
  CHECK(max_abs_diff(grad, ref) <= kGradRelTol * ref.abs().max().item<double>() + 1e-7);
}

TEST_CASE("cls_only computes the same logits as the full last layer (with grad, masks, 0-head layers)",
          "[core][parity]") {
  auto g = hp::core::read_hdf5(kTinyBertH5);
  auto model = hp::core::load_bert(kTinyBert);
  auto in = input_of(g);
  auto masked = torch::tensor({{1.f, 0.f, 1.f, 1.f}, {0.f, 0.f, 0.f, 0.f}});  // layer 1 fully masked
  // Each mask with the HF golden it must reproduce (none for the fully masked layer: cls_only against the
  // full last layer only).
  const std::vector<std::pair<torch::Tensor, torch::Tensor>> cases = {
      {torch::Tensor(), g.at("logits")},
      {torch::ones({2, 4}), g.at("logits")},
      {g.at("head_mask/mask1"), g.at("logits_masked/mask1")},
      {masked, torch::Tensor()}};
  for (const auto& [mask, golden] : cases) {
    hp::core::EncoderInput full = in, cls = in;
    full.head_mask = cls.head_mask = mask;
    cls.cls_only = true;
    {
      torch::NoGradGuard no_grad;
      CHECK(max_abs_diff(model.forward(cls).logits, model.forward(full).logits) <= 1e-6);
      if (golden.defined()) CHECK(max_abs_diff(model.forward(cls).logits, golden) <= kLogitTol);
    }
    auto a = model.forward(cls), b = model.forward(full);  // autograd path
    CHECK(max_abs_diff(a.pooled, b.pooled) <= 1e-6);
    CHECK(a.last_hidden.size(1) == 1);
  }
  // With want_attention the last layer gives its [CLS] row.
  hp::core::EncoderInput cls = in, full = in;
  cls.cls_only = cls.want_attention = full.want_attention = full.want_hidden = true;
  const auto a = model.forward(cls), b = model.forward(full);
  REQUIRE(a.attentions.size() == 2);
  CHECK(a.attentions[1].size(2) == 1);
  CHECK(max_abs_diff(a.attentions[1], b.attentions[1].narrow(2, 0, 1)) <= 1e-6);
  CHECK(max_abs_diff(a.attentions[0], b.attentions[0]) <= 1e-6);
  hp::core::EncoderInput bad = in;
  bad.cls_only = bad.want_context = true;
  CHECK_THROWS(model.forward(bad));
}
