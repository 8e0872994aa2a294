// Typed configuration: one struct per section, each listing its fields once in visit_fields().
// That one list drives YAML reading, --set overrides, named CLI shortcuts, --dump-config and the key
// reference (prune config --doc). Library code takes only its section; only subcommands see Config.
#pragma once

#include <string>
#include <variant>
#include <vector>

namespace hp::core {

struct RunConfig {
  int seed = 42;
  int threads = 0;  // 0 = all cores
  std::string out_dir = "runs/default";
  template <class V>
  void visit_fields(V& v) {
    v("seed", seed, "random seed for every stochastic step (gates, dropout, shuffling, random criterion)");
    v("threads", threads, "CPU threads for LibTorch and BLAS; 0 = all cores");
    v("out_dir", out_dir, "run directory for results, checkpoints and config.resolved.yaml");
  }
};

struct ModelConfig {
  std::string path = "checkpoints/all-MiniLM-L6-v2";  // Hugging Face model folder
  template <class V>
  void visit_fields(V& v) {
    v("path", path, "Hugging Face model folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt)");
  }
};

struct DataConfig {
  std::string task = "sst2";
  std::string root;  // empty: $HEADPRUNE_DATA, else ../shared/data
  int max_seq_len = 128;
  template <class V>
  void visit_fields(V& v) {
    v("task", task, "GLUE task: sst2, cola, mrpc, rte, stsb, wnli, qnli, mnli, mnli_subset");
    v("root", root, "data root holding glue/ (default: $HEADPRUNE_DATA, else ../shared/data)");
    v("max_seq_len", max_seq_len, "maximum tokens per example, [CLS]/[SEP] included (longest_first truncation)");
  }
};

struct EvalConfig {
  std::string split = "dev";
  int batch_size = 64;
  std::string mask;       // head mask SPEC "layer:h,h;layer:h" or a file holding one
  std::string output;     // JSON result path; empty = <run.out_dir>/eval_<task>_<split>.json
  int max_examples = 0;   // 0 = all
  template <class V>
  void visit_fields(V& v) {
    v("split", split, "data split to evaluate: dev, train, test (mnli: dev_matched, dev_mismatched)");
    v("batch_size", batch_size, "evaluation batch size (batches are sorted by length, padded per batch)");
    v("mask", mask, "heads to mask: \"2:0,3;5:11\" (layer:heads, 0-based) or a file containing such a spec");
    v("output", output, "JSON result file (default <run.out_dir>/eval_<task>_<split>.json)");
    v("max_examples", max_examples, "evaluate only the first N examples; 0 = all");
  }
};

struct InferConfig {
  std::string input;       // text file: one example per line, "text" or "text_a<TAB>text_b"
  std::string output;      // .h5 or .json
  bool hidden = false;     // also write last hidden states
  int batch_size = 32;
  template <class V>
  void visit_fields(V& v) {
    v("input", input, "text file: one example per line, \"text\" or \"text_a<TAB>text_b\"");
    v("output", output, "output file, .h5 (HDF5) or .json; default <input>.logits.h5");
    v("hidden", hidden, "also write each example's last hidden states [S, D]");
    v("batch_size", batch_size, "inference batch size");
  }
};

// The whole configuration. The section order here is the order of --dump-config.
struct Config {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  EvalConfig eval;
  InferConfig infer;
  template <class V>
  void visit_sections(V& v) {
    v("run", run);
    v("model", model);
    v("data", data);
    v("eval", eval);
    v("infer", infer);
  }
};

// One field of Config, addressed by its dotted path ("data.max_seq_len").
struct FieldRef {
  std::string path;
  std::string help;
  std::variant<int*, double*, bool*, std::string*, std::vector<int>*, std::vector<std::string>*> ptr;
};

// Every field of cfg, in declaration order.
std::vector<FieldRef> config_fields(Config& cfg);

// Reads a YAML file into cfg. Unknown keys and type errors throw ConfigError with file:line:col.
void load_yaml(Config& cfg, const std::string& path);

// Sets one field from text, e.g. set_value(cfg, "eval.batch_size", "32", "--set"). `where` prefixes errors.
void set_value(Config& cfg, const std::string& path, const std::string& text, const std::string& where);

// Applies "a.b=v" as from --set.
void apply_set(Config& cfg, const std::string& assignment);

// The configuration as YAML (every field, with its help as a comment).
std::string dump_yaml(const Config& cfg);

// Markdown reference of every key: path, default, help.
std::string config_doc();

// Range checks across fields; throws ConfigError naming the dotted key and the fix.
void validate(const Config& cfg);

// The key nearest to `key` among `known` (edit distance), for "did you mean" hints; empty if none close.
std::string nearest_key(const std::string& key, const std::vector<std::string>& known);

}  // namespace hp::core
