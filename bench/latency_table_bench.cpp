// How well the latency table (prune/search/latency_table.h) predicts whole pruned models: the table measured for
// --model at --precision, then models with every layer at a fraction of its heads and neurons (uniform) and with
// each layer's counts drawn at random (--random, seeded), each timed in alternating rounds with the unpruned model.
// Prints per model the table's prediction, the measured time, the error, and both as a fraction of the unpruned
// model (the ratio is what stays stable on a shared machine), beside a prediction in proportion to the FLOPs.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/kernels/blas.h"
#include "core/kernels/lowp_gemm.h"
#include "core/kernels/runtime.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "prune/export/slim.h"
#include "prune/search/latency_table.h"
#include "timing.h"

using namespace hp;

namespace {

using hp::bench::median;

struct Shape {
  std::string name;
  core::HeadSet heads;
  core::NeuronSet neurons;
};

Shape uniform(const core::BertConfig& c, double f) {
  const long n = std::lround(f * c.num_attention_heads), m = std::lround(f * c.intermediate_size);
  Shape s{"uniform " + std::to_string(std::lround(f * 100)) + "%",
          core::HeadSet(c.num_hidden_layers, std::vector<bool>(c.num_attention_heads, false)),
          core::NeuronSet(c.num_hidden_layers, std::vector<bool>(c.intermediate_size, false))};
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    std::fill(s.heads[l].begin(), s.heads[l].begin() + n, true);
    std::fill(s.neurons[l].begin(), s.neurons[l].begin() + m, true);
  }
  return s;
}

Shape random_shape(const core::BertConfig& c, std::mt19937& rng, int k) {
  Shape s = uniform(c, 0);
  s.name = "random " + std::to_string(k) + " (heads/neurons per layer:";
  std::uniform_int_distribution<long> h(0, c.num_attention_heads), i(0, c.intermediate_size);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const long n = h(rng), m = i(rng);
    std::fill(s.heads[l].begin(), s.heads[l].begin() + n, true);
    std::fill(s.neurons[l].begin(), s.neurons[l].begin() + m, true);
    s.name += " " + std::to_string(n) + "/" + std::to_string(m);
  }
  s.name += ")";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  core::ensure_fast_blas(argc, argv);
  CLI::App app{"latency table: predicted against measured for whole pruned models"};
  std::string model_dir = "checkpoints/all-MiniLM-L6-v2", precision = "fp32";
  std::vector<double> fractions = {0.25, 0.5, 0.75};
  int random = 4, rounds = 3, batch = 32, seq = 128, threads = 0;
  unsigned seed = 0;
  app.add_option("--model", model_dir, "model folder");
  app.add_option("--precision", precision, "fp32, bf16 or int8: the table's and every timed model's");
  app.add_option("--fractions", fractions, "uniform models: every layer keeps this fraction of heads and neurons");
  app.add_option("--random", random, "models with random counts per layer");
  app.add_option("--seed", seed, "their seed");
  app.add_option("--rounds", rounds, "alternating rounds with the unpruned model (medians)");
  app.add_option("--batch", batch, "batch size");
  app.add_option("--seq", seq, "tokens per sequence");
  app.add_option("--threads", threads, "intra-op threads; 0 = all cores");
  CLI11_PARSE(app, argc, argv);
  core::set_threads(threads);
  const core::Precision p = core::precision_setting(precision, "--precision");
  std::printf("%s\n", core::runtime_summary().c_str());
  const core::Bert model = core::load_bert(model_dir);  // its own head: the labels do not change the time
  const core::BertConfig& c = model.config();
  const prune::LatencyTable t = prune::measure_latency_table(model, batch, seq, p);
  std::printf(
      "table %s: %.1f s; fixed %.2f ms, unpruned %.2f ms, attention %.3f + %.3f ms/head (R2 %.3f), "
      "FFN %.3f + %.4f ms/neuron (R2 %.3f), scale %.3f\n",
      precision.c_str(), t.seconds, t.fixed_ms, t.unpruned_ms, t.attention.intercept, t.attention.slope, t.attention.r2,
      t.ffn.intercept, t.ffn.slope, t.ffn.r2, t.scale);
  std::vector<Shape> shapes;
  for (double f : fractions) shapes.push_back(uniform(c, f));
  std::mt19937 rng(seed);
  for (int k = 0; k < random; ++k) shapes.push_back(random_shape(c, rng, k));
  core::Bert base = model;
  base.set_precision(p);
  const auto in = eval::synthetic_input(c, batch, seq);
  std::printf("the unpruned model timed again after the table:");  // as the table times it
  for (int r = 0; r < 3; ++r) std::printf(" %.2f ms", eval::measure_latency(base, in, 1, 5, 0.2).median_ms);
  std::printf(" (the table's: %.2f ms)\n", t.unpruned_ms);
  for (const Shape& s : shapes) {
    core::Bert slim = prune::slim_model(model, s.heads, s.neurons);
    slim.set_precision(p);
    std::vector<double> tb, ts;
    for (int r = 0; r < rounds; ++r) {
      tb.push_back(eval::measure_latency(base, in, 1, 5, 0.3).median_ms);
      ts.push_back(eval::measure_latency(slim, in, 1, 5, 0.3).median_ms);
    }
    const double predicted = prune::predicted_latency(t, slim.config()), measured = median(ts), whole = median(tb);
    // The plain alternative: the fixed part plus the rest in proportion to the encoder's FLOPs.
    const double by_flops = t.fixed_ms + (t.unpruned_ms - t.fixed_ms) * eval::encoder_flops(slim.config(), seq) /
                                             eval::encoder_flops(c, seq);
    std::printf(
        "%s: predicted %.2f ms, measured %.2f ms (%+.1f%%); of the unpruned: predicted %.3f, measured %.3f; "
        "by FLOPs %.3f\n",
        s.name.c_str(), predicted, measured, 100 * (predicted / measured - 1), predicted / t.unpruned_ms,
        measured / whole, by_flops / t.unpruned_ms);
  }
  return 0;
}
