// Subcommands of the `prune` executable. Each takes the resolved Config and returns an exit code;
// errors are thrown (core/base/errors.h) and caught once in cli/main.cpp.
#pragma once

#include "core/base/config.h"

namespace hp::cli {

int run_eval(const core::Config& cfg);   // prune eval
int run_infer(const core::Config& cfg);  // prune infer
int run_train(const core::Config& cfg);  // prune train
int run_export(const core::Config& cfg); // prune export
int run_bench(const core::Config& cfg);  // prune bench
int run_prune(const core::Config& cfg);  // prune (no subcommand): the pruning run

}  // namespace hp::cli
