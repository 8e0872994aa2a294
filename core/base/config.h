// Typed configuration: one struct per section, each listing its fields once in visit_fields().
// That one list drives YAML reading, --set overrides, named CLI shortcuts, --dump-config and the key
// reference (prune config --doc). Library code takes only its section; only subcommands see Config.
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "core/base/analysis_config.h"
#include "core/base/prune_config.h"

namespace hp::core {

struct RunConfig {
  int seed = 42;
  int threads = 0;  // 0 = all cores
  std::string out_dir = "runs/default";
  int dist_timeout_s = 300;
  std::string precision = "fp32";
  int calibrate = 512;
  std::string device = "cpu";
  template <class V>
  void visit_fields(V& v) {
    v("seed", seed, "random seed for every stochastic step (gates, dropout, shuffling, random criterion)");
    v("device", device,
      "where training runs (fine-tuning, recovery, gates, distillation) and its evaluations, where the pruning run's "
      "head criteria, the search's mask gradients and mask tuning and the curves' fp32 evaluations are computed, and "
      "analyze's forwards: cpu, cuda (the first GPU) or cuda:N, with a LibTorch built with CUDA (docs/gpu.md); the "
      "frontier's measurements, timing and the int8/bf16 inference kernels stay on the CPU");
    v("threads", threads,
      "CPU threads for LibTorch and BLAS; 0 = all cores (divided by the processes per machine "
      "in a data-parallel run)");
    v("precision", precision,
      "inference linears of eval, infer, bench and the pruning run's curves and speed: fp32, bf16 (bf16 operands, "
      "fp32 accumulation) or int8 (weights per channel, activations per row, int32 accumulation); `prune "
      "--version` says how this CPU runs each");
    v("calibrate", calibrate,
      "int8 only: calibrate on the first N examples of the task's train split (SmoothQuant: each linear's input "
      "channels rescaled by the square root of (largest input / largest weight) so that outlier channels stop setting the activation rows' "
      "scale); 0 = dynamic quantisation alone. eval, infer, bench, the --max-drop frontier's int8 measurements and the "
      "pruning run's final int8 metric (its curves and export --int8's check stay dynamic)");
    v("out_dir", out_dir, "run directory for results, checkpoints and config.resolved.yaml");
    v("dist_timeout_s", dist_timeout_s,
      "data-parallel runs: seconds a rank waits for the others before it stops "
      "naming the rank that died or hangs");
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
  // A user's own files in place of data.task (core/data/file_task.h): splits train, dev and test.
  std::string train_file, validation_file, test_file;
  std::string format;  // csv, tsv, jsonl; empty: from each file's extension
  std::vector<std::string> text_columns;  // empty: sentence1/sentence2, else the first non-label columns
  std::string label_column = "label";
  std::string metric;  // the primary metric; empty: accuracy for classes, pearson for scores
  std::string task_type;  // sequence_classification, token_classification; empty: from the training file
  std::string tag_column;  // a tagger's tags: CoNLL-U upos (default), xpos, deprel; JSON lines ner_tags, tags
  bool from_files() const { return !train_file.empty(); }
  template <class V>
  void visit_fields(V& v) {
    v("task", task, "GLUE task: sst2, cola, mrpc, rte, stsb, wnli, qnli, mnli, mnli_subset (or data.train_file)");
    v("root", root, "data root holding glue/ (default: $HEADPRUNE_DATA, else ../shared/data)");
    v("max_seq_len", max_seq_len, "maximum tokens per example, [CLS]/[SEP] included (longest_first truncation)");
    v("train_file", train_file,
      "your training data, .csv, .tsv or .jsonl; a tagger's .conllu, .conll or .jsonl (replaces data.task; "
      "docs/data.md)");
    v("validation_file", validation_file, "your validation data (split dev), same columns as train_file");
    v("test_file", test_file, "your test data (split test), labels optional");
    v("format", format,
      "format of the files: csv, tsv, jsonl; a tagger's conllu, conll, jsonl (empty: from each file's extension)");
    v("text_columns", text_columns,
      "one or two text columns (empty: sentence1 and sentence2, else the first columns other than the label)");
    v("label_column", label_column, "the label column: class names, integers, or float scores (regression)");
    v("metric", metric,
      "primary metric of your files: accuracy, f1, macro_f1, mcc, pearson, spearman; a tagger's accuracy, "
      "entity_f1");
    v("task_type", task_type,
      "sequence_classification or token_classification (empty: token_classification for .conllu, .conll, .iob, "
      ".bio and JSON lines with \"tokens\")");
    v("tag_column", tag_column, "a tagger's tag column: upos (default), xpos, deprel in CoNLL-U; ner_tags (default), "
                                "tags in JSON lines");
  }
};

struct EvalConfig {
  std::string split = "dev";
  int batch_size = 64;
  std::string mask;  // head mask SPEC "layer:h,h;layer:h" or a file holding one
  std::string output;  // JSON result path; empty = <run.out_dir>/eval_<task>_<split>.json
  int max_examples = 0;  // 0 = all
  template <class V>
  void visit_fields(V& v) {
    v("split", split, "data split to evaluate: dev, train, test (mnli: dev_matched, dev_mismatched)");
    v("batch_size", batch_size, "evaluation batch size (batches are sorted by length, padded per batch)");
    v("mask", mask,
      "heads to mask: \"2:0,3;5:11\" (layer:heads, 0-based), FFN neurons as \"f2:0-511,600\", or a file holding "
      "such a spec");
    v("output", output, "JSON result file (default <run.out_dir>/eval_<task>_<split>.json)");
    v("max_examples", max_examples, "evaluate only the first N examples; 0 = all");
  }
};

struct ExportConfig {
  std::string out;  // output model folder
  bool hdf5 = true;  // also write model.h5
  bool dense = false;  // original shapes, removed heads zeroed (prune/export/slim.h dense_model)
  bool onnx = false;  // also model.onnx, checked in ONNX Runtime (prune/export/onnx.h)
  bool int8 = false;  // also model.int8.onnx, checked against headprune's int8 on the eval split
  std::string mask;  // slim to what this mask spec (or file) keeps before writing
  bool force = false;  // replace an out folder that holds files of no export
  double max_shard_mb = 0;  // 0: one model.safetensors; else transformers' shards of at most this many MB
  std::string dtype = "fp32";  // the safetensors' element type: fp32, bf16 or fp16
  template <class V>
  void visit_fields(V& v) {
    v("out", out, "output folder for the exported Hugging Face checkpoint");
    v("dtype", dtype,
      "element type of the exported weights: fp32, or bf16 / fp16 for half the bytes (a model carried where 32 bits "
      "do not fit; config.json's torch_dtype says which; every loader, headprune's included, computes in fp32 from "
      "them unless told otherwise); applies to `prune export`");
    v("max_shard_mb", max_shard_mb,
      "0: the weights in one model.safetensors; else split, as transformers' save_pretrained(max_shard_size) splits "
      "them, into model-00001-of-0000N.safetensors files of at most this many MB (10^6 bytes) of tensors each plus "
      "model.safetensors.index.json (when they do not fit in one); applies to `prune export` and the pruning run's "
      "model/");
    v("force", force,
      "replace the out folder even when it is not an earlier headprune export (one is told by its config.json, not by "
      "its file names; without --force any other non-empty folder is refused, an earlier export replaced whole); "
      "never a folder that is or holds --model or the data the export reads, --force or not");
    v("mask", mask,
      "slim the model first: remove the heads and FFN neurons this mask names (spec or file as eval.mask, e.g. a "
      "gated `prune train` run's head_mask.txt)");
    v("hdf5", hdf5, "also write model.h5 with the same tensors (HF names) for analysis tools");
    v("onnx", onnx,
      "also write model.onnx (dynamic batch and sequence) through the reference Python, checked in ONNX Runtime against our logits");
    v("int8", int8,
      "also write model.onnx and model.int8.onnx (headprune's int8 in standard ONNX operators), checked in ONNX Runtime "
      "on data.task's eval.split against headprune's int8: >= 99.5% same predictions, logits within 10% of the "
      "largest |logit|; int8.json and README.md give the metrics");
    v("dense", dense,
      "dense fallback of a slimmed model: original shapes, removed heads zeroed, no pruned_heads (loads in any BERT loader; no speedup)");
  }
};

struct InferConfig {
  std::string input;  // text file: one example per line, "text" or "text_a<TAB>text_b"
  std::string output;  // .h5 or .json
  bool hidden = false;  // also write last hidden states
  int batch_size = 32;
  template <class V>
  void visit_fields(V& v) {
    v("input", input, "text file: one example per line, \"text\" or \"text_a<TAB>text_b\"");
    v("output", output, "output file, .h5 (HDF5) or .json; default <input>.logits.h5");
    v("hidden", hidden, "also write each example's last hidden states [S, D]");
    v("batch_size", batch_size, "inference batch size");
  }
};

struct EmbedConfig {
  std::string input;  // text file: one sentence per line
  std::string output;  // .h5, .npy or .jsonl
  int batch_size = 32;
  int max_seq_len = 0;  // 0 = the folder's max_seq_length (sentence_bert_config.json)
  template <class V>
  void visit_fields(V& v) {
    v("input", input, "text file: one sentence per line (UTF-8; empty lines are skipped)");
    v("output", output, "output file: .h5 (HDF5 'embeddings' [N, W] and 'lines'), .npy (float32 [N, W]) or .jsonl "
                        "(one {\"line\", \"embedding\"} per sentence); default <input>.embeddings.h5");
    v("batch_size", batch_size, "sentences per forward");
    v("max_seq_len", max_seq_len,
      "tokens per sentence, the rest cut off; 0 = the folder's max_seq_length (sentence_bert_config.json), as "
      "SentenceTransformer.encode does (the flag --max-tokens; data.max_seq_len is the GLUE tasks')");
  }
};

struct TrainConfig {
  int epochs = 3;
  int max_steps = 0;  // > 0: stop after this many optimizer steps (overrides epochs)
  int batch_size = 32;
  double lr_peak = 5e-5;
  double lr_warmup_ratio = 0.1;  // fraction of all steps spent warming up linearly from 0
  double weight_decay = 0.01;  // decoupled (AdamW); never on biases and LayerNorm weights
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double grad_clip = 1.0;  // max global L2 norm; 0 = off
  int eval_every = 0;  // evaluate on dev every N steps; 0 = at the end of each epoch
  int save_every = 0;  // write a resumable state every N steps; 0 = at each evaluation
  int max_train_examples = 0;  // 0 = the whole train split
  std::string train_split = "train";
  std::string eval_split = "dev";
  std::string resume;  // run directory to continue from
  std::string precision = "auto";  // auto | fp32 | bf16 (the student's products; see train/loop_step.cpp)
  bool cuda_graph = false;  // on a GPU: length buckets and one captured step per bucket (train/graph_steps.h)
  bool group_by_length = true;  // Hugging Face's length-grouped batches (train/run_state.h length_grouped)
  template <class V>
  void visit_fields(V& v) {
    v("epochs", epochs, "training epochs over the train split");
    v("max_steps", max_steps, "stop after this many optimizer steps (overrides epochs); 0 = off");
    v("batch_size", batch_size, "training batch size");
    v("lr_peak", lr_peak, "peak learning rate of the encoder and classifier (linear warm-up, then linear decay to 0)");
    v("lr_warmup_ratio", lr_warmup_ratio, "fraction of the steps spent in linear warm-up");
    v("weight_decay", weight_decay, "AdamW decoupled weight decay; not applied to biases and LayerNorm weights");
    v("adam_beta1", adam_beta1, "AdamW beta1");
    v("adam_beta2", adam_beta2, "AdamW beta2");
    v("adam_eps", adam_eps, "AdamW epsilon");
    v("grad_clip", grad_clip, "clip the global gradient L2 norm to this value; 0 = off");
    v("eval_every", eval_every, "evaluate on the eval split every N steps; 0 = at the end of each epoch");
    v("save_every", save_every,
      "write a resumable training state every N steps; 0 = at each evaluation (an embedding recovery, which has none: every 100)");
    v("max_train_examples", max_train_examples, "use only the first N training examples; 0 = all");
    v("train_split", train_split,
      "split to train on (mnli_subset has no train split: use matched, evaluate on mismatched)");
    v("eval_split", eval_split, "split used for evaluation during training and to pick the best checkpoint");
    v("resume", resume, "run directory of an interrupted run to continue from (same config)");
    v("precision", precision,
      "auto, fp32 or bf16. bf16: the matrix products of the trained model's forward and backward in bf16 (AVX512_BF16; "
      "LibTorch's CPU autocast); weights, optimizer state, LayerNorm, softmax, losses and gates stay fp32. auto: bf16 "
      "where the dispatch probe measured bf16 products faster on this CPU, fp32 elsewhere and on a GPU (the log "
      "says which; a program linking the library without the CLI trains auto at fp32)");
    v("cuda_graph", cuda_graph,
      "on a CUDA device, pad each training batch to the smallest of a few length buckets and replay one captured "
      "CUDA graph per bucket for the steps whose shapes are fixed (docs/gpu.md); ignored on the CPU");
    v("group_by_length", group_by_length,
      "length-grouped batches as Hugging Face's group_by_length: each epoch's shuffle cut into mega-batches of up to "
      "50 batches, each sorted by length, the longest batch first; less padding, the same examples per epoch (false: "
      "random batches)");
  }
};

// Hard-Concrete head gates with an L0 penalty (Louizos et al. 2018; Voita et al. 2019) and the
// exact-N target mode (a Lagrangian controller as in CoFi pruning, Xia et al. 2022).
struct GateConfig {
  bool enabled = false;
  double beta = 0.33;  // temperature; Voita et al. 0.33, CoFi 2/3
  double gamma = -0.1;  // stretch interval lower end
  double zeta = 1.1;  // stretch interval upper end
  double log_alpha_init = 2.0;  // initial log α (P(open) ≈ 0.9+ at 2.0 with β = 0.33)
  double lambda = 0.01;  // L0 coefficient on Σ_h P(g_h ≠ 0) (sum over heads, not mean)
  double lr = 0.1;  // learning rate of log α
  bool freeze_encoder = false;  // train only the gates (encoder and classifier frozen)
  bool per_example = false;  // sample one gate per example instead of one per batch
  int target_heads = 0;  // > 0: Lagrangian target mode landing on exactly this many heads
  double target_flops = 0;  // in (0, 1): gates on heads, FFN neurons and sublayers, landing on this FLOPs fraction
  double target_params = 0;  // the same with an encoder-parameter budget
  int neuron_group = 1;  // FFN neurons per gate under a FLOPs or parameter target
  bool sublayer_gates = true;  // one more gate per attention and per FFN sublayer (CoFi's coarse masks)
  bool layer_gates = false;  // one more gate per whole layer: closed, the layer leaves the stack
  bool hidden_gates = false;  // one gate per hidden channel shared by every layer (CoFi's z_hidden)
  double target_warmup_ratio = 0.5;  // fraction of steps over which the target goes from all heads to N
  double lagrangian_lr = 0.01;  // learning rate of the multipliers λ1, λ2 (gradient ascent)
  bool finetune_after = true;  // after fixing exactly N heads, fine-tune with them fixed
  int finetune_epochs = 1;
  bool distill = false;  // distil from the unpruned model during the fixed-heads fine-tuning
  double distill_weight = 0.5;  // loss = (1 - w) task + w KL(teacher || student)
  double distill_temperature = 2.0;
  double distill_hidden = 0;  // weight of CoFi's layer-wise hidden-state distillation; 0 = off
  double distill_augment = 0;  // TinyBERT's word swaps in distilled steps: a word's swap probability; 0 = off
  template <class V>
  void visit_fields(V& v) {
    v("enabled", enabled, "train Hard-Concrete gates on the heads with an L0 penalty");
    v("beta", beta, "Hard-Concrete temperature β (Voita et al. 2019: 0.33; CoFi: 2/3)");
    v("gamma", gamma, "stretch interval lower end γ (Louizos et al.: -0.1)");
    v("zeta", zeta, "stretch interval upper end ζ (Louizos et al.: 1.1)");
    v("log_alpha_init", log_alpha_init, "initial log α of every gate");
    v("lambda", lambda,
      "L0 coefficient λ on the expected number of open heads (a sum; Voita's coefficient = ours × layers)");
    v("lr", lr, "learning rate of the gate parameters log α");
    v("freeze_encoder", freeze_encoder, "train only the gates; the encoder and classifier stay fixed");
    v("per_example", per_example, "sample gates per example instead of once per batch");
    v("target_heads", target_heads, "exact number of heads to keep (Lagrangian target mode); 0 = plain L0");
    v("target_flops", target_flops,
      "fraction of the encoder's FLOPs to keep: gates on heads, FFN neurons and sublayers (CoFi); 0 = off");
    v("target_params", target_params, "fraction of the encoder's parameters to keep, as target_flops; 0 = off");
    v("neuron_group", neuron_group, "FFN neurons sharing one gate under target_flops or target_params (1 = per neuron)");
    v("sublayer_gates", sublayer_gates,
      "under target_flops or target_params also one gate per attention and per FFN sublayer (CoFi's coarse masks)");
    v("layer_gates", layer_gates,
      "under target_flops or target_params: one more gate per whole layer, mixing it with the identity "
      "(x + z·(layer(x) − x)); a layer whose test-time gate is 0 leaves the stack, and its units with it "
      "(prune --structures heads,neurons,layers sets it for the gates)");
    v("hidden_gates", hidden_gates,
      "under target_flops or target_params: one gate per hidden channel, shared by every layer (CoFi's z_hidden); "
      "its expected width scales every head's projections and every neuron in the cost, and the channels it closes "
      "leave every tensor of the export (prune --structures heads,neurons,hidden sets it for the gates)");
    v("target_warmup_ratio", target_warmup_ratio,
      "fraction of steps over which the target falls linearly to its value (all heads, or 100%, at the start)");
    v("lagrangian_lr", lagrangian_lr, "learning rate of the Lagrange multipliers (gradient ascent)");
    v("finetune_after", finetune_after, "after fixing exactly N heads, fine-tune with those heads fixed");
    v("finetune_epochs", finetune_epochs,
      "epochs of that fixed-heads fine-tuning (prune train; a pruning run's FLOPs or parameter gates fine-tune "
      "for prune.recover_steps instead, as its other budget candidates recover)");
    v("distill", distill, "distil from the unpruned model during the fixed-heads fine-tuning");
    v("distill_weight", distill_weight, "weight of the distillation KL term (task term gets 1 - weight)");
    v("distill_temperature", distill_temperature, "softmax temperature of teacher and student logits in the KL term");
    v("distill_hidden", distill_hidden,
      "weight of CoFi's layer-wise hidden-state distillation (a learned map onto matched teacher layers) added "
      "while distilling to a FLOPs or parameter target; a recovery without gates (prune.distill_hidden sets it) "
      "matches each layer at the same depth instead, no map; 0 = off");
    v("distill_augment", distill_augment,
      "TinyBERT's data augmentation wherever a task run distils (the gates, and the recoveries, which it makes "
      "distil, slimmed or not): each row of a step, with probability 1/2, has every whole word swapped with this "
      "probability for one of its 15 nearest words in the teacher's input embeddings, and is labelled by the "
      "teacher alone (its task loss left out; train/augment.h); TinyBERT: 0.4; 0 = off");
  }
};

// `prune bench`: latency and throughput of a model folder, optionally against another.
struct BenchConfig {
  std::string compare;  // model folder to compare with (e.g. the unpruned one)
  std::string compare_precision;  // empty: run.precision
  std::vector<int> batches = {1, 32};
  int seq = 128;
  double min_seconds = 2.0;
  template <class V>
  void visit_fields(V& v) {
    v("compare", compare, "model folder to compare with (e.g. the unpruned model); speedup = its latency / ours");
    v("compare_precision", compare_precision,
      "precision of the compared model: fp32, bf16 or int8; empty = run.precision (the same model at two "
      "precisions: --compare DIR --set bench.compare_precision=fp32)");
    v("batches", batches, "batch sizes to time");
    v("seq", seq, "sequence length of the timed inputs (no padding)");
    v("min_seconds", min_seconds, "time each configuration for at least this long (median of the runs)");
  }
};

// The whole configuration. The section order here is the order of --dump-config.
struct Config {
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  EvalConfig eval;
  InferConfig infer;
  EmbedConfig embed;
  ExportConfig export_;
  TrainConfig train;
  GateConfig gates;
  PruneConfig prune;
  BenchConfig bench;
  AnalysisConfig analysis;
  ExplainConfig explain;
  TriggersConfig triggers;
  ReportConfig report;
  template <class V>
  void visit_sections(V& v) {
    v("run", run);
    v("model", model);
    v("data", data);
    v("eval", eval);
    v("infer", infer);
    v("embed", embed);
    v("export", export_);
    v("train", train);
    v("gates", gates);
    v("prune", prune);
    v("bench", bench);
    v("analysis", analysis);
    v("explain", explain);
    v("triggers", triggers);
    v("report", report);
  }
};

// A field of a type of its own (an enum; prune.method), read and written as text through its choice_text and
// parse_choice.
struct ChoiceRef {
  std::function<std::string()> text;
  std::function<void(const std::string& text, const std::string& where)> parse;
};

// One field of Config, addressed by its dotted path ("data.max_seq_len").
struct FieldRef {
  std::string path;
  std::string help;
  std::variant<int*, double*, bool*, std::string*, std::vector<int>*, std::vector<std::string>*, ChoiceRef> ptr;
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
// The config a resumed run must repeat (RUN_DIR/state): everything that changes a result, so not where the run lives,
// the resume flag, how long ranks wait, whether latency is measured, run.device (a run folder resumes on the CPU
// or a GPU alike), or the value of prune.max_drop (a frontier re-chooses within another D from what it measured).
std::string resume_yaml(const Config& cfg);

// run.device's form: -1 for "cpu", N for "cuda:N" ("cuda" is 0); anything else a ConfigError naming run.device.
// Whether this build and machine have that GPU: core/kernels/device.h parse_device.
int device_spec_index(const std::string& spec);

// How the dump_yaml text an interrupted run saved and this run's differ, value by value (help comments aside):
// `changed` as "section.key: old -> new" ("(absent)" on the side without the key); apart from it, the keys only
// `current` has, at their defaults (Config{}): added by a later build of headprune, so the interrupted run ran as
// their defaults do and may resume. A run resumes when `changed` is empty.
struct ConfigDiff {
  std::vector<std::string> changed, added_at_default;
};
ConfigDiff config_diff(const std::string& saved, const std::string& current);
// "a, b, c".
std::string join_list(const std::vector<std::string>& items);

// Markdown reference of every key: path, default, help.
std::string config_doc();

// Range checks across fields; throws ConfigError naming the dotted key and the fix.
void validate(const Config& cfg);

// The key nearest to `key` among `known` (edit distance), for "did you mean" hints; empty if none close.
std::string nearest_key(const std::string& key, const std::vector<std::string>& known);

}  // namespace hp::core
