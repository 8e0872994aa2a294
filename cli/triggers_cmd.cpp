// `prune triggers`: Hao et al.'s adversarial triggers (analysis/triggers.h), in stages sharing one context.
#include "analysis/triggers.h"
#include "cli/commands.h"

namespace hp::cli {

int run_triggers(const core::Config& cfg) {
  analysis::TriggersContext ctx;
  analysis::prepare_triggers(ctx, cfg);
  const auto mined = analysis::mine_attributions(ctx);
  const auto patterns = analysis::count_patterns(ctx, mined);
  analysis::write_triggers(ctx, analysis::attack(ctx, mined, patterns));
  return 0;
}

}  // namespace hp::cli
