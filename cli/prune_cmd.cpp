// The pruning run, the `prune` executable's default command (no subcommand): prune/run/pipeline.h.
#include <atomic>
#include <csignal>
#include <iostream>

#include "core/base/errors.h"  // kInterruptedExit
#include "cli/commands.h"
#include "prune/run/pipeline.h"

namespace hp::cli {

namespace {

std::atomic<bool> g_stop{false};

// First Ctrl-C: finish the current curve point, then stop (everything finished is saved). Second:
// stop at once (files are written atomically, so the record stays consistent).
void on_signal(int sig) {
  if (g_stop.exchange(true)) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

}  // namespace

int run_prune(const core::Config& cfg) {
  auto previous_int = std::signal(SIGINT, on_signal);
  auto previous_term = std::signal(SIGTERM, on_signal);
  const int rc = prune::run_pruning(cfg, &g_stop);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  if (rc == kInterruptedExit)
    std::cerr << "interrupted; finished work is saved in " << cfg.run.out_dir
              << "; run the same command again to resume\n";
  return rc;
}

}  // namespace hp::cli
