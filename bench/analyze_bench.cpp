// The cost of `prune analyze`'s attention pass against a plain evaluation forward over the same
// examples (issue #11 §3: ≤ 3×), and the head-distance (Jensen–Shannon) part alone, timed and written
// for bench/head_distance_clark.py, which runs Clark's per-document Python loop on the same examples
// and compares both the time (≥ 20×) and the matrix. Not a test; prints numbers.
#include <CLI/CLI.hpp>
#include <sys/resource.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/attention_pass.h"
#include "analysis/examples.h"
#include "core/data/batching.h"
#include "core/kernels/blas.h"
#include "core/kernels/runtime.h"
#include "core/io/checkpoint.h"
#include "core/data/task_options.h"
#include "core/base/files.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"
#include "eval/evaluator.h"

namespace {

struct Options {
  std::string model = "checkpoints/all-MiniLM-L6-v2";
  std::string task = "sst2";
  std::string split = "dev";
  std::string data_root;
  long examples = 1000;
  int batch = 32;
  int max_seq_len = 128;
  int reps = 3;
  int threads = 0;
  bool noop = true;
  bool distances_only = false;
  std::string dump;  // folder: ids.txt (one example per line) and js.bin (the summed [N, N] matrix)
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

// The first `n` rows of the split; a split with fewer rows is cycled ("dev-length" examples).
std::vector<hp::core::Example> first_rows(std::vector<hp::core::Example> rows, long n) {
  if (n <= 0 || rows.empty()) return rows;
  std::vector<hp::core::Example> out;
  for (long i = 0; i < n; ++i) out.push_back(rows[i % rows.size()]);
  return out;
}

// Times add_js_divergences alone over every example (the maps come from an untimed forward per batch);
// the summed matrix goes to `js`.
double time_distances(const hp::core::Bert& model, const hp::analysis::AnalysisInputs& in,
                      const std::vector<hp::core::Batch>& batches, std::vector<double>& js) {
  const auto& cfg = model.config();
  const int L = cfg.num_hidden_layers, H = cfg.max_heads(), N = L * H;
  js.assign(static_cast<size_t>(N) * N, 0.0);
  double seconds = 0;
  torch::NoGradGuard no_grad;
  for (const auto& b : batches) {
    auto ei = hp::core::encoder_input(b);
    ei.want_attention = true;
    auto out = model.forward(ei);
    std::vector<torch::Tensor> maps(L);
    for (int l = 0; l < L; ++l) maps[l] = out.attentions[l].to(torch::kFloat32).contiguous();
    const long S = b.input_ids.size(1);
    const auto t0 = std::chrono::steady_clock::now();
    for (long e = 0; e < b.input_ids.size(0); ++e) {
      std::vector<const float*> ptrs;
      for (int k = 0; k < N; ++k) ptrs.push_back(maps[k / H].data_ptr<float>() + ((e * H + k % H) * S) * S);
      hp::analysis::add_js_divergences(ptrs, S, in.info[b.index[e]].n, js);
    }
    seconds += seconds_since(t0);
  }
  return seconds;
}

void dump(const std::string& dir, const hp::analysis::AnalysisInputs& in, const std::vector<double>& js, int n_heads,
          double seconds) {
  std::filesystem::create_directories(dir);
  std::string ids;
  for (size_t e = 0; e < in.info.size(); ++e) {
    const auto& row = in.data.ids[e];
    const auto& types = in.data.type_ids[e];
    for (size_t t = 0; t < row.size(); ++t)
      ids += (t ? " " : "") + std::to_string(row[t]) + ":" + std::to_string(types[t]);
    ids += "\n";
  }
  hp::core::write_file_atomic(dir + "/ids.txt", ids);
  hp::core::write_file_atomic(dir + "/js.bin",
                              std::string(reinterpret_cast<const char*>(js.data()), js.size() * sizeof(double)));
  hp::core::write_file_atomic(dir + "/seconds.txt", std::to_string(seconds) + "\n");
  std::printf("wrote %s/ids.txt (%zu examples), seconds.txt and %s/js.bin ([%d, %d] float64)\n", dir.c_str(),
              in.info.size(), dir.c_str(), n_heads, n_heads);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The analysis pass against a plain evaluation forward over the same batches. The two alternate
// (evaluation, pass, evaluation, pass, ...) so that a change in the machine's load falls on both; the ratio
// is the median of the per-round ratios.
void compare_pass_with_eval(const Options& o, const hp::core::Bert& model, const hp::core::TaskSpec& task,
                            const hp::analysis::AnalysisInputs& in, const std::vector<hp::core::Batch>& batches,
                            bool noop) {
  hp::analysis::PassInput pi;
  pi.model = &model;
  pi.data = &in.data;
  pi.info = &in.info;
  pi.batch_size = o.batch;
  pi.max_len = o.max_seq_len;
  pi.noop = noop;
  pi.regression = task.is_regression();
  pi.tag = "bench";
  std::vector<double> evals, passes, ratios;
  for (int r = 0; r < o.reps; ++r) {
    evals.push_back(hp::eval::evaluate(model, task, in.data, batches).seconds);
    passes.push_back(hp::analysis::run_pass(pi).seconds);
    ratios.push_back(passes.back() / evals.back());
  }
  const double t_eval = median_of(evals), t_pass = median_of(passes);
  std::printf("evaluation forward: %.3f s, %.1f examples/s\n", t_eval, in.info.size() / t_eval);
  std::printf("analysis pass%s: %.3f s, %.1f examples/s\n", noop ? " (with the no-op backward)" : "", t_pass,
              in.info.size() / t_pass);
  std::string each;
  for (double x : ratios) each += (each.empty() ? "" : ", ") + std::to_string(x).substr(0, 4);
  std::printf("ratio pass / evaluation: %.2fx, median of %d alternating rounds (%s) (target <= 3x)\n",
              median_of(ratios), o.reps, each.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    hp::core::ensure_fast_blas(argc, argv);
    Options o;
    CLI::App app{"analyze_bench: prune analyze's attention pass against a plain evaluation forward"};
    app.add_option("--model", o.model, "model folder (a fine-tuned one: the pass then includes the no-op backward)");
    app.add_option("--task", o.task, "GLUE task name");
    app.add_option("--split", o.split, "split (its first --examples rows, cycled if it has fewer)");
    app.add_option("--data-root", o.data_root, "data root (default: $HEADPRUNE_DATA or ../shared/data)");
    app.add_option("--examples", o.examples, "examples");
    app.add_option("--batch", o.batch, "batch size of both the evaluation and the pass");
    app.add_option("--max-seq-len", o.max_seq_len, "truncation length");
    app.add_option("--reps", o.reps, "rounds; the evaluation and the pass alternate, medians are reported");
    app.add_option("--threads", o.threads, "intra-op threads; 0 = all cores");
    app.add_flag("!--no-noop", o.noop, "leave out the no-op backward even when the model has a classifier");
    app.add_flag("--distances-only", o.distances_only, "time only the head-distance part");
    app.add_option("--dump", o.dump, "write ids.txt and js.bin here for bench/head_distance_clark.py");
    CLI11_PARSE(app, argc, argv);
    hp::core::set_threads(o.threads);
    std::printf("runtime: %s\n", hp::core::runtime_summary().c_str());

    const auto& task = hp::core::find_task(o.task);
    const auto rows =
        first_rows(hp::core::read_task(task, hp::core::resolve_data_root(o.data_root), o.split), o.examples);
    const hp::core::LoadOptions load = hp::core::task_load_options(task, 42);
    hp::core::LoadReport report;
    const auto model = hp::core::load_bert(o.model, load, &report);
    const auto tok = hp::core::Tokenizer::from_model_dir(o.model);
    const auto counts = hp::analysis::token_counts(tok, rows, o.max_seq_len);
    const auto in = hp::analysis::task_inputs(tok, rows, 0, o.max_seq_len, counts, o.task + "/" + o.split);
    long tokens = 0;
    for (const auto& e : in.info) tokens += e.n;
    const bool noop = o.noop && !report.classifier_initialized && in.data.has_labels;
    std::printf("%s: %zu examples of %s/%s, %.1f tokens on average, batch %d; no-op backward: %s\n", o.model.c_str(),
                in.info.size(), o.task.c_str(), o.split.c_str(), static_cast<double>(tokens) / in.info.size(), o.batch,
                noop ? "yes" : (report.classifier_initialized ? "no (no classifier)" : "no"));

    hp::core::BatchOptions bo;
    bo.batch_size = o.batch;
    bo.pad_id = tok.pad_id();
    const auto batches = hp::core::make_batches(in.data, bo);
    hp::eval::evaluate(model, task, in.data, {batches.front()});  // warm-up

    std::vector<double> js, rounds;
    for (int r = 0; r < o.reps; ++r) rounds.push_back(time_distances(model, in, batches, js));
    const double t_js = median_of(rounds);
    const int N = model.config().num_hidden_layers * model.config().max_heads();
    std::printf("head distances (%d x %d Jensen-Shannon, %zu examples): %.3f s, %.2f ms/example\n", N, N,
                in.info.size(), t_js, 1e3 * t_js / in.info.size());
    if (!o.dump.empty()) dump(o.dump, in, js, N, t_js);
    if (o.distances_only) return 0;
    compare_pass_with_eval(o, model, task, in, batches, noop);
    std::printf("peak resident memory: %.0f MiB\n", peak_rss_mib());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
