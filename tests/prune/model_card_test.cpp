// The model card of a slimmed export (prune/export/model_card.h): licence from the base model's card, the heads
// per layer, the metric before and after, speedup, loading and the command that reproduces the run.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "fixtures.h"
#include "prune/export/model_card.h"

TEST_CASE("model card: licence, heads per layer, metrics, speedup, reproduce command", "[prune][card]") {
  namespace fs = std::filesystem;
  const auto base = hp::test::scratch_dir("hp_card_base");
  fs::create_directories(base);
  std::ofstream(base / "README.md")
      << "---\nlanguage: en\nlicense: apache-2.0\ntags:\n- x\n---\n# a model\nlicense: mit\n";
  CHECK(hp::prune::base_licence(base.string()) == "apache-2.0");
  CHECK(hp::prune::base_licence((base / "nowhere").string()).empty());

  hp::prune::CardInputs in;
  in.summary = nlohmann::json::parse(R"({"task": "sst2", "metric": "accuracy", "eval_split": "dev", "heads_total": 8,
    "criteria": {"taylor": {"curve": [{"heads_pruned": 0, "mean": 0.9}]}},
    "final": {"heads_kept": 3, "method": "criterion", "criterion": "taylor", "metrics": {"accuracy": 0.875},
              "metrics_before_recovery": {"accuracy": 0.81}, "params": 100, "params_unpruned": 120,
              "latency": {"batch32": {"seq": 64, "speedup": 1.38, "unpruned_ms": 287.8, "slim_ms": 208.5, "flop_bound": 1.21}}}})");
  in.run_dir = "runs/x";
  in.base_model = base.string();
  in.kept = {{0, 2}, {1}};
  in.heads_per_layer = 4;
  in.version = "9.9.9";
  const std::string card = hp::prune::model_card(in);
  CHECK_THAT(card, Catch::StartsWith("---\nlicense: apache-2.0\n") &&
                       Catch::Contains("pipeline_tag: text-classification\ndatasets:\n- glue\n"));
  CHECK_THAT(card, Catch::Contains("with 3 of 8 attention heads"));
  CHECK_THAT(card, Catch::Contains("| 0 | 2 of 4 | 0, 2 |") && Catch::Contains("| 1 | 1 of 4 | 1 |"));
  CHECK_THAT(card, Catch::Contains("| unpruned (8 heads) | 0.9000 |") &&
                       Catch::Contains("before recovery | 0.8100 |") &&
                       Catch::Contains("| 3 heads (this model) | 0.8750 |"));
  CHECK_THAT(card, Catch::Contains("1.38× (287.8 → 208.5 ms; FLOP bound 1.21×)"));
  CHECK_THAT(card, Catch::Contains("prune --config runs/x/config.resolved.yaml") && Catch::Contains("headprune 9.9.9"));
  CHECK_THAT(card, Catch::Contains("transformers 4.x also loads it without remote code") &&
                       Catch::Contains("need the dense fallback"));
  in.base_model = (base / "nowhere").string();
  CHECK_THAT(hp::prune::model_card(in), Catch::StartsWith("---\nlicense: other\n") && Catch::Contains("not stated"));
  // A tagger on a user's files: the token pipeline, no GLUE dataset.
  const nlohmann::json sst2 = in.summary;
  in.summary["objective"] = "token_classification", in.summary["task"] = "files";
  CHECK_THAT(hp::prune::model_card(in), Catch::Contains("pipeline_tag: token-classification\ntags:") &&
                                            !Catch::Contains("- glue") &&
                                            Catch::Contains("AutoModelForTokenClassification.from_pretrained("));
  // A sentence-embedding model: sentence-transformers loads it.
  in.summary["objective"] = "embedding", in.summary["task"] = "stsb";
  CHECK_THAT(hp::prune::model_card(in),
             Catch::Contains("pipeline_tag: sentence-similarity\nlibrary_name: sentence-transformers\n") &&
                 Catch::Contains("The sentence-transformers model `") &&
                 Catch::Contains("model = SentenceTransformer(\"path/to/this/folder\", trust_remote_code=True)"));
  in.summary = sst2;
  // Hidden channels removed (the run's own-class check says so): remote code in both, and no dense fallback offered.
  in.summary["final"]["hf_check"]["transformers4"] =
      "not applicable (removed hidden channels need the modeling file: see the remote-code checks)";
  const std::string narrow = hp::prune::model_card(in);
  CHECK_THAT(narrow, Catch::Contains("This model also removed hidden channels") &&
                         Catch::Contains("there is no dense fallback"));
  CHECK_THAT(narrow, !Catch::Contains("also loads it without remote code") && !Catch::Contains("--dense"));
}

TEST_CASE("model card of a --max-drop run: the candidate chosen, its metric and speedup, the precision to run it at",
          "[prune][card]") {
  hp::prune::CardInputs in;
  in.summary = nlohmann::json::parse(R"({"task": "sst2", "metric": "accuracy", "eval_split": "dev", "heads_total": 8,
    "final": {"heads_kept": 5, "method": "kwon", "metrics": {"accuracy": 0.9}, "params": 100, "params_unpruned": 120},
    "frontier": {"metric": "accuracy", "timing": "batch 32 x 128 tokens", "baseline": 91.2, "max_drop": 1, "chosen": 1,
      "points": [{"method": "unpruned", "precision": "fp32", "metric": 91.2, "speedup": 1, "reference": true},
                 {"method": "kwon-recovered", "budget": "50% FLOPs", "precision": "int8", "metric": 90.4,
                  "speedup": 3.456}]}})");
  in.run_dir = "runs/x";
  in.kept = {{0, 1, 2}, {0, 1}};
  in.heads_per_layer = 4;
  in.version = "9.9.9";
  std::string card = hp::prune::model_card(in);
  CHECK_THAT(card, Catch::Contains("Chosen by `--max-drop 1` as the fastest of 2 measured candidates within 1 point(s)"));
  CHECK_THAT(card, Catch::Contains("kwon-recovered, 50% FLOPs, at int8: accuracy 90.40 against 91.20, 3.46× the "
                                   "unpruned fp32 model at batch 32 x 128 tokens (headprune on this CPU)."));
  // With ONNX Runtime's points: the speedup over each (3.456 / 1.2 and 3.456 / 2.4).
  in.summary["frontier"]["points"].push_back(
      {{"method", "onnxruntime"}, {"precision", "fp32"}, {"speedup", 1.2}, {"reference", true}});
  in.summary["frontier"]["points"].push_back(
      {{"method", "onnxruntime"}, {"precision", "int8"}, {"speedup", 2.4}, {"reference", true}});
  CHECK_THAT(hp::prune::model_card(in), Catch::Contains("(headprune on this CPU); 2.88× ONNX Runtime fp32 (unpruned), "
                                                        "1.44× ONNX Runtime int8 (unpruned)."));
  CHECK_THAT(card, Catch::Contains("`prune eval --model THIS_FOLDER --precision int8`"));
  // At fp32 there is no precision to name; without a choice (or without the frontier) no such paragraph.
  in.summary["frontier"]["points"][1]["precision"] = "fp32";
  CHECK_THAT(hp::prune::model_card(in), !Catch::Contains("--precision"));
  in.summary["frontier"]["chosen"] = -1;
  CHECK_THAT(hp::prune::model_card(in), !Catch::Contains("Chosen by"));
}

TEST_CASE("model card of a --max-drop run: its ONNX files and what their checks found", "[prune][card]") {
  hp::prune::CardInputs in;
  in.summary = nlohmann::json::parse(R"({"task": "sst2", "metric": "accuracy", "eval_split": "dev", "heads_total": 8,
    "final": {"heads_kept": 5, "method": "kwon", "metrics": {"accuracy": 0.9}, "params": 100, "params_unpruned": 120,
      "onnx": {"model.onnx": "checked: same logits", "model.int8.onnx": "checked: same predictions",
               "int8_metrics": {"accuracy": 0.8934}}}})");
  in.kept = {{0, 1, 2}, {0, 1}};
  in.heads_per_layer = 4;
  std::string card = hp::prune::model_card(in);
  CHECK_THAT(card, Catch::Contains("`model.onnx` (float32, dynamic batch and sequence): checked: same logits.\n"));
  CHECK_THAT(card, Catch::Contains("`model.int8.onnx` (headprune's int8 scheme in standard ONNX operators, for ONNX "
                                   "Runtime): checked: same predictions; ONNX Runtime int8 accuracy 0.8934.\n"));
  // At fp32 only model.onnx; a run without --max-drop names neither.
  in.summary["final"]["onnx"].erase("model.int8.onnx");
  card = hp::prune::model_card(in);
  CHECK_THAT(card, Catch::Contains("`model.onnx`") && !Catch::Contains("model.int8.onnx"));
  in.summary["final"].erase("onnx");
  CHECK_THAT(hp::prune::model_card(in), !Catch::Contains("model.onnx"));
}
