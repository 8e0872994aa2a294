// Subcommands of the `prune` executable. Each takes the resolved Config and returns an exit code;
// errors are thrown (core/base/errors.h) and caught once in cli/main.cpp.
#pragma once

#include "core/base/config.h"

namespace hp::cli {

int run_eval(const core::Config& cfg);  // prune eval
int run_infer(const core::Config& cfg);  // prune infer
int run_embed(const core::Config& cfg);  // prune embed
int run_train(const core::Config& cfg);  // prune train
int run_export(const core::Config& cfg);  // prune export
int run_bench(const core::Config& cfg);  // prune bench
int run_prune(const core::Config& cfg);  // prune (no subcommand): the pruning run
int run_analyze(const core::Config& cfg);  // prune analyze
int run_explain(const core::Config& cfg);  // prune explain
int run_triggers(const core::Config& cfg);  // prune triggers
int run_report(const core::Config& cfg);  // prune report

}  // namespace hp::cli
