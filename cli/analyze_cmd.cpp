// `prune analyze`: what every head of a model does over a data set (analysis/analyze.h), in stages
// sharing one context; the optional ones run when their setting asks for them.
#include <iostream>

#include "analysis/analyze.h"
#include "analysis/outputs.h"
#include "cli/commands.h"

namespace hp::cli {

int run_analyze(const core::Config& cfg) {
  const auto& ac = cfg.analysis;
  analysis::AnalyzeContext ctx;
  analysis::prepare_analyze(ctx, cfg);
  analysis::analyse_model(ctx);
  if (ac.resamples > 0) analysis::bootstrap_stability(ctx);
  if (!ac.compare.empty()) analysis::compare_models(ctx);
  if (ac.control == "random-init") analysis::random_init_control(ctx);
  if (!ac.prune_run.empty()) analysis::relate_prune_run(ctx);
  analysis::write_analysis(ctx);
  std::cout << analysis::summary_line(ctx.analysis) << "\n";
  return 0;
}

}  // namespace hp::cli
