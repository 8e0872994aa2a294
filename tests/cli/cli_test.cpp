// The `prune` executable end to end (the catalogue of bad inputs is tests/errors/catalogue.py): exit codes
// and one-line errors of the pruning run, analyze, explain and triggers, --version, and an evaluation on
// the tiny golden model whose JSON must agree with the HF golden logits.
#include <catch2/catch.hpp>
#include <unistd.h>  // getpid

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <torch/types.h>

#include "core/data/glue.h"
#include "core/model/head_mask.h"
#include "core/io/tensor_io.h"
#include "core/kernels/dispatch_probe.h"
#include "core/kernels/isa.h"
#include "core/kernels/lowp_gemm.h"
#include "cli/cli_util.h"
#include "core/kernels/runtime.h"
#include "core/model/bert_config.h"
#include "skip.h"
#include "prune/search/latency_table.h"

using namespace hp::test;

TEST_CASE("prune --version names LibTorch, the BLAS kernel and threads", "[cli]") {
  auto r = run_prune("--version");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("LibTorch " HP_TORCH_VERSION " | "));  // the LibTorch CMake found
  // Debian's LibTorch calls Debian's OpenBLAS (its kernel named); PyPI's carries MKL inside libtorch_cpu.so.
  CHECK_THAT(r.output, Catch::Contains(std::string(HP_TORCH_VERSION).rfind("1.", 0) == 0 ? "BLAS OpenBLAS (kernel "
                                                                                         : "BLAS MKL from "));
  CHECK_THAT(r.output, Catch::Contains("threads "));
  // prune picks the CPU's own kernel, unless OPENBLAS_CORETYPE forces another: then it runs that one and says so.
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"))
    CHECK_THAT(r.output, Catch::Contains(std::string("(kernel ") + forced));
  else
    CHECK_THAT(r.output, !Catch::Contains("Prescott"));
  // How this CPU runs each lower precision: natively, or emulated and saying why.
  CHECK_THAT(r.output, Catch::Contains("| bf16: ") && Catch::Contains("| int8: "));
  CHECK_THAT(r.output, Catch::Contains("\ndispatch"));  // what the dispatch probe measured and chose
}

// The cap as the process reads it at start-up, before any scoped cap (isa::ScopedCap only lowers it in tests):
// HEADPRUNE_MAX_ISA in a child's environment, and the path of the SIMD passes it reports (#61).
TEST_CASE("HEADPRUNE_MAX_ISA set at start: prune --version reports that cap and the SIMD path under it", "[cli][isa]") {
  namespace isa = hp::core::isa;
  const std::string exe = HP_PRUNE_EXE;
  for (const auto level : {isa::Level::kScalar, isa::Level::kAvx2, isa::Level::kAvx512}) {
    const std::string name = isa::name(level);
    const auto r = run_command("HEADPRUNE_MAX_ISA=" + name + " " + exe + " --version");
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("cap " + name + " (HEADPRUNE_MAX_ISA)"));
    // The highest vector path the CPU has at or below the cap, found here without isa::vector_path().
    isa::Level path = isa::Level::kScalar;
    for (const auto l : {isa::Level::kAvx2, isa::Level::kAvx512})
      if (l <= level && isa::cpu_has(l)) path = l;
    CHECK_THAT(r.output, Catch::Contains(std::string("| SIMD passes ") + isa::name(path)));
    // No bf16 path below avx512_bf16: the dispatch probe has nothing to time (core/kernels/dispatch_probe.h).
    CHECK_THAT(r.output, Catch::Contains("dispatch: nothing to measure (no bf16 path on this CPU under the cap)"));
  }
  const auto unset = run_command("env -u HEADPRUNE_MAX_ISA " + exe + " --version");
  CHECK_THAT(unset.output, Catch::Contains(std::string("cap ") + isa::name(isa::cpu_level()) + " (none set)"));
  const auto bad = run_command("HEADPRUNE_MAX_ISA=avx3 " + exe + " --version");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("error: HEADPRUNE_MAX_ISA = 'avx3' is not an instruction-set level; use one of "
                                         "scalar, avx2, avx_vnni, avx512, avx512_vnni, avx512_bf16, amx"));
}

TEST_CASE("--help shows each option's value type (INT, FLOAT, TEXT), not TEXT for everything", "[cli]") {
  const auto eval = run_prune("eval --help");
  CHECK_THAT(eval.output,
             Catch::Contains("--batch INT") && Catch::Contains("--max-seq-len INT") && Catch::Contains("--model TEXT"));
  CHECK_THAT(run_prune("analyze --help").output, Catch::Contains("--alpha FLOAT") && Catch::Contains("--examples INT"));
  CHECK_THAT(run_prune("report --help").output, Catch::Contains("--examples INT,..."));
  // --precision is the inference precision where a command runs inference, the training one in `prune train`,
  // and absent where it would change nothing.
  CHECK_THAT(eval.output, Catch::Contains("[run.precision]") && Catch::Contains("--calibrate INT"));
  CHECK_THAT(run_prune("train --help").output, Catch::Contains("[train.precision]"));
  CHECK_THAT(run_prune("analyze --help").output, !Catch::Contains("--precision"));
}

TEST_CASE("prune eval on the HF golden's rows, heads masked, scores the accuracy of HF's logits", "[cli][parity]") {
  // tiny_bert.h5's rows and labels as an MNLI subset (3 classes, like the tiny model), its mask1 on the command
  // line, batches of 3 and 1.
  const auto g = hp::core::read_hdf5(kTinyBertH5);
  const auto a = hp::core::read_hdf5_strings(kTinyBertH5, "text_a");
  const auto b = hp::core::read_hdf5_strings(kTinyBertH5, "text_b");
  const auto& task = hp::core::find_task("mnli_subset");
  const auto labels = g.at("labels");
  const auto root = hp::test::scratch_dir("hp_cli_eval_golden");
  std::filesystem::create_directories(root / task.folder);
  {
    std::ofstream f(root / task.folder / "mnli_matched.tsv");
    for (size_t i = 0; i < a.size(); ++i)
      f << task.labels.at(labels[i].item<long>()) << "\t" << a[i] << "\t" << b[i] << "\n";  // b "" = one sentence
  }
  const auto mask = g.at("head_mask/mask1");
  hp::core::HeadSet keep(mask.size(0), std::vector<bool>(mask.size(1)));
  for (long l = 0; l < mask.size(0); ++l)
    for (long h = 0; h < mask.size(1); ++h) keep[l][h] = mask[l][h].item<float>() != 0.0f;
  const std::string spec = hp::core::format_head_mask(keep), out = (root / "eval.json").string();
  std::filesystem::remove(out);  // a result of another build's config would be refused (the run-folder rule)
  auto r = run_prune("eval --model " + kTinyBert + " --task mnli_subset --data-root " + root.string() +
                     " --max-seq-len 64 --batch 3 --mask '" + spec + "' --output " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(slurp(out));
  CHECK(j["examples"] == a.size());
  CHECK(j["heads_kept"] == 5);
  CHECK(j["mask"] == spec);
  // HF's accuracy on these rows: the argmax of its masked logits against the labels.
  const double hf = g.at("logits_masked/mask1").argmax(1).eq(labels).to(torch::kFloat64).mean().item<double>();
  CHECK(j["metrics"]["accuracy"].get<double>() == Approx(hf).margin(1e-12));
}

TEST_CASE("prune infer reproduces HF's logits from raw text", "[cli][parity]") {
  const std::string golden = kTinyBertH5;
  auto a = hp::core::read_hdf5_strings(golden, "text_a");
  auto b = hp::core::read_hdf5_strings(golden, "text_b");
  std::string input = "/tmp/hp_cli_infer_" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream f(input);
    for (size_t i = 0; i < a.size(); ++i) f << a[i] << (b[i].empty() ? "" : "\t" + b[i]) << "\n";
  }
  auto r = run_prune("infer --model " + kTinyBert + " --max-seq-len 64 --input " + input + " --output " + input +
                     ".h5 --hidden");
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto ours = hp::core::read_hdf5(input + ".h5");
  auto ref = hp::core::read_hdf5(golden);
  CHECK((ours.at("logits") - ref.at("logits")).abs().max().item<double>() <= 1e-4);
  CHECK(torch::equal(ours.at("lengths"), ref.at("attention_mask").sum(1)));
  CHECK(ours.at("last_hidden").size(2) == 32);
}

TEST_CASE("prune infer --precision bf16 / int8: logits near HF's; without a classifier it warns as at fp32",
          "[cli][lowp]") {
  const std::string golden = kTinyBertH5;
  auto a = hp::core::read_hdf5_strings(golden, "text_a");
  auto b = hp::core::read_hdf5_strings(golden, "text_b");
  const auto dir = hp::test::scratch_dir("hp_cli_infer_lowp");
  std::filesystem::create_directories(dir);
  const std::string input = (dir / "in.txt").string();
  {
    std::ofstream f(input);
    for (size_t i = 0; i < a.size(); ++i) f << a[i] << (b[i].empty() ? "" : "\t" + b[i]) << "\n";
  }
  const auto ref = hp::core::read_hdf5(golden).at("logits");
  for (const char* precision : {"bf16", "int8"}) {
    INFO(precision);
    const std::string out = (dir / (std::string(precision) + ".h5")).string();
    auto r = run_prune(std::string("infer --model ") + kTinyBert + " --max-seq-len 64 --precision " + precision +
                       " --input " + input + " --output " + out);
    INFO(r.output);
    REQUIRE(r.code == 0);
    const auto ours = hp::core::read_hdf5(out).at("logits");
    const double diff = (ours - ref).abs().max().item<double>();
    // The lower precision ran, not float32 (bf16 without AVX512_BF16 runs as float32: core/kernels/lowp_gemm.h).
    if (std::string(precision) == "int8" || hp::core::lowp_native(hp::core::Precision::kBf16)) CHECK(diff > 1e-6);
    CHECK(diff < 0.05 * ref.abs().max().item<double>());
    // int8 is calibrated on 512 examples of data.task's train split unless --calibrate 0 says dynamic.
    CHECK(hp::core::read_hdf5_attrs(out).at("calibrated_examples") == (std::string(precision) == "int8" ? "512" : "0"));
  }
  // --calibrate past the train split's size calibrates on what is there, records that count and says so.
  const auto root = dir / "data";
  std::filesystem::create_directories(root / "glue" / "SST-2");
  {
    std::ofstream f(root / "glue" / "SST-2" / "train.tsv");
    f << "sentence\tlabel\n";
    for (int i = 0; i < 20; ++i) f << a[i % a.size()] << "\t" << i % 2 << "\n";
  }
  const std::string few = (dir / "int8_few.h5").string();
  auto rf = run_prune(std::string("infer --model ") + kTinyBert + " --max-seq-len 64 --precision int8 --task sst2" +
                      " --data-root " + root.string() + " --calibrate 100000 --input " + input + " --output " + few);
  INFO(rf.output);
  REQUIRE(rf.code == 0);
  CHECK(hp::core::read_hdf5_attrs(few).at("calibrated_examples") == "20");
  CHECK_THAT(rf.output, Catch::Contains("run.calibrate = 100000 but sst2's train split holds 20 examples"));
  const std::string dynamic = (dir / "int8_dynamic.h5").string();
  auto r = run_prune(std::string("infer --model ") + kTinyBert + " --max-seq-len 64 --precision int8 --calibrate 0" +
                     " --input " + input + " --output " + dynamic);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, !Catch::Contains("calibrated on"));
  CHECK(hp::core::read_hdf5_attrs(dynamic).at("calibrated_examples") == "0");
  const auto dyn = hp::core::read_hdf5(dynamic).at("logits");
  CHECK_FALSE(torch::equal(dyn, hp::core::read_hdf5((dir / "int8.h5").string()).at("logits")));
  CHECK((dyn - ref).abs().max().item<double>() < 0.05 * ref.abs().max().item<double>());
  if (!std::filesystem::exists(kMiniLM + "/config.json")) {
    hp::test::skip("the pretrained model " + kMiniLM + " is missing (scripts/setup.sh links it)");
    return;
  }
  for (const char* precision : {"fp32", "int8"}) {
    auto r = run_prune(std::string("infer --model ") + kMiniLM + " --precision " + precision + " --input " + input +
                       " --output " + (dir / "minilm.json").string());
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("has no classifier: logits come from a fresh classifier"));
  }
}

TEST_CASE("prune export writes an HF folder and an HDF5 file with the same tensors", "[cli]") {
  std::string out = "/tmp/hp_cli_export_" + std::to_string(getpid());
  auto r = run_prune("export --model " + kTinyBert + " --to " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  auto st = hp::core::read_safetensors(out + "/model.safetensors");
  auto h5 = hp::core::read_hdf5(out + "/model.h5");
  auto src = hp::core::read_safetensors(kTinyBert + "/model.safetensors");
  REQUIRE(st.size() == src.size());
  REQUIRE(h5.size() == st.size());
  for (const auto& [k, v] : src) {
    INFO(k);
    CHECK(torch::equal(st.at(k), v));
    CHECK(torch::equal(h5.at(k), v));
  }
}

TEST_CASE("prune export --dense: a model without removed heads is written unchanged, with a warning", "[cli][dense]") {
  const std::string out = hp::test::scratch_dir("hp_cli_dense").string();
  std::filesystem::remove_all(out);
  auto r = run_prune("export --model " + kTinyBert + " --dense --to " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("has no removed heads; --dense writes it unchanged"));
  auto a = hp::core::read_safetensors(kTinyBert + "/model.safetensors"),
       b = hp::core::read_safetensors(out + "/model.safetensors");
  for (const auto& [name, t] : b) {
    const std::string src = a.count(name) ? name : "bert." + name;
    if (a.count(src)) CHECK(torch::equal(a.at(src).to(torch::kFloat32), t.to(torch::kFloat32)));
  }
}

TEST_CASE("configs/README.md is the current output of prune config --doc", "[cli]") {
  auto r = run_prune("config --doc");
  REQUIRE(r.code == 0);
  std::ifstream in(kSourceDir + "/configs/README.md");
  std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO("regenerate configs/README.md from `prune config --doc` (see its header)");
  CHECK_THAT(readme, Catch::EndsWith(r.output));
}

TEST_CASE("every preset in configs/ loads and validates", "[cli]") {
  for (const char* name : {"sst2", "mrpc", "cola", "rte", "stsb", "mnli"}) {
    INFO(name);
    auto r = run_prune("train --dump-config --config " + kSourceDir + "/configs/" + name + ".yaml");
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("task: "));
  }
}

namespace {

// curves.csv without its timing column (eval_examples_per_s is measured, so it differs run to run).
std::string curves_without_timing(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, out;
  int drop = -1;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (drop < 0)
      for (size_t i = 0; i < cells.size(); ++i)
        if (cells[i] == "eval_examples_per_s") drop = static_cast<int>(i);
    REQUIRE(drop >= 0);
    for (size_t i = 0; i < cells.size(); ++i)
      if (static_cast<int>(i) != drop) out += cells[i] + ",";
    out += "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("the pruning run: curves for every criterion, exactly N heads exported, verified, resumable",
          "[cli][prune]") {
  const auto out = hp::test::scratch_dir("hp_prune_run");
  std::filesystem::remove_all(out);
  const std::string args = tiny_prune_args(out.string()) + " --target-heads 3 --method taylor --recover-steps 0";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("3/8 heads (criterion taylor)"));
  // Speed-ups to three digits: "speedup x1.21 at batch 32 (FLOP bound x1.21), x1.28 at batch 1".
  const std::regex three_digits(
      R"(speedup x\d+(\.\d{1,2})? at batch 32 \(FLOP bound x\d+(\.\d{1,2})?)"
      R"((, above it: timing suspect)?\), x\d+(\.\d{1,2})?( \(timing suspect\))? at batch 1;)");
  CHECK(std::regex_search(r.output, three_digits));
  auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(summary["final"]["heads_kept"] == 3);
  CHECK(summary["final"]["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  CHECK(summary["final"]["latency"]["batch32"]["flop_bound"].get<double>() > 1.0);
  for (const char* c : {"confidence", "lrp", "taylor", "attattr", "random", "loo"}) {
    CHECK(summary["criteria"][c]["curve"].size() == 5);
    CHECK(std::filesystem::exists(out / (std::string("importance_") + c + ".svg")));
  }
  auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  int pruned = 0;
  for (auto& [layer, heads] : cfg["pruned_heads"].items()) pruned += static_cast<int>(heads.size());
  CHECK(pruned == 5);
  const std::string card = slurp(out / "model" / "README.md");  // the model card
  CHECK_THAT(card, Catch::Contains("with 3 of 8 attention heads") && Catch::Contains("config.resolved.yaml") &&
                       Catch::Contains("| 0 | ") && Catch::Contains("license: other"));
  CHECK(std::filesystem::exists(out / "curves.svg"));
  CHECK(std::filesystem::exists(out / "run.h5"));
  const std::string curves = slurp(out / "curves.csv");
  CHECK(std::count(curves.begin(), curves.end(), '\n') == 1 + 6 * 5);

  // prune analyze --prune-run: the slimmed export (no recovery steps: the masked model) against the model
  // it pruned. Its heads sit at their original indices; in layer 0 a kept head sees the same input, so
  // every statistic is unchanged there, and the removed heads have no values.
  {
    const auto an = out / "analysis";
    auto a = run_prune("analyze --model " + kTinyBert + " --task mnli_subset --max-seq-len 32 --data-root " +
                       tiny_data_root() + " --split mismatched --examples 12 --batch 4 --prune-run " + out.string() +
                       " --out " + an.string());
    INFO(a.output);
    REQUIRE(a.code == 0);
    const auto j = nlohmann::json::parse(slurp(an / "analysis.json"));
    const auto& slim = j["prune_run"]["slim_model"];
    REQUIRE(slim.is_object());
    CHECK(slim["heads"] == 3);
    auto kept = hp::core::parse_head_mask("", 2, 4);
    for (auto& [layer, heads] : cfg["pruned_heads"].items())
      for (const auto& h : heads) kept[std::stoi(layer)][h.get<int>()] = false;
    int checked = 0;
    for (int h = 0; h < 4; ++h) {
      const auto& d = slim["delta"]["attn_cls"][0][h];
      CHECK(kept[0][h] == !d.is_null());
      if (!kept[0][h]) continue;
      CHECK(std::abs(d.get<double>()) < 1e-6);
      ++checked;
    }
    for (int h = 0; h < 4; ++h) CHECK(kept[1][h] == !slim["delta"]["entropy"][1][h].is_null());
    CHECK(checked + (kept[1][0] + kept[1][1] + kept[1][2] + kept[1][3]) == 3);
    CHECK(slim["roles_kept"].contains("local"));
  }

  // Kill simulation: the outputs and half of the recorded points are gone, as after a kill mid-run.
  std::filesystem::remove(out / "curves.csv");
  std::filesystem::remove(out / "summary.json");
  int removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(out / "state" / "points"))
    if (removed++ % 2 == 0) std::filesystem::remove(e.path());
  std::filesystem::remove_all(out / "state" / "importance");
  auto again = run_prune(args);
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK_THAT(again.output, Catch::Contains("resuming"));
  CHECK(curves_without_timing(slurp(out / "curves.csv")) == curves_without_timing(curves));

  // The same folder with another config is refused, naming the folder and the fix.
  auto other = run_prune(tiny_prune_args(out.string()) + " --target-heads 2 --method taylor --recover-steps 0");
  CHECK(other.code == 2);
  CHECK_THAT(other.output, Catch::Contains("holds another pruning run") && Catch::Contains("--out NEW_DIR"));
}

TEST_CASE("the pruning run with a FLOPs budget: search, curves, slimmed export with FFN widths, resumable",
          "[cli][prune][budget]") {
  const auto out = hp::test::scratch_dir("hp_prune_budget");
  std::filesystem::remove_all(out);
  const std::string args = tiny_prune_args(out.string()) +
                           " --criteria taylor --target-flops 0.5 --recover-steps 2 --set train.train_split=matched"
                           " --set train.eval_split=mismatched --set train.eval_every=1";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("FFN neurons, 50% of FLOPs (kwon)"));
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& f = summary["final"];
  const auto& b = f["budget"];
  CHECK(b["unit"] == "FLOPs");
  CHECK(b["kept"].get<double>() <= 0.5);
  CHECK(b["kept"].get<double>() > 0.45);
  CHECK(b["folded_vs_scaled_max_abs_logit_diff"].get<double>() <= 1e-5);
  for (const char* step : {"search", "rearranged", "tuned"}) CHECK(b["metrics_by_step"].contains(step));
  // The export: per-layer FFN widths in config.json, as many as the summary says, and HF loads it.
  const auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  REQUIRE(cfg.contains("intermediate_sizes"));
  CHECK(cfg["intermediate_sizes"] == b["ffn_widths"]);
  int widths = 0;
  for (const auto& w : cfg["intermediate_sizes"]) widths += w.get<int>();
  CHECK(widths == b["neurons_kept"].get<int>());
  CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  if (std::filesystem::exists(HP_REF_PYTHON))
    CHECK_THAT(f["hf_check"]["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
  CHECK_THAT(f["hf_check"]["transformers4"].get<std::string>(), Catch::StartsWith("not applicable"));
  const std::string card = slurp(out / "model" / "README.md");
  CHECK_THAT(card, Catch::Contains("FFN neurons kept") && Catch::Contains("of the encoder's FLOPs"));
  // The budget curves: 8 budgets x (3 steps of the search, its recovery, Taylor, magnitude, random), the head
  // criterion on the same axis, and the control.
  const std::string csv = slurp(out / "budget_curves.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 8 * 7 + 5 + 1);
  CHECK_THAT(csv, Catch::Contains("kwon-tuned,") && Catch::Contains("taylor-search,") &&
                      Catch::Contains("random-search,") && Catch::Contains("heads only: taylor,"));
  const auto& points = summary["budget_curves"]["points"];
  CHECK(std::count_if(points.begin(), points.end(), [](const auto& p) { return p["method"] == "kwon-rearranged"; }) ==
        8);
  CHECK(summary["budget_curves"]["unit"] == "FLOPs");
  // The recovered line: each budget's tuned choice, of the same size, fine-tuned for --recover-steps steps (the
  // default prune.curve_recover_steps = -1) scaled by what it removed, with only the training record left behind.
  std::map<std::pair<double, std::string>, const nlohmann::json*> by_budget;
  for (const auto& p : points) by_budget[{p["kept_fraction"].get<double>(), p["method"].get<std::string>()}] = &p;
  int recovered = 0;
  for (const auto& [key, p] : by_budget) {
    if (key.second != "kwon-recovered") continue;
    const auto tuned = by_budget.find({key.first, "kwon-tuned"});
    REQUIRE(tuned != by_budget.end());
    CHECK((*p)["flops"] == (*tuned->second)["flops"]);
    CHECK((*p)["heads_kept"] == (*tuned->second)["heads_kept"]);
    ++recovered;
  }
  CHECK(recovered == 8);
  // --recover-steps 2 scaled by what each point removed (prune.recover_scale = removed): 2·(1 − F)/0.5 rounded, at
  // least 1, for F = 100%, 90%, ..., 30%.
  const int steps[8] = {1, 1, 1, 1, 2, 2, 2, 3};
  for (int k = 0; k < 8; ++k) {
    const auto dir = out / "budget_recover" / std::to_string(k);
    INFO(dir);
    CHECK(nlohmann::json::parse(slurp(dir / "train_result.json"))["steps"] == steps[k]);
    CHECK(!std::filesystem::exists(dir / "best"));
    CHECK(!std::filesystem::exists(dir / "state"));
  }
  // The control: the unpruned model trained as long as the longest recovery (30%: 3 steps), a point at 100%.
  CHECK(nlohmann::json::parse(slurp(out / "budget_control" / "train_result.json"))["steps"] == 3);
  const auto control =
      std::find_if(points.begin(), points.end(), [](const auto& p) { return p["method"] == "control"; });
  REQUIRE(control != points.end());
  CHECK((*control)["kept_fraction"].get<double>() == Approx(1.0));
  CHECK((*control)["heads_kept"] == 8);
  CHECK_THAT(r.output, Catch::Contains("the control: the unpruned model trained 3 steps, as long as the longest "
                                       "recovery on the curves"));

  // Killed after the search: the curves, the summary and some points gone; the rerun resumes to the same.
  std::filesystem::remove(out / "budget_curves.csv");
  std::filesystem::remove(out / "summary.json");
  int removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(out / "state" / "points"))
    if (removed++ % 3 == 0) std::filesystem::remove(e.path());
  auto again = run_prune(args);
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK(slurp(out / "budget_curves.csv") == csv);
  const auto resumed = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(resumed["final"]["budget"]["ffn_widths"] == b["ffn_widths"]);
  CHECK(resumed["final"]["metrics"] == f["metrics"]);
}

TEST_CASE("prune --target-layers N: three layer choices evaluated, the chosen one slimmed, recovered, exported",
          "[cli][prune][layers]") {
  const auto out = hp::test::scratch_dir("hp_prune_layers");
  std::filesystem::remove_all(out);
  const std::string args = tiny_prune_args(out.string()) +
                           " --criteria taylor --target-layers 1 --recover-steps 2 --set train.train_split=matched"
                           " --set train.eval_split=mismatched --set train.eval_every=1";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("keep 1 of 2 layers by fisher") &&
                           Catch::Contains("mismatched: 1/2 layers, 4/8 heads (layers fisher)"));
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& f = summary["final"];
  CHECK(f["method"] == "layers");
  CHECK(f["criterion"] == "fisher");
  const auto& d = f["layers"];
  REQUIRE(d["fisher_loss"].size() == 2);
  // fisher keeps the layer whose removal the mask gradients say costs more; top and alternate drop layer 1.
  const int fisher_kept = d["fisher_loss"][0].get<double>() >= d["fisher_loss"][1].get<double>() ? 0 : 1;
  CHECK(d["choices"]["fisher"]["kept"] == std::vector<int>{fisher_kept});
  CHECK(d["choices"]["top"]["kept"] == std::vector<int>{0});
  CHECK(d["choices"]["alternate"]["kept"] == std::vector<int>{0});
  CHECK(f["metrics_before_recovery"] == d["choices"]["fisher"]["metrics"]);
  CHECK(f["mask"] == "layers:" + std::to_string(1 - fisher_kept));
  const auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  CHECK(cfg["num_hidden_layers"] == 1);
  CHECK((!cfg.contains("pruned_heads") || cfg["pruned_heads"].empty()));
  CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  // One whole layer of the tiny model's parameters left: 4 heads, 37 neurons and 6 x 32 biases and LayerNorms.
  const long layer_params = 4 * (4 * 32 * 8 + 3 * 8) + 37 * (2 * 32 + 1) + 6 * 32;
  CHECK(f["params"].get<long>() == f["params_unpruned"].get<long>() - layer_params);
  CHECK(nlohmann::json::parse(slurp(out / "recover" / "train_result.json"))["steps"] == 2);
  if (std::filesystem::exists(HP_REF_PYTHON))
    CHECK_THAT(f["hf_check"]["transformers4"].get<std::string>(), Catch::StartsWith("passed"));
  const std::string card = slurp(out / "model" / "README.md");
  const std::string was = std::to_string(fisher_kept);
  CHECK_THAT(card, Catch::Contains("Whole layers kept: 1 of the unpruned model's, [" + was + "]") &&
                       Catch::Contains("| 0 (was " + was + ") | 4 of 4 |"));

  // prune report on the run: the whole-layer result; the slimmed model (fewer layers) left out of the views, said.
  const auto rep = run_prune("report " + out.string() + " --data-root " + tiny_data_root() + " --max-seq-len 32 --out " +
                             (out / "report.html").string());
  INFO(rep.output);
  REQUIRE(rep.code == 0);
  CHECK_THAT(rep.output, Catch::Contains("keeps 1 of 2 layers: the attention views show the unpruned model alone"));
  const std::string html = slurp(out / "report.html");
  CHECK_THAT(html, Catch::Contains("Whole-layer result") && Catch::Contains("layers kept by fisher") &&
                       Catch::Contains("layers kept by alternate"));

  // Resumed after stage 5: the choice is read back, not made again, and the run ends the same.
  std::filesystem::remove(out / "summary.json");
  auto again = run_prune(args);
  INFO(again.output);
  REQUIRE(again.code == 0);
  CHECK_THAT(again.output, !Catch::Contains("keep 1 of 2 layers by"));
  const auto resumed = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(resumed["final"]["layers"] == d);
  CHECK(resumed["final"]["metrics"] == f["metrics"]);
}

TEST_CASE("prune --target-layers with a bad count, a bad choice or another target: one line, exit 2",
          "[cli][prune][layers][bad]") {
  const auto out = hp::test::scratch_dir("hp_prune_layers_bad");
  std::filesystem::remove_all(out);
  const std::string base = tiny_prune_args(out.string()) + " --criteria taylor";
  for (const auto& [extra, want] : std::vector<std::pair<std::string, std::string>>{
           {" --target-layers 2", "prune.target_layers = 2 but the model has 2 layers; use 1..1"},
           {" --target-layers 1 --layer-choice middle", "prune.layer_choice = 'middle'; use fisher, top or alternate"},
           {" --target-layers 1 --target-heads 4", "prune.target_layers and prune.target_heads are both set"},
           {" --target-layers 1 --target-flops 0.5", "a FLOPs, parameter or latency budget are both set"}}) {
    INFO(extra);
    const auto r = run_prune(base + extra);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(want));
    CHECK(!std::filesystem::exists(out / "state"));
  }
}

TEST_CASE("the pruning run with a latency budget: the table measured, or reused from the folder, and the target met",
          "[cli][prune][budget][latency]") {
  const auto first = hp::test::scratch_dir("hp_prune_latency_a"), out = hp::test::scratch_dir("hp_prune_latency_b");
  std::filesystem::remove_all(first);
  std::filesystem::remove_all(out);
  const std::string flags = " --criteria taylor --recover-steps 0 --set prune.latency=true"
                            " --set prune.latency_batch=4 --set prune.budget_schedule=100,60,30";
  // Measured: a target above the unpruned model is refused with what it takes, and nothing is written.
  auto high = run_prune(tiny_prune_args(first.string()) + flags + " --target-latency 100000");
  INFO(high.output);
  CHECK(high.code == 2);
  CHECK_THAT(high.output, Catch::Contains("[latency table] done: 23 configurations") &&
                              Catch::Contains("error: prune.target_latency = 1e+05 ms but the unpruned model takes") &&
                              Catch::Contains("at batch 4 x 32 tokens at fp32 on this machine"));
  CHECK(!std::filesystem::exists(first));

  // A table already in the folder, written here by hand with this machine's key, is used as it is (timings
  // under ctest -j are too noisy to pick a target between two measurements): 1 ms fixed, attention
  // 0.1 + 0.5/head, FFN 0.1 + 0.01/neuron, 2 layers of 4 heads and 37 neurons → 1 + 2 (0.1 + 2) +
  // 2 (0.1 + 0.37) = 6.14 ms unpruned; one head and nothing else 1 + 2 (0.1 + 0.1) + 0.5 = 1.9 ms.
  hp::core::set_threads(0);  // the key names the thread count: all cores, as prune's run.threads = 0
  hp::core::apply_measured_dispatch();  // and the attention products prune's dispatch takes
  const auto arch = hp::core::read_bert_config(kTinyBert + "/config.json");
  hp::prune::LatencyTable t = hp::prune::latency_layout(arch, 4, 32, hp::core::Precision::kFp32);
  t.fixed_ms = 1.0, t.unpruned_ms = 6.14;
  t.attention.intercept = 0.1, t.attention.slope = 0.5;
  t.ffn.intercept = 0.1, t.ffn.slope = 0.01;
  std::filesystem::create_directories(out);
  const std::string table_text = nlohmann::json(t).dump(2) + "\n";
  { std::ofstream(out / "latency_table.json") << table_text; }
  auto refused = [&](const std::string& target, const std::string& expect) {
    auto r = run_prune(tiny_prune_args(out.string()) + flags + " --target-latency " + target);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(expect) && !Catch::Contains("[latency table]"));
    CHECK(std::distance(std::filesystem::directory_iterator(out), {}) == 1);  // the table alone, unchanged
    CHECK(slurp(out / "latency_table.json") == table_text);
  };
  refused("7", "error: prune.target_latency = 7 ms but the unpruned model takes 6.14 ms");
  refused("1.5", "error: prune.target_latency = 1.5 ms is below the 1.9 ms that the embeddings, LayerNorms, "
                 "classifier and one head take");
  const std::string args = tiny_prune_args(out.string()) + flags + " --target-latency 4";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, !Catch::Contains("[latency table]") && !Catch::Contains("measuring again"));
  CHECK(slurp(out / "latency_table.json") == table_text);
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& b = summary["final"]["budget"];
  CHECK(b["unit"] == "latency");
  CHECK(b["target"].get<double>() == Approx(4 / 6.14));
  CHECK(b["latency"]["target"].get<double>() == 4);
  CHECK(b["latency"]["measured"].get<double>() > 0);
  // The prediction by hand from the kept heads and widths, within the target.
  double predicted = 1.0;
  for (int l = 0; l < 2; ++l) {
    const int h = b["heads_per_layer"][l], w = b["ffn_widths"][l];
    predicted += (h ? 0.1 + 0.5 * h : 0) + (w ? 0.1 + 0.01 * w : 0);
  }
  CHECK(b["latency"]["predicted"].get<double>() == Approx(predicted));
  CHECK(predicted <= 4 + 1e-9);
  // The search spends the budget: at most one head's cost is left, plus the intercepts of emptied sublayers.
  CHECK(predicted > 4 - 0.5 - 4 * 0.1);
  // 100% and 60% of 6.14 ms are reachable, 30% (1.84 ms) is below one head: skipped, and said so.
  const std::string csv = slurp(out / "budget_curves.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 2 * 6 + 5);
  CHECK_THAT(r.output, Catch::Contains("30%: below what one head costs"));
  CHECK_THAT(slurp(out / "model" / "README.md"), Catch::Contains("of the unpruned model's latency at batch 4 x 32"));
  // A table of another machine or shape is measured again.
  t.key = "another machine";
  { std::ofstream(first.string() + ".json") << nlohmann::json(t).dump(); }
  std::filesystem::create_directories(first);
  std::filesystem::copy_file(first.string() + ".json", first / "latency_table.json");
  auto other = run_prune(tiny_prune_args(first.string()) + flags + " --target-latency 100000");
  CHECK_THAT(other.output, Catch::Contains("was measured for another shape, precision or machine (another machine); "
                                           "measuring again") &&
                               Catch::Contains("[latency table] done"));
  // This machine's fp32 table, and a run at int8: measured again at int8, the precision its model is timed at.
  { std::ofstream(first / "latency_table.json") << table_text; }
  auto int8 = run_prune(tiny_prune_args(first.string()) + flags + " --precision int8 --target-latency 100000");
  INFO(int8.output);
  CHECK(int8.code == 2);
  CHECK_THAT(int8.output, Catch::Contains("measuring again") && Catch::Contains("[latency table] done") &&
                              Catch::Contains("tokens at int8 on this machine"));
}

TEST_CASE("the pruning run: bad input gives a one-line error and writes nothing", "[cli][prune][bad]") {
  const auto out = hp::test::scratch_dir("hp_prune_bad");
  std::filesystem::remove_all(out);
  const std::string base = tiny_prune_args(out.string());
  std::vector<ErrorCase> cases = {
      {base + " --criteria taylor,gradnorm", "unknown criterion 'gradnorm'", 2},
      {base + " --target-heads 9", "prune.target_heads = 9 but the model has 8 heads", 2},
      {base + " --target-heads -1", "prune.target_heads = -1", 2},
      {base + " --set prune.schedule=0,50,25", "prune.schedule is not monotonic", 2},
      {base + " --method magic", "prune.method: unknown criterion 'magic'", 2},
      {base + " --criteria gates", "prune.gates_run is empty", 2},
      {base + " --criteria gates --gates-run /nonexistent", "/nonexistent/best/gates.safetensors: not found", 1},
      {base + " --set data.task=rte", "prune.eval_split = 'mismatched' is not a split of rte", 2},
      {base + " --set data.task=rte --set prune.rank_split=train --set prune.eval_split=dev", "RTE", 1},
      {base + " --target-heads 1 --set prune.min_heads_per_layer=1",
       "below the 2 heads prune.min_heads_per_layer keeps", 2},
      {base + " --target-latency -1", "prune.target_latency = -1.000000; use a time in ms", 2},
      {base + " --target-latency 5 --target-flops 0.5",
       "more than one of prune.target_flops, target_params and target_latency is set; give one", 2},
      {base + " --target-latency 5", "prune.target_latency draws its curves against measured latency", 2},
      {base + " --target-latency 5 --set prune.latency=true --set prune.latency_seq=100000",
       "prune.latency_seq = 100000; use 1..", 2},
  };
  check_errors(cases, "", out);
}

TEST_CASE("the pruning run with --method gates under a FLOPs budget: CoFi gates on the budget curves, exported",
          "[cli][prune][budget]") {
  const auto out = hp::test::scratch_dir("hp_prune_gates_budget");
  std::filesystem::remove_all(out);
  const std::string args = tiny_prune_args(out.string()) +
                           " --criteria taylor --target-flops 0.5 --method gates --set train.train_split=matched"
                           " --set train.eval_split=mismatched --set train.max_steps=12 --set gates.lr=0.5"
                           " --set prune.budget_schedule=[100,50] --set prune.curve_recover_steps=0";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("FFN neurons, 50% of FLOPs (gates)"));
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& f = summary["final"];
  const auto& b = f["budget"];
  CHECK(f["method"] == "gates");
  CHECK(b["unit"] == "FLOPs");
  // On the budget within one neuron: the gated run's own count, checked again from its mask and unit costs.
  const auto tr = nlohmann::json::parse(slurp(out / "gates" / "train_result.json"));
  const double head = tr["budget"]["head_cost"], neuron = tr["budget"]["neuron_cost"];
  const double total = head * 8 + neuron * 2 * 37;
  const auto keep = hp::core::parse_mask(tr["mask"].get<std::string>(), 2, 4, 37);
  const double spent = head * hp::core::count_kept(keep.heads) + neuron * hp::core::count_kept(keep.neurons);
  CHECK(spent / total <= 0.5 + 1e-12);
  CHECK(0.5 - spent / total < neuron / total);
  CHECK(b["kept"].get<double>() == Approx(spent / total));
  // The export has the gated structure and Hugging Face loads it with our logits.
  const auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  REQUIRE(cfg.contains("intermediate_sizes"));
  CHECK(cfg["intermediate_sizes"] == b["ffn_widths"]);
  CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  if (std::filesystem::exists(HP_REF_PYTHON))
    CHECK_THAT(f["hf_check"]["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
  // The gated point beside the search's on the budget curves, at the fraction it kept.
  const auto& points = summary["budget_curves"]["points"];
  const auto gates = std::find_if(points.begin(), points.end(), [](const auto& p) { return p["method"] == "gates"; });
  REQUIRE(gates != points.end());
  CHECK((*gates)["kept_fraction"].get<double>() == Approx(spent / total).epsilon(1e-6));
  CHECK((*gates)["mean"].get<double>() == Approx(f["metrics"][summary["metric"].get<std::string>()].get<double>()));
  CHECK_THAT(slurp(out / "budget_curves.csv"), Catch::Contains("gates,"));
  // The gate trajectories of neurons and sublayers are in the gated run's run.h5.
  const auto h5 = hp::core::read_hdf5((out / "gates" / "run.h5").string());
  for (const char* key : {"gates/neuron_p_open", "gates/mha_p_open", "gates/ffn_p_open"}) CHECK(h5.count(key));
}

TEST_CASE("the pruning run with gates over heads, neurons, hidden channels and layers: the channels closed leave the "
          "export, which transformers loads with remote code",
          "[cli][prune][budget][hidden]") {
  const auto out = hp::test::scratch_dir("hp_prune_gates_hidden");
  std::filesystem::remove_all(out);
  const std::string args = tiny_prune_args(out.string()) +
                           " --criteria taylor --target-flops 0.3 --method gates --structures heads,neurons,hidden,layers"
                           " --set train.train_split=matched --set train.eval_split=mismatched --set train.max_steps=24"
                           " --set gates.lr=0.5 --set prune.budget_schedule=[100,30] --set prune.curve_recover_steps=0";
  auto r = run_prune(args);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output,
             Catch::Contains("Hard-Concrete gates on heads, FFN neurons and sublayers, layers, hidden channels"));
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  const auto& f = summary["final"];
  const auto& b = f["budget"];
  const auto tr = nlohmann::json::parse(slurp(out / "gates" / "train_result.json"));
  const auto full = nlohmann::json::parse(slurp(std::filesystem::path(kTinyBert) / "config.json"));
  const int D = full["hidden_size"];
  const auto keep = hp::core::parse_mask(tr["mask"].get<std::string>(), 2, 4, 37, "train_result.json", D);
  REQUIRE(!keep.hidden.empty());  // the gates closed hidden channels: the structure this test is about
  const int kept = hp::core::count_kept({keep.hidden});
  CHECK(b["hidden_kept"] == kept);
  CHECK(b["hidden_total"] == D);
  CHECK_THAT(r.output, Catch::Contains(std::to_string(kept) + "/" + std::to_string(D) + " hidden channels"));
  CHECK(b["kept"].get<double>() <= 0.3 + 1e-12);
  const auto cfg = nlohmann::json::parse(slurp(out / "model" / "config.json"));
  CHECK(cfg["hidden_size"] == kept);
  CHECK(cfg["classifier_hidden_size"] == D);
  CHECK(f["slim_vs_masked_max_abs_logit_diff"].get<double>() <= 1e-5);
  if (std::filesystem::exists(HP_REF_PYTHON)) {
    CHECK_THAT(f["hf_check"]["transformers4_remote_code"].get<std::string>(), Catch::StartsWith("passed"));
    CHECK_THAT(f["hf_check"]["transformers4"].get<std::string>(), Catch::Contains("removed hidden channels"));
  }
  // The gated point on the budget curves is the exported structure: its channels removed, on budget, its score.
  const auto& points = summary["budget_curves"]["points"];
  const auto gates = std::find_if(points.begin(), points.end(), [](const auto& p) { return p["method"] == "gates"; });
  REQUIRE(gates != points.end());
  CHECK((*gates)["kept_fraction"].get<double>() <= 0.3 + 1e-9);
  CHECK((*gates)["mean"].get<double>() == Approx(f["metrics"][summary["metric"].get<std::string>()].get<double>()));
  const auto h5 = hp::core::read_hdf5((out / "gates" / "run.h5").string());
  CHECK(h5.count("gates/hidden_p_open"));
  CHECK(h5.count("gates/layer_p_open"));
  // The report draws the layer gates and the mean hidden-channel gate beside the sublayer gates.
  auto rep = run_prune("report " + out.string() + " --data-root " + tiny_data_root() + " --max-seq-len 32 --out " +
                       (out / "report.html").string());
  INFO(rep.output);
  REQUIRE(rep.code == 0);
  const std::string html = slurp(out / "report.html");
  CHECK_THAT(html, Catch::Contains("layer 1 whole layer") && Catch::Contains("hidden (mean)") &&
                       Catch::Contains("layer and hidden-channel gates, P(open)"));
  CHECK_THAT(html, Catch::Contains("hidden channels kept") &&
                       Catch::Contains(std::to_string(kept) + " of " + std::to_string(D)));
}

TEST_CASE("prune train --target-flops, then export --mask: the slimmed export scores what the masked model does",
          "[cli][budget]") {
  const auto dir = hp::test::scratch_dir("hp_train_budget_export");
  std::filesystem::remove_all(dir);
  const std::string data = " --task mnli_subset --data-root " + tiny_data_root() + " --max-seq-len 32";
  auto t = run_prune("train --model " + kTinyBert + data +
                     " --set train.train_split=matched --set train.eval_split=mismatched --target-flops 0.5"
                     " --max-steps 6 --out " + (dir / "gated").string());
  INFO(t.output);
  REQUIRE(t.code == 0);
  const std::string best = (dir / "gated" / "best").string(), mask = (dir / "gated" / "head_mask.txt").string();
  auto e = run_prune("export --model " + best + " --mask " + mask + " --to " + (dir / "slim").string());
  INFO(e.output);
  REQUIRE(e.code == 0);
  const auto cfg = nlohmann::json::parse(slurp(dir / "slim" / "config.json"));
  REQUIRE(cfg.contains("intermediate_sizes"));
  auto eval = [&](const std::string& model, const std::string& extra, const std::string& name) {
    const std::string out = (dir / name).string();
    auto r = run_prune("eval --model " + model + data + " --split mismatched" + extra + " --output " + out);
    INFO(r.output);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(slurp(out));
  };
  const auto masked = eval(best, " --mask " + mask, "masked.json"), slim = eval((dir / "slim").string(), "", "slim.json");
  CHECK(masked["metrics"] == slim["metrics"]);
  CHECK(slim["heads_kept"] == masked["heads_kept"]);
  // A slimmed model cannot take the mask again.
  auto again = run_prune("export --model " + (dir / "slim").string() + " --mask " + mask + " --to " +
                         (dir / "again").string());
  CHECK(again.code == 2);
  CHECK_THAT(again.output, Catch::Contains("slimmed already"));
}

TEST_CASE("the pruning run with gates: a gated run's log alpha as a criterion, and --method gates", "[cli][prune]") {
  const auto gated = hp::test::scratch_dir("hp_prune_gated"), out = hp::test::scratch_dir("hp_prune_gates_run");
  std::filesystem::remove_all(gated);
  std::filesystem::remove_all(out);
  const std::string train_split = " --set train.train_split=matched --set train.eval_split=mismatched --max-seq-len 32";
  auto t = run_prune("train --model " + kTinyBert + " --task mnli_subset --data-root " + tiny_data_root() +
                     train_split + " --target-heads 5 --max-steps 4 --out " + gated.string());
  INFO(t.output);
  REQUIRE(t.code == 0);
  auto r =
      run_prune(tiny_prune_args(out.string()) + " --criteria gates,random --gates-run " + gated.string() +
                " --target-heads 3 --method gates --set train.train_split=matched --set train.eval_split=mismatched"
                " --set train.max_steps=4");
  INFO(r.output);
  REQUIRE(r.code == 0);

  // One rule for every run folder: `prune train` refuses a pruning run's folder and another training run's,
  // before it touches a file.
  const std::string train_into = "train --model " + kTinyBert + " --task mnli_subset --data-root " + tiny_data_root() +
                                 train_split + " --max-steps 4 --out ";
  const auto before = slurp(gated / "train_result.json");
  const auto over_pruning = run_prune(train_into + out.string() + " --target-heads 5");
  CHECK(over_pruning.code == 2);
  CHECK_THAT(over_pruning.output, Catch::Contains(out.string() + " holds a pruning run, not a training run"));
  const auto over_training = run_prune(train_into + gated.string() + " --target-heads 4");
  CHECK(over_training.code == 2);
  CHECK_THAT(over_training.output, Catch::Contains("holds another training run") && Catch::Contains("--out NEW_DIR"));
  CHECK(slurp(gated / "train_result.json") == before);
  auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(summary["final"]["heads_kept"] == 3);
  CHECK(summary["final"]["method"] == "gates");
  CHECK(summary["criteria"]["gates"]["curve"].size() == 5);
  // The gates criterion prunes the heads with the smallest log alpha first: at 3 of 8 pruned, the
  // pruned ones are the gated run's 3 lowest.
  auto la = hp::core::read_safetensors((gated / "best" / "gates.safetensors").string()).at("log_alpha").flatten();
  auto order = std::get<1>(la.sort());
  const std::string curves = slurp(out / "curves.csv");
  auto line_start = curves.find("gates,42,1,");  // step 1: 25% of 8 heads = 2 pruned
  REQUIRE(line_start != std::string::npos);
  const std::string line = curves.substr(line_start, curves.find('\n', line_start) - line_start);
  const auto q = line.rfind('"', line.size() - 2);
  const std::string spec = line.substr(q + 1, line.size() - q - 2);
  INFO(line);
  auto keep = hp::core::parse_head_mask(spec, 2, 4);
  for (int i = 0; i < 2; ++i) {
    const long idx = order[i].item<long>();
    CHECK(!keep[idx / 4][idx % 4]);
  }
  CHECK(hp::core::count_kept(keep) == 6);
}

TEST_CASE("prune analyze: deterministic outputs, resumable, and one-line errors that write nothing", "[cli][analyze]") {
  namespace fs = std::filesystem;
  const std::string out = hp::test::scratch_dir("hp_cli_analyze");
  fs::remove_all(out);
  const std::string base =
      "analyze --model " + kTinyBert + " --task mnli_subset --max-seq-len 64 --examples 24 --batch 8";
  auto r = run_prune(base + " --resamples 5 --control random-init --out " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("24 examples, 8 heads; heads per role after Holm"));
  for (const char* f :
       {"analysis.json", "analysis.h5", "roles.csv", "role_map.svg", "head_map.svg", "stat_attn_sep.svg"})
    CHECK(fs::exists(out + "/" + f));
  const auto j = nlohmann::json::parse(std::ifstream(out + "/analysis.json"));
  CHECK(j["examples"] == 24);
  CHECK(j["stats"]["attn_cls"].size() == 2);
  CHECK(j["stats"]["attn_cls"][0].size() == 4);
  CHECK(j["sieve"].contains("block"));  // MNLI examples are pairs
  CHECK(j["stability"].contains("local"));
  CHECK(j["control"]["summary"].contains("heads_per_role"));
  REQUIRE(j["noop"].is_object());  // labelled pairs and a classifier for 3 labels: Clark's no-op gradients
  CHECK(j["noop"]["sep_grad"].size() == 2);
  // The same command again: the finished pass is read back (no recomputation), the outputs are identical.
  std::ifstream a(out + "/analysis.json");
  const std::string first((std::istreambuf_iterator<char>(a)), {});
  auto again = run_prune(base + " --resamples 5 --control random-init --out " + out);
  REQUIRE(again.code == 0);
  CHECK_THAT(again.output, Catch::Contains("resuming after 3 of 3 batches"));
  std::ifstream b(out + "/analysis.json");
  CHECK(std::string((std::istreambuf_iterator<char>(b)), {}) == first);

  const std::string bad_out = out + "_bad";
  std::vector<ErrorCase> cases = {
      {base + " --syntax " + kAnalysisDataDir + "conllu_bad_head_not_int.conllu", "conllu_bad_head_not_int.conllu:", 1},
      {base + " --control randomly", "analysis.control = 'randomly'; use random-init", 2},
      {base + " --alpha 1.5", "analysis.alpha = 1.5", 2},
      {base + " --prune-run /nonexistent", "/nonexistent/run.h5: not found", 1},
      {base + " --compare " + kMiniLM, "compare models of the same shape", 2},
  };
  if (!fs::exists(kMiniLM + "/config.json")) cases.pop_back();  // the MiniLM case
  check_errors(cases, " --out " + bad_out, bad_out + "/analysis.json");
}

TEST_CASE("prune explain: the attribution tree of a row or a text, and one-line errors", "[cli][explain]") {
  namespace fs = std::filesystem;
  const std::string out = hp::test::scratch_dir("hp_cli_explain");
  fs::remove_all(out);
  const std::string base = "explain --model " + kTinyBertL4 + " --task mnli_subset --max-seq-len 64 --data-root " +
                           tiny_data_root() + " --split mismatched --steps 4";
  auto r = run_prune(base + " --example 1 --out " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("root '"));
  for (const char* f : {"tree.json", "tree.svg", "tree.dot"}) CHECK(fs::exists(out + "/" + f));
  const auto j = nlohmann::json::parse(slurp(out + "/tree.json"));
  const auto S = j["tokens"].size();
  CHECK(j["example"] == 1);
  CHECK(j["attribution"].size() == 4);
  CHECK(j["attribution"][0].size() == S);
  CHECK(j["root"].get<size_t>() < S);
  for (const auto& e : j["edges"]) {
    CHECK(e["layer"].get<int>() <= 2);  // the tree reads layers 0..L−2
    CHECK(e["score"].get<double>() > 0.4);
  }
  const std::string svg = slurp(out + "/tree.svg");
  CHECK(std::count(svg.begin(), svg.end(), '\n') > static_cast<long>(S));  // one node per token at least
  CHECK_THAT(slurp(out + "/tree.dot"), Catch::StartsWith("digraph attribution_tree {"));

  // Text instead of a row; the default folder names it.
  auto t = run_prune(base + " --text \"the movie was great .\" --text-b \"i love this film .\" --out " + out + "_text");
  INFO(t.output);
  CHECK(t.code == 0);
  CHECK(nlohmann::json::parse(slurp(out + "_text/tree.json"))["text_b"] == "i love this film .");

  std::string long_text;
  for (int i = 0; i < 80; ++i) long_text += "great ";
  const std::vector<ErrorCase> cases = {
      {base + " --example 100000", "explain.example = 100000 but mnli_subset/mismatched has", 2},
      {base + " --text \"" + long_text + "\"", "more than data.max_seq_len = 64; shorten it or pass --max-seq-len", 1},
      {base + " --text \"a film\" --target gold", "explain.target = gold but the example has no label", 2},
      {base + " --threshold 1.5", "explain.threshold = 1.5", 2},
      {base + " --text-b \"only b\"", "explain.text_b is set without explain.text", 2},
  };
  check_errors(cases, " --out " + out + "_bad", out + "_bad/tree.json");
}

TEST_CASE("prune triggers: patterns per class, triggers against random pairs, deterministic, one-line errors",
          "[cli][triggers]") {
  namespace fs = std::filesystem;
  const std::string out = hp::test::scratch_dir("hp_cli_triggers");
  fs::remove_all(out);
  const std::string base =
      "triggers --model " + kTinyBertL4 + " --task mnli_subset --max-seq-len 64 --data-root " + tiny_data_root() +
      " --split matched --eval-split mismatched --examples 20 --steps 3 --set triggers.min_tokens=0";
  auto r = run_prune(base + " --out " + out);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string first = slurp(out + "/triggers.json");
  const auto j = nlohmann::json::parse(first);
  CHECK(j["mined"]["examples"] == 20);
  long mined = 0, with_patterns = 0;
  for (const auto& [label, c] : j["classes"].items()) {
    mined += c["mined_predicted"].get<long>();
    if (c["patterns"].empty()) continue;
    ++with_patterns;
    CHECK(c["patterns"].size() <= 3);
    // Every other-class row of the 30 is attacked (none is too long), and the three accuracies are rates.
    CHECK(c["attacked"].get<long>() + c["skipped_too_long"].get<long>() == 20);
    for (const char* k : {"before", "triggers", "random_pairs"}) {
      const double a = c["accuracy"][k];
      CHECK((a >= 0 && a <= 1));
    }
    CHECK(c["beats_baseline"] ==
          (c["accuracy"]["triggers"].get<double>() < c["accuracy"]["random_pairs"].get<double>()));
    CHECK_THAT(r.output, Catch::Contains(label + ": triggers"));
  }
  CHECK(mined == 20);  // every mined example is counted under the class it was predicted
  CHECK(with_patterns >= 1);
  // Same settings, same bytes.
  REQUIRE(run_prune(base + " --out " + out).code == 0);
  CHECK(slurp(out + "/triggers.json") == first);

  const std::vector<ErrorCase> cases = {
      {base + " --top-k 0", "triggers.top_k = 0; use 1..100", 2},
      {base + " --set triggers.eval_split=test", "is not a split of mnli_subset", 2},
      {base + " --set triggers.min_tokens=500", "no row has triggers.min_tokens = 500 word pieces", 2},
  };
  check_errors(cases, " --out " + out + "_bad", out + "_bad/triggers.json");
}
