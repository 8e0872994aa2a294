// Model cards of slimmed exports (see prune/export/model_card.h).
#include "prune/export/model_card.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/base/prune_config.h"  // choice_text
#include "core/data/glue.h"  // task_names

namespace hp::prune {

namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// "48 heads and 3072 of 9216 FFN neurons (50.0% of the encoder's FLOPs)".
std::string budget_text(const nlohmann::json& b) {
  int heads = 0;
  for (const auto& h : b["heads_per_layer"]) heads += h.get<int>();
  const std::string unit = b.value("unit", std::string("FLOPs"));
  std::string of = "% of the encoder's " + unit;
  if (unit == "latency" && b.contains("latency")) {
    const auto& l = b["latency"];
    of = "% of the unpruned model's latency at batch " + fixed(l.value("batch", 0.0), 0) + " x " +
         fixed(l.value("seq", 0.0), 0) + " tokens on the pruning machine: " + fixed(l.value("predicted", 0.0), 2) +
         " ms predicted, " + fixed(l.value("measured", 0.0), 2) + " ms measured, target " +
         fixed(l.value("target", 0.0), 2) + " ms";
  }
  return std::to_string(heads) + " heads and " + std::to_string(b.value("neurons_kept", 0)) + " of " +
         std::to_string(b.value("neurons_total", 0)) + " FFN neurons (" + fixed(100 * b.value("kept", 0.0), 1) + of +
         ")";
}

// The table of what each layer keeps: its heads, and with a FLOPs or parameter budget its FFN neurons.
void kept_table(std::ostringstream& o, const CardInputs& in, const nlohmann::json& fin) {
  const bool budget = fin.contains("budget");
  // --target-layers: the unpruned model's index of each layer kept.
  const nlohmann::json was = fin.contains("layers") ? fin["layers"]["choices"][fin["layers"].value("choice", "")]["kept"]
                                                    : nlohmann::json();
  if (!was.is_null()) {
    o << "Whole layers kept: " << was.size() << " of the unpruned model's, " << was.dump()
      << " (numbered 0, 1, … here); the others were removed.\n\n";
  }
  o << "## Heads" << (budget ? " and FFN neurons" : "") << " kept\n\n| layer | heads kept | original indices |"
    << (budget ? " FFN neurons kept |\n|---|---|---|---|\n" : "\n|---|---|---|\n");
  for (size_t l = 0; l < in.kept.size(); ++l) {
    std::string idx;
    for (int h : in.kept[l]) idx += (idx.empty() ? "" : ", ") + std::to_string(h);
    o << "| " << l << (l < was.size() ? " (was " + std::to_string(was[l].get<int>()) + ")" : std::string()) << " | "
      << in.kept[l].size() << " of " << in.heads_per_layer << " | "
      << (idx.empty() ? "none" : idx) << " |";
    if (budget) o << " " << fin["budget"]["ffn_widths"][l].get<int>() << " of " << in.intermediate_size << " |";
    o << "\n";
  }
}

// ", int8 against unpruned fp32" when stage 8 timed the two at different precisions (a --max-drop int8 choice).
std::string card_precisions(const nlohmann::json& l) {
  const std::string slim = l.value("slim_precision", ""), unpruned = l.value("unpruned_precision", "");
  return slim == unpruned ? "" : ", " + slim + " against unpruned " + unpruned;
}

}  // namespace

std::string base_licence(const std::string& dir) {
  std::ifstream in(dir + "/README.md");
  std::string line;
  if (!std::getline(in, line) || line != "---") return "";
  while (std::getline(in, line) && line != "---")
    if (line.rfind("license:", 0) == 0) {
      std::string v = line.substr(8);
      v.erase(0, v.find_first_not_of(" \t\"'"));
      v.erase(v.find_last_not_of(" \t\"'\r") + 1);
      return v;
    }
  return "";
}

// With --max-drop: which candidate of the frontier this is, how it scored and how fast it ran against the
// unpruned fp32 model, and the precision it was chosen at (a setting of the runtime, not of the weights).
void frontier_text(std::ostringstream& o, const nlohmann::json& s) {
  if (!s.contains("frontier") || s["frontier"].value("chosen", -1) < 0) return;
  const auto& f = s["frontier"];
  const auto& c = f["points"][f["chosen"].get<size_t>()];
  const std::string precision = c.value("precision", "fp32");
  o << "\nChosen by `--max-drop " << f.value("max_drop", 0.0) << "` as the fastest of " << f["points"].size()
    << " measured candidates within " << f.value("max_drop", 0.0) << " point(s) of the unpruned fp32 model "
    << (f.value("select_split", "").empty() ? "" : "on " + f.value("select_split", "") + ", rows held out of training, ")
    << "(`frontier.csv` in the run folder): " << c.value("method", "")
    << (c.value("variant", "").empty() ? "" : " (" + c.value("variant", "") + ")")
    << (c.value("criterion", "").empty() ? "" : " " + c.value("criterion", ""))
    << (c.value("budget", "").empty() ? "" : ", " + c.value("budget", "")) << ", at " << precision << ": "
    << f.value("metric", "") << " " << fixed(c.value("metric", 0.0), 2) << " against " << fixed(f.value("baseline", 0.0), 2)
    << ", " << fixed(c.value("speedup", 0.0), 2) << "× the unpruned fp32 model at " << f.value("timing", "")
    << " (headprune on this CPU)";
  // Against ONNX Runtime's points of the same run (the unpruned model at fp32 and quantize_dynamic's int8).
  std::string ort;
  for (const auto& q : f["points"])
    if (q.value("method", "") == "onnxruntime" && q.value("speedup", 0.0) > 0)
      ort += (ort.empty() ? "" : ", ") + fixed(c.value("speedup", 0.0) / q["speedup"].get<double>(), 2) +
             "× ONNX Runtime " + q.value("precision", "") + " (unpruned)";
  o << (ort.empty() ? "." : "; " + ort + ".");
  if (precision != "fp32")
    o << " The weights here are float32; run them at " << precision << " as measured: `prune eval --model THIS_FOLDER "
      << "--precision " << precision << "` (or `infer`, `bench`).";
  o << "\n";
}

// With --max-drop: the ONNX files beside the weights and what their checks found (or why they are missing).
void onnx_text(std::ostringstream& o, const nlohmann::json& fin, const std::string& metric) {
  if (!fin.contains("onnx")) return;
  const auto& x = fin["onnx"];
  o << "\n`model.onnx` (float32, dynamic batch and sequence): " << x.value("model.onnx", "") << ".\n";
  if (!x.contains("model.int8.onnx")) return;
  o << "`model.int8.onnx` (headprune's int8 scheme in standard ONNX operators, for ONNX Runtime): "
    << x.value("model.int8.onnx", "");
  if (x.contains("int8_metrics") && x["int8_metrics"].contains(metric))
    o << "; ONNX Runtime int8 " << metric << " " << fixed(x["int8_metrics"][metric].get<double>(), 4);
  o << ".\n";
}

// How an objective's export is tagged on the Hub and loaded in Python (summary.json's "objective"; a classifier's when
// absent).
struct CardKind {
  std::string objective;
  const char* pipeline_tag;
  bool sentence_transformers;  // a sentence-transformers folder: its library loads it
  const char* loader;  // the class the loading snippet imports
};
const CardKind kCardKinds[] = {
    {"sequence_classification", "text-classification", false, "AutoModelForSequenceClassification"},
    {"regression", "text-classification", false, "AutoModelForSequenceClassification"},
    {"token_classification", "token-classification", false, "AutoModelForTokenClassification"},
    {core::choice_text(core::Objective::kEmbedding), "sentence-similarity", true, "SentenceTransformer"},
};

const CardKind& card_kind(const std::string& objective) {
  for (const CardKind& k : kCardKinds)
    if (objective == k.objective) return k;
  return kCardKinds[0];
}

// The card's "Loading" section: the snippet, remote code, and what transformers 4.x needs of this structure.
void loading_text(std::ostringstream& o, const CardKind& kind, const nlohmann::json& fin) {
  const bool st = kind.sentence_transformers;
  o << "\n## Loading\n\n```python\nfrom " << (st ? "sentence_transformers" : "transformers") << " import "
    << kind.loader << "\nmodel = " << kind.loader << (st ? "(" : ".from_pretrained(")
    << "\"path/to/this/folder\", trust_remote_code=True)\n```\n\n"
    << "transformers 5.x builds the narrower layers from `modeling_headprune.py` in this folder (named by "
       "`auto_map` in config.json), hence `trust_remote_code=True`. ";
  const std::string own = fin.contains("hf_check") ? fin["hf_check"].value("transformers4", "") : "";
  const bool hidden = own.find("removed hidden channels") != std::string::npos;  // no own class, no dense form
  if (!hidden)
    o << "transformers 4.x also loads it without remote code: its own class of the architecture re-prunes the heads "
         "listed in `config.pruned_heads`. ";
  o << "With `output_attentions=True`, layer l returns [batch, kept heads, seq, seq]: the kept heads of the table "
       "above, in that order.";
  if (!hidden)
    o << " Loaders that run no remote code and ignore `pruned_heads` need the dense fallback (original shapes, "
         "removed heads zeroed, same logits, no speedup): `prune export --model THIS_FOLDER --dense --to "
         "DENSE_FOLDER`.";
  o << "\n";
  if (own.find("cannot run a layer without heads") != std::string::npos)
    o << "A layer of this model keeps no head, which transformers' own class of this architecture cannot run, so "
         "transformers 4.x needs `trust_remote_code=True` too.\n";
  if (hidden)
    o << "This model also removed hidden channels: its hidden size is narrower than its attention heads and "
         "classification head (`config.head_dim`, `config.classifier_hidden_size`), which Hugging Face's own classes "
         "cannot build, so transformers 4.x needs `trust_remote_code=True` too, and there is no dense fallback (a "
         "LayerNorm over zero channels would count them).\n";
  else if (fin.contains("budget"))
    o << "This model also removed FFN neurons: its layers have their own FFN widths (`config.intermediate_sizes`), "
         "which Hugging Face's own BERT cannot build, so transformers 4.x needs `trust_remote_code=True` too; the "
         "dense fallback loads everywhere.\n";
  o << "\n";
}

std::string model_card(const CardInputs& in) {
  const auto& s = in.summary;
  const auto& fin = s.at("final");
  const std::string task = s.value("task", ""), metric = s.value("metric", "metric"),
                    split = s.value("eval_split", "dev"), licence = base_licence(in.base_model);
  const int kept = fin.value("heads_kept", 0), total = s.value("heads_total", 0);
  const auto glue = core::task_names();  // a user's files name no dataset
  const CardKind& kind = card_kind(s.value("objective", ""));
  const bool st = kind.sentence_transformers;
  std::ostringstream o;
  o << "---\nlicense: " << (licence.empty() ? "other" : licence) << "\nbase_model: " << in.base_model
    << "\npipeline_tag: " << kind.pipeline_tag << "\n"
    << (st ? "library_name: sentence-transformers\n" : "")
    << (std::find(glue.begin(), glue.end(), task) != glue.end() ? "datasets:\n- glue\n" : "")
    << "tags:\n- headprune\n- attention-head-pruning\n---\n\n";
  o << "# " << task << ": " << in.base_model << " with " << kept << " of " << total << " attention heads\n\n";
  const std::string finetuned = s.value("finetuned_model", in.base_model);
  o << (finetuned == in.base_model
            ? (st ? "The sentence-transformers model `" : "The " + task + " classifier `") + in.base_model + "`"
            : "Fine-tuned on GLUE " + task + " from `" + in.base_model + "` (`" + finetuned + "`)")
    << ", pruned to "
    << (fin.contains("budget") ? budget_text(fin["budget"]) : "exactly " + std::to_string(kept) + " heads")
    << " by headprune " << in.version << " (method: " << fin.value("method", "")
    << (fin.contains("criterion") ? ", criterion " + fin["criterion"].get<std::string>() : std::string()) << ").\n"
    << "Licence of the base weights: "
    << (licence.empty() ? "not stated in the base model's README.md; check its terms" : licence)
    << " (this model is a derivative of them).\n\n";
  kept_table(o, in, fin);
  o << "\n## Quality and speed (" << task << " " << split << ")\n\n| | " << metric << " |\n|---|---|\n";
  if (s.contains("criteria") && fin.contains("criterion") &&
      s["criteria"].contains(fin["criterion"].get<std::string>())) {
    const auto& curve = s["criteria"][fin["criterion"].get<std::string>()]["curve"];
    if (!curve.empty()) o << "| unpruned (" << total << " heads) | " << fixed(curve[0].value("mean", 0.0), 4) << " |\n";
  }
  if (fin.contains("metrics_before_recovery") && fin["metrics_before_recovery"].contains(metric))
    o << "| " << kept << " heads, before recovery | " << fixed(fin["metrics_before_recovery"][metric].get<double>(), 4)
      << " |\n";
  if (fin.contains("metrics") && fin["metrics"].contains(metric))
    o << "| " << kept << " heads (this model) | " << fixed(fin["metrics"][metric].get<double>(), 4) << " |\n";
  frontier_text(o, s);
  onnx_text(o, fin, metric);
  o << "\nParameters: " << fin.value("params", 0L) << " (unpruned " << fin.value("params_unpruned", 0L) << ").\n";
  if (fin.contains("latency"))
    for (const auto& [batch, l] : fin["latency"].items())
      o << "Measured speedup at " << batch << " (sequence " << l.value("seq", 0)
        << ", headprune on CPU" << card_precisions(l) << "): " << fixed(l.value("speedup", 0.0), 2) << "× ("
        << fixed(l.value("unpruned_ms", 0.0), 1) << " → " << fixed(l.value("slim_ms", 0.0), 1) << " ms; FLOP bound "
        << fixed(l.value("flop_bound", 0.0), 2) << "×).\n";
  loading_text(o, kind, fin);
  o << "## Reproduce\n\n```\nprune --config " << in.run_dir << "/config.resolved.yaml\n```\n\n"
    << "(headprune " << in.version << "; the resolved config holds every setting of the run.)\n";
  return o.str();
}

}  // namespace hp::prune
