// The configuration sections of the analysis subcommands (`prune analyze`, `explain`, `triggers`, `report`): one
// struct per section as in core/base/config.h, which includes this file and gathers every section into Config.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// `prune analyze`: what every head does (analysis/DEFINITIONS.md).
struct AnalysisConfig {
  std::string split = "dev";
  int examples = 1000;  // first N of the split in file order; 0 = all
  std::string syntax;  // CoNLL-U file: analyse its sentences instead of the task split
  std::string compare;  // a second model folder analysed on the same examples
  std::string mask;  // heads masked (not analysed), a head-mask SPEC
  std::string prune_run;  // a pruning run folder whose importance and masks are joined
  int resamples = 0;  // bootstrap resamples for role stability; 0 = off
  std::string control;  // "random-init": the same analysis on a random model of the same shape
  double tau = 3.0;
  double alpha = 0.05;
  int min_occurrences = 100;
  int batch_size = 32;
  bool noop = true;  // Clark's no-op gradients when the split has labels
  std::string out;  // output folder; empty = <run.out_dir>/analysis
  template <class V>
  void visit_fields(V& v) {
    v("split", split, "split to analyse (its first `examples` rows in file order)");
    v("examples", examples, "examples analysed: the first N of the split in file order; 0 = all");
    v("syntax", syntax,
      "CoNLL-U treebank: analyse its sentences (syntactic heads, dependency roles) instead of the split");
    v("compare", compare,
      "second model folder analysed on the same examples (per-head changes, roles gained and lost)");
    v("mask", mask, "heads masked and left out of the analysis: \"2:0,3;5:11\" or a file holding such a spec");
    v("prune_run", prune_run,
      "pruning run folder: Spearman of its importance with each statistic, roles of the kept heads");
    v("resamples", resamples, "bootstrap resamples of the examples: how often each head keeps each role; 0 = off");
    v("control", control,
      "random-init: also analyse a randomly initialised model of the same shape (artefact control)");
    v("tau", tau, "sieve bias threshold τ of the one-sided t-test H0: mean score ≤ τ (Pande et al.: 3)");
    v("alpha", alpha, "significance level of the role tests (raw, Holm and Benjamini–Hochberg)");
    v("min_occurrences", min_occurrences, "relations with fewer occurrences get no syntactic heads (Voita: 100)");
    v("batch_size", batch_size, "batch size of the attention pass");
    v("noop", noop, "with labels: one backward per batch for the gradient w.r.t. attention to [SEP] (Clark's no-op)");
    v("out", out, "output folder (default <run.out_dir>/analysis)");
  }
};

// `prune explain`: Hao et al.'s attribution tree of one example (analysis/attr_tree.h). The attribution
// steps and Riemann rule are prune.attattr_steps / prune.attattr_riemann, as for the importance.
struct ExplainConfig {
  std::string split = "dev";
  int example = 0;  // row of the split (file order), unless text is given
  std::string text;  // explain this text instead (first sentence)
  std::string text_b;  // its second sentence, for pair tasks
  double threshold = 0.4;  // Hao's τ: edges above this share of the layer's largest attribution
  std::string target = "predicted";  // the class whose probability is attributed: predicted or gold
  std::string out;  // output folder; empty = <run.out_dir>/explain/<example or text>
  template <class V>
  void visit_fields(V& v) {
    v("split", split, "split that --example indexes (file order)");
    v("example", example, "row of the split to explain (0 = first); ignored when explain.text is set");
    v("text", text, "explain this text instead of a row (first sentence)");
    v("text_b", text_b, "second sentence of the text, for sentence-pair tasks");
    v("threshold", threshold, "edges above this share of each layer's largest attribution (Hao et al.: 0.4)");
    v("target", target, "class whose probability is attributed: predicted, or gold (rows with labels only)");
    v("out", out, "output folder (default <run.out_dir>/explain/example<K> or .../text)");
  }
};

// `prune triggers`: Hao et al.'s adversarial triggers (analysis/triggers.h), with a random-pair baseline.
struct TriggersConfig {
  std::string split = "train";  // where the patterns are mined (its first `examples` rows, file order)
  int examples = 1000;
  std::string eval_split = "dev";  // where they are inserted
  int top_k = 3;  // patterns per class inserted into each example
  int min_tokens = 15;  // mine only examples this long (Hao et al.'s SST-2 filter)
  std::string out;  // output folder; empty = <run.out_dir>/triggers
  template <class V>
  void visit_fields(V& v) {
    v("split", split, "split the attention-attribution patterns are mined from (its first `examples` rows)");
    v("examples", examples, "examples mined for patterns (Hao et al.: 500 to 1,000); 0 = all");
    v("eval_split", eval_split, "split whose examples of the other classes get the triggers inserted");
    v("top_k", top_k, "most frequent patterns per class inserted into each attacked example (Hao et al.: 3)");
    v("min_tokens", min_tokens,
      "mine the first `examples` rows with at least this many word pieces, [CLS]/[SEP] included (Hao et al. skip shorter SST-2 rows: 15)");
    v("out", out, "output folder (default <run.out_dir>/triggers)");
  }
};

// `prune report RUN_DIR...`: one offline HTML page of a pruning run, an analysis and gated runs, with
// attention views of chosen examples (analysis/report/report.h, analysis/report/README.md).
struct ReportConfig {
  std::vector<std::string> runs;  // folders: a pruning run, a `prune analyze` output, gated runs
  std::string split = "dev";  // split that report.examples indexes
  std::vector<int> examples;  // rows of the split shown in the attention views; empty = the first `count`
  int count = 8;  // rows shown when report.examples is empty
  std::string text;  // one more example: a text (its second sentence in report.text_b)
  std::string text_b;
  std::string texts;  // file: one more example per line, a tab between the sentences of a pair
  std::string model;  // the model of the views; empty = the run's fine-tuned model, else model.path
  std::string slim;  // the slimmed model beside it; empty = <pruning run>/model, "none" = none
  bool trees = true;  // attribution trees (integrated gradients, L × prune.attattr_steps backward passes)
  std::string out;  // the HTML file; empty = <run.out_dir>/report.html
  template <class V>
  void visit_fields(V& v) {
    v("runs", runs,
      "folders shown: a pruning run, a `prune analyze` output, gated training runs (positional on the command line)");
    v("split", split, "split that report.examples indexes (file order)");
    v("examples", examples,
      "rows of the split shown in the attention views, e.g. [0, 5, 17]; empty = the first report.count");
    v("count", count, "rows shown when report.examples is empty (first rows in file order)");
    v("text", text, "one more example: a text (sentence A)");
    v("text_b", text_b, "sentence B of report.text, for sentence-pair tasks");
    v("texts", texts, "file with more examples, one per line, a tab between the sentences of a pair");
    v("model", model,
      "model folder of the attention views (default: the pruning run's fine-tuned model, else the analysed model, else model.path)");
    v("slim", slim, "slimmed model shown beside it (default <pruning run>/model; none = no slimmed view)");
    v("trees", trees, "compute each example's attribution tree (integrated gradients; the slow part)");
    v("out", out, "the HTML file written (default <run.out_dir>/report.html)");
  }
};

}  // namespace hp::core
