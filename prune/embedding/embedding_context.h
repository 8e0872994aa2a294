// What every step of the pruning run for embeddings reads (prune/embedding/embedding_run.h): the teacher folder, the sentences
// distilled on, the selection and evaluation pairs, the teacher's embeddings of both, and how a model is scored.
// Internal to the embedding run's files (embedding_run.cpp, embedding_heads.cpp, …).
#pragma once

#include <torch/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

// The sequence length candidates are timed at: prune.latency_seq, or data.max_seq_len when that is 0.
long timing_seq(const core::Config& cfg);

// The scores of `model` by r.objective: on the selection pairs and the evaluation pairs, the cosine Spearman (in
// points) and the mean cosine of its embeddings of their sentences to the teacher's.
nlohmann::json score(const EmbedRun& r, const core::Bert& model);

// The stages' context over the embedding run (the stages of prune/stages/stages.h read it as a task run's): the
// teacher is the unpruned model, ranked on the first prune.rank_examples (0: all) of the search's sentences (their
// text in STATE/rank_sentences.txt), each curve point scored on the evaluation and the selection pairs.
void stage_context(const EmbedRun& r, RunContext& ctx);

// STATE/NAME.json, computed once.
nlohmann::json cached(const std::string& state, const std::string& name, const std::function<nlohmann::json()>& make);

}  // namespace hp::prune
