// Does an odd FFN width cost kernel efficiency? For each width W, the model with every layer's FFN slimmed to
// its first W neurons against the same model at W rounded down to a multiple of --multiple (all heads kept),
// timed side by side in alternating rounds. Prints per pair the median forward time of each, the measured ratio
// and the FLOP ratio: a rounded width that is faster by more than its FLOPs says rounding pays.
// --save DIR also writes both models of the first pair (DIR/wW, DIR/wR) for `prune bench` or whole-process timing.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/io/checkpoint.h"
#include "core/kernels/blas.h"
#include "core/kernels/runtime.h"
#include "eval/flops.h"
#include "eval/latency.h"
#include "prune/export/slim.h"
#include "timing.h"

using namespace hp;

namespace {

using hp::bench::median;

core::Bert ffn_width(const core::Bert& model, int width) {
  const auto& c = model.config();
  core::HeadSet heads(c.num_hidden_layers, std::vector<bool>(c.num_attention_heads, true));
  core::NeuronSet neurons(c.num_hidden_layers, std::vector<bool>(c.intermediate_size, false));
  for (auto& layer : neurons) std::fill(layer.begin(), layer.begin() + width, true);
  return prune::slim_model(model, heads, neurons);
}

}  // namespace

int main(int argc, char** argv) {
  core::ensure_fast_blas(argc, argv);
  CLI::App app{"FFN width: odd widths against widths rounded to a multiple"};
  std::string model_dir = "checkpoints/all-MiniLM-L6-v2", save;
  std::vector<int> widths = {643, 777, 1001, 1203};
  int multiple = 16, rounds = 7, batch = 32, seq = 64;
  app.add_option("--model", model_dir, "model folder");
  app.add_option("--widths", widths, "odd widths to compare with their rounded-down multiples");
  app.add_option("--multiple", multiple, "round down to a multiple of this");
  app.add_option("--rounds", rounds, "alternating rounds (median of each model's round medians)");
  app.add_option("--batch", batch, "batch size");
  app.add_option("--seq", seq, "tokens per sequence");
  app.add_option("--save", save, "write the first pair's models under this folder");
  CLI11_PARSE(app, argc, argv);
  core::set_threads(0);
  std::printf("%s\n", core::runtime_summary().c_str());
  core::LoadOptions lo;
  lo.num_labels = 2;
  const core::Bert model = core::load_bert(model_dir, lo);
  const auto in = eval::synthetic_input(model.config(), batch, seq);
  for (size_t k = 0; k < widths.size(); ++k) {
    const int odd = widths[k], even = odd / multiple * multiple;
    const core::Bert a = ffn_width(model, odd), b = ffn_width(model, even);
    if (k == 0 && !save.empty()) {
      core::save_bert(a, save + "/w" + std::to_string(odd), model_dir);
      core::save_bert(b, save + "/w" + std::to_string(even), model_dir);
    }
    std::vector<double> ta, tb;
    for (int r = 0; r < rounds; ++r) {
      ta.push_back(eval::measure_latency(a, in, 1, 5, 0.3).median_ms);
      tb.push_back(eval::measure_latency(b, in, 1, 5, 0.3).median_ms);
    }
    const double flops = eval::forward_flops(a.config(), batch, seq) / eval::forward_flops(b.config(), batch, seq);
    std::printf("FFN width %d: %.2f ms | %d: %.2f ms | time ratio %.3f, FLOP ratio %.3f (batch %d x %d)\n", odd,
                median(ta), even, median(tb), median(ta) / median(tb), flops, batch, seq);
  }
  return 0;
}
