// `prune report RUN_DIR... --out report.html`: one self-contained offline HTML page (analysis/report/report.h),
// in stages sharing one context.
#include "analysis/report/report.h"
#include "cli/commands.h"

namespace hp::cli {

int run_report(const core::Config& cfg) {
  analysis::ReportContext ctx;
  analysis::resolve_report(ctx, cfg);
  analysis::PageParts page = analysis::static_page(ctx);
  analysis::load_view_inputs(ctx);
  analysis::add_views(ctx, page);
  analysis::write_report(ctx, page);
  return 0;
}

}  // namespace hp::cli
