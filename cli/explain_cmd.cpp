// `prune explain`: Hao et al.'s attribution tree of one example (analysis/explain.h).
#include <iostream>

#include "analysis/explain.h"
#include "core/base/log.h"
#include "core/data/file_task.h"
#include "core/data/glue.h"
#include "core/text/tokenizer.h"
#include "cli/commands.h"

namespace hp::cli {

int run_explain(const core::Config& cfg) {
  const auto& task = core::task_of(cfg.data, cfg.model.path);
  const core::Bert model = analysis::load_fine_tuned(cfg, "an attribution tree");
  const auto tok = core::Tokenizer::from_model_dir(cfg.model.path);
  std::string id;
  const core::Example ex = analysis::pick_example(cfg, task, tok, id);
  const std::string out = cfg.explain.out.empty() ? cfg.run.out_dir + "/explain/" + id : cfg.explain.out;
  const analysis::Explanation x =
      analysis::explain_example(model, tok, ex, cfg.data.max_seq_len, cfg.prune.attattr_steps,
                                cfg.prune.attattr_riemann, cfg.explain.target == "gold", cfg.explain.threshold);
  analysis::write_explanation(cfg, task, ex, id, x, out);
  std::cout << analysis::tree_line(x) << "\n";
  core::log_info("explain", "wrote tree.json, tree.svg and tree.dot to " + out);
  return 0;
}

}  // namespace hp::cli
