// The criteria and the search on a GPU (#62; the CTest test prune.device_cuda, skipped visibly without one): a pruning
// run with run.device: cuda scores its heads and takes the search's mask gradients with the model there
// (prune/stages/stages_curves.cpp, prune/stages/budget.cpp), so from a GPU copy of the tiny model each criterion's importances —
// classification and regression, Taylor per example and per token, LRP, attention attribution to the predicted and
// the gold class, leave-one-out with and without the lower layers reused, confidence and random — and the mask
// gradients of heads, neurons, hidden channels and layers must equal the CPU's within 1e-3 of the largest, and come
// back as CPU tensors. The curves' evaluations (a curve point, the search's steps) run on the GPU copy with the
// CPU's predictions, int8 stays on the CPU, and the no-op evidence's attention gradients of `analyze` (autograd
// there, the hand-written backward here) agree within 1e-3; the search's mask tuning (its forwards and systems
// there, solved here) gives the CPU's scales within 1e-4.
#include <catch2/catch.hpp>

#include "core/io/checkpoint.h"
#include "core/io/tensor_io.h"
#include "core/kernels/device.h"
#include "fixtures.h"
#include "golden_data.h"
#include "prune/heads/criteria.h"
#include "prune/heads/curves.h"
#include "prune/search/mask_search.h"
#include "prune/search/mask_tuning.h"
#include "prune/export/slim.h"
#include "skip.h"

using namespace hp;

namespace {

bool no_gpu() {
  if (core::cuda_devices() > 0) return false;
  test::skip(core::gpu_summary() + ": the CUDA checks need a CUDA build of LibTorch and a GPU (docs/gpu.md)");
  return true;
}

// The criteria's importances on `cpu` and on its GPU copy, criterion by criterion, under the same options.
void compare(const core::Bert& cpu, const core::TaskSpec& task, const core::EncodedDataset& data,
             core::PruneConfig opts, const std::vector<std::string>& names) {
  const core::Bert gpu = cpu.to(torch::kCUDA);
  const prune::RankData rank = prune::make_rank_data(task, data, 3, 0);
  auto keep = torch::ones({cpu.config().num_hidden_layers, cpu.config().max_heads()});
  keep[1][2] = 0;  // a head already pruned: the criteria see the mask on both devices
  for (const auto& name : names)
    for (bool variant : {false, true}) {
      // The variant: Taylor per token, attattr to the gold class, loo with every layer recomputed.
      if (variant && name != "taylor" && name != "attattr" && name != "loo") continue;
      opts.taylor_token_level = variant && name == "taylor";
      opts.attattr_target = variant && name == "attattr" ? "gold" : "predicted";
      prune::CriterionContext c;
      c.rank = &rank, c.keep = keep, c.opts = &opts, c.seed = 5;
      c.reuse_lower_layers = !(variant && name == "loo");
      c.model = &cpu;
      const auto want = prune::find_criterion(name).score(c);
      c.model = &gpu;
      const auto got = prune::find_criterion(name).score(c);
      INFO(task.name << " " << name << (variant ? " (variant)" : ""));
      REQUIRE(got.device().is_cpu());
      const double scale = std::max(want.abs().max().item<double>(), 1e-12);
      CHECK((got.to(torch::kFloat64) - want.to(torch::kFloat64)).abs().max().item<double>() <= 1e-3 * scale);
    }
}

// The tiny classifier, its golden examples and its copy on the GPU.
struct TinyOnGpu {
  core::TensorMap g = core::read_hdf5(test::kTinyBertH5);
  core::EncodedDataset data = test::golden_dataset(g);
  core::Bert cpu = core::load_bert(test::kTinyBert);
  core::Bert gpu = cpu.to(torch::kCUDA);
};

}  // namespace

TEST_CASE("on the GPU: every criterion's importances within 1e-3 of the CPU's", "[.cuda]") {
  if (no_gpu()) return;
  auto g = core::read_hdf5(test::kTinyBertH5);
  const auto data = test::golden_dataset(g);
  core::PruneConfig opts;
  opts.attattr_steps = 4;
  compare(core::load_bert(test::kTinyBert), core::find_task("mnli"), data, opts,
          {"confidence", "taylor", "lrp", "attattr", "loo", "random"});
  const auto reg = test::golden_dataset(g, "reg_labels");
  compare(core::load_bert(test::kTinyBertReg), core::find_task("stsb"), reg, opts, {"taylor", "lrp", "loo"});
}

TEST_CASE("on the GPU: the search's mask gradients within 1e-3 of the CPU's", "[.cuda]") {
  if (no_gpu()) return;
  const TinyOnGpu t;
  const core::EncodedDataset& data = t.data;
  const core::Bert &cpu = t.cpu, &gpu = t.gpu;
  const prune::RankData sample = prune::make_rank_data(core::find_task("mnli"), data, 3, 0);
  const auto want = prune::mask_gradients(cpu, sample, {}, /*hidden=*/true, /*layers=*/true);
  const auto got = prune::mask_gradients(gpu, sample, {}, true, true);
  for (const auto& [name, a, b] : {std::tuple{"heads", want.heads, got.heads},
                                   {"neurons", want.neurons, got.neurons},
                                   {"hidden", want.hidden, got.hidden},
                                   {"layers", want.layers, got.layers}}) {
    INFO(name);
    REQUIRE(b.device().is_cpu());
    CHECK((a - b).abs().max().item<double>() <= 1e-3 * std::max(a.abs().max().item<double>(), 1e-12));
  }
}

TEST_CASE("on the GPU: the curves' evaluations run there with the CPU's predictions; int8 stays on the CPU",
          "[.cuda]") {
  if (no_gpu()) return;
  const TinyOnGpu t;
  const core::EncodedDataset& data = t.data;
  const core::Bert &cpu = t.cpu, &gpu = t.gpu;
  core::PruneConfig opts;
  prune::CurveInputs in;
  const core::TaskSpec& task = core::find_task("mnli");
  core::BatchOptions bo;
  bo.batch_size = 3;
  const std::vector<core::Batch> batches = core::make_batches(data, bo);
  const auto objective = prune::make_task_objective({&task, &data, &data, &batches, &batches, "", nullptr});
  in.model = &cpu, in.score_model = &gpu, in.objective = objective.get(), in.opts = &opts;
  auto same = [&](const core::Bert& model, const eval::Masks& masks) {
    const auto want = eval::evaluate(model, task, data, batches, masks);
    const auto got = prune::evaluate_on(in, model, prune::Split::kEval, masks);
    CHECK(got.predictions == want.predictions);
    CHECK((got.logits - want.logits).abs().max().item<double>() <= 1e-4);
    return got;
  };
  auto keep = torch::ones({cpu.config().num_hidden_layers, cpu.config().max_heads()});
  keep[0][1] = 0;
  same(cpu, {keep});  // the unpruned model: its GPU copy, masked
  core::HeadSet heads(cpu.config().num_hidden_layers, std::vector<bool>(cpu.config().max_heads(), true));
  heads[1][0] = false;
  const core::Bert slim = prune::slim_model(cpu, core::StructureMask{heads, {}});
  same(slim, {});  // a slimmed model: copied there
  // The point of a curve, evaluated there, with the CPU's metric.
  const auto p = prune::evaluate_point(in, cpu, "taylor", 0, 0, heads);
  const auto cpu_point = eval::evaluate(slim, task, data, batches);
  CHECK(p.predictions == cpu_point.predictions);
  // int8 is the CPU's kernels: evaluated on the CPU, bit for bit the CPU's result.
  core::Bert int8 = slim;
  int8.set_precision(core::Precision::kInt8);
  const auto got = prune::evaluate_on(in, int8, prune::Split::kEval);
  CHECK(torch::equal(got.logits, eval::evaluate(int8, task, data, batches).logits));
}

TEST_CASE("on the GPU: the no-op evidence's attention gradients (analyze) within 1e-3 of the CPU's", "[.cuda]") {
  if (no_gpu()) return;
  const TinyOnGpu t;
  const core::EncodedDataset& data = t.data;
  const core::Bert &cpu = t.cpu, &gpu = t.gpu;
  core::BatchOptions bo;
  bo.batch_size = 4;
  const auto batch = core::make_batches(data, bo).front();
  const auto in = core::encoder_input(batch);
  const auto dloss = [](const torch::Tensor& logits) { return torch::ones_like(logits) / logits.size(0); };
  const auto want = cpu.attention_grads(in, dloss);
  const auto got = gpu.attention_grads(in, dloss);
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t l = 0; l < want.grads.size(); ++l) {
    INFO("layer " << l);
    REQUIRE(got.grads[l].sizes() == want.grads[l].sizes());
    const double scale = std::max(want.grads[l].abs().max().item<double>(), 1e-12);
    CHECK((got.grads[l].cpu() - want.grads[l]).abs().max().item<double>() <= 1e-3 * scale);
    CHECK((got.out.attentions[l].cpu() - want.out.attentions[l]).abs().max().item<double>() <= 1e-4);
  }
}

TEST_CASE("on the GPU: the search's mask tuning within 1e-4 of the CPU's, hidden channels and a layer removed",
          "[.cuda]") {
  if (no_gpu()) return;
  const TinyOnGpu t;
  const core::EncodedDataset& data = t.data;
  const core::Bert &cpu = t.cpu, &gpu = t.gpu;
  const prune::RankData rank = prune::make_rank_data(core::find_task("mnli"), data, 3, 0);
  const auto& c = cpu.config();
  prune::StructureKeep keep{{}, {}};
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    keep.heads.emplace_back(c.heads_in_layer(l), true);
    keep.neurons.emplace_back(c.ffn_width(l), true);
    keep.heads[l][l % c.heads_in_layer(l)] = false;
    for (long i = l; i < c.ffn_width(l); i += 3) keep.neurons[l][i] = false;
  }
  for (const bool coarse : {false, true}) {
    INFO((coarse ? "hidden channels and layer 0 removed" : "heads and neurons"));
    prune::StructureKeep k = keep;
    if (coarse) {
      k.hidden.assign(c.hidden_size, true);
      for (long i = 1; i < c.hidden_size; i += 5) k.hidden[i] = false;
      k.layers.assign(c.num_hidden_layers, true);
      k.layers[0] = false;
    }
    std::vector<prune::SublayerFit> want_fits, got_fits;
    const auto want = prune::tune_masks(cpu, k, rank, {}, &want_fits);
    const auto got = prune::tune_masks(gpu, k, rank, {}, &got_fits);
    REQUIRE(got.heads.device().is_cpu());
    REQUIRE(got_fits.size() == want_fits.size());
    CHECK((got.heads - want.heads).abs().max().item<double>() <= 1e-4 * want.heads.abs().max().item<double>());
    CHECK((got.neurons - want.neurons).abs().max().item<double>() <= 1e-4 * want.neurons.abs().max().item<double>());
    for (size_t i = 0; i < want_fits.size(); ++i) CHECK(std::abs(got_fits[i].after - want_fits[i].after) <= 1e-4);
  }
}
