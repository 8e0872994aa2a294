// What every step of the pruning run for embeddings reads (prune/embedding/embedding_run.h): the teacher folder, the sentences
// distilled on, the selection and evaluation pairs, and the stages' context over them.
#pragma once

#include <torch/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/config.h"
#include "core/data/batching.h"
#include "core/data/glue.h"
#include "eval/embedding.h"
#include "prune/heads/criteria.h"  // RankData
#include "prune/objective/objective.h"
#include "prune/record/run_store.h"
#include "prune/stages/stages.h"
#include "train/embedding_objective.h"

namespace hp::prune {

// What the run reads: the folder (its encoder is the teacher), the sentences it distils and searches on, and the
// pairs it chooses (selection) and reports (evaluation) on.
struct EmbedRun {
  const core::Config* cfg = nullptr;
  const std::atomic<bool>* stop = nullptr;
  std::optional<eval::SentenceEncoder> teacher;
  train::Pooling pooling;
  std::string select_split;
  std::vector<core::Example> select_pairs, eval_pairs;
  core::EncodedDataset sentences, search_set;  // unlabelled single sentences
  core::EncodedDataset eval_sentences;  // the evaluation pairs' distinct sentences
  std::vector<std::string> search_texts;  // search_set's sentences, in its order
  std::string distilled;  // the sentences distilled on, one per line (RUN_DIR/state/embedding/distill_sentences.txt)
  std::shared_ptr<RunStore> store;
  std::shared_ptr<Objective> objective;  // the embedding's (prune/objective/objective.h), once the teacher embedded
  std::string state;  // RUN_DIR/state/embedding
};

// The selection slice, the evaluation pairs and the sentences to distil on (r.cfg's, resolved by the selection;
// `user` is the config as given), encoded with the teacher's tokenizer. ConfigError when a split has no pairs.
void read_data(EmbedRun& r, const core::Config& user);

// The stages' context over the embedding run (the stages of prune/stages/stages.h read it as a task run's): the
// teacher is the unpruned model, ranked on the first prune.rank_examples (0: all) of the search's sentences (their
// text in STATE/rank_sentences.txt), each curve point scored on the evaluation and the selection pairs.
void stage_context(const EmbedRun& r, RunContext& ctx);

}  // namespace hp::prune
