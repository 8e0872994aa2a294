// `prune train`: fine-tune a model folder on a GLUE task, optionally learning head gates (plain L0 or
// exactly N heads), keeping the best checkpoint in RUN_DIR/best. The loop itself: train/trainer.h.
#include <atomic>
#include <csignal>
#include <iostream>

#include "core/base/config.h"  // dump_yaml
#include "core/base/errors.h"  // kInterruptedExit
#include "core/base/log.h"
#include "core/base/run_folder.h"
#include "core/data/file_task.h"
#include "cli/commands.h"
#include "train/task_run.h"

namespace hp::cli {

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

}  // namespace

int run_train(const core::Config& cfg) {
  train::TaskRun run;
  run.model_dir = cfg.model.path;
  run.run_dir = cfg.train.resume.empty() ? cfg.run.out_dir : cfg.train.resume;
  run.resume = !cfg.train.resume.empty();
  run.stop = &g_stop;
  const std::string& run_dir = run.run_dir;
  // One rule for every run folder (core/base/run_folder.h): one run at a time, never over another run or
  // unrelated files.
  const core::RunLock lock(run_dir);
  if (!run.resume && core::claim_run_folder(run_dir, core::RunKind::kTraining, core::dump_yaml(cfg)))
    core::log_info("train", run_dir + " holds this training run already: starting it again (--resume " + run_dir +
                                " continues it instead)");
  auto previous_int = std::signal(SIGINT, on_signal);
  auto previous_term = std::signal(SIGTERM, on_signal);
  train::TrainResult r = train::train_task(cfg, run);
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
  if (r.interrupted) {
    std::cerr << "interrupted at step " << r.steps << "; state saved in " << run_dir
              << "/state; continue with: prune train --config <same> --resume " << run_dir << "\n";
    return kInterruptedExit;
  }

  const core::TaskSpec& task = core::task_of(cfg.data, cfg.model.path);
  std::cout << task.name << " " << cfg.train.eval_split << ": best " << r.metric << " " << r.best_metric << " at step "
            << r.best_step << "; best/ re-evaluated with " << r.heads_kept << "/" << r.heads_total << " heads:";
  for (const auto& [name, value] : r.final_metrics) std::cout << "  " << name << " " << value;
  std::cout << "  |  " << r.steps << " steps, " << r.steps_per_s << " steps/s, " << r.examples_per_s << " examples/s\n";
  core::log_info("train", "wrote " + run_dir + "/{best/, metrics.csv, run.h5, config.resolved.yaml, train_result.json" +
                              (cfg.gates.enabled || cfg.gates.target_heads > 0 ? ", head_mask.txt}" : "}"));
  return 0;
}

}  // namespace hp::cli
