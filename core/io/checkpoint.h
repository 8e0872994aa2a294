// Hugging Face model folders: config.json + model.safetensors, its shards (model.safetensors.index.json +
// model-0000i-of-0000N.safetensors) or pytorch_model.bin (+ vocab.txt).
// Loading validates every tensor against the key table (core/model/bert_keys.h) in both directions;
// saving writes a BertForSequenceClassification folder that transformers' from_pretrained loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/model/bert.h"
#include <string>
#include <vector>

#include "core/model/bert_config.h"

namespace hp::core {

struct LoadOptions {
  int num_labels = 0;  // labels the task needs; 0 = take the checkpoint's
  uint64_t seed = 42;  // initialises a classifier (and pooler) absent from the checkpoint
  // The task's class names: they replace a checkpoint's generic id2label (none, or HF's LABEL_i), so the
  // models headprune writes say "negative"/"positive", not LABEL_0/LABEL_1.
  std::vector<std::string> label_names;
  // A stored classifier of another label count than num_labels is dropped and a fresh one made (in place of a
  // CheckpointError): the pruning run's prune.new_classifier.
  bool new_classifier = false;
  // The head the task reads (a token tagger's kToken); unset: the checkpoint's. A stored classifier of the other
  // head is refused, or with new_classifier dropped for a fresh one; a pooler is not read under a token head.
  std::optional<Head> head;
};

// What load_bert found, for messages and run records.
struct LoadReport {
  std::string weights_file;  // model.safetensors, model.safetensors.index.json or pytorch_model.bin that was read
  std::string prefix;  // encoder key prefix found ("bert." or "")
  bool classifier_initialized = false;  // no classifier in the checkpoint: a fresh one was made
  bool pooler_initialized = false;
  std::vector<std::string> non_finite;  // tensors holding NaN/Inf ("name (count of numel)"); a warning was logged
};

// Loads a model folder. Throws CheckpointError naming the file, the key and the fix.
Bert load_bert(const std::string& dir, const LoadOptions& opts = {}, LoadReport* report = nullptr);

// Throws ConfigError when `max_seq_len` exceeds the model's position embeddings.
void check_max_seq_len(const BertConfig& cfg, int max_seq_len);

// Writes config.json, model.safetensors (keys "bert.*" and "classifier.*") and copies the tokenizer
// files (vocab.txt, tokenizer_config.json, special_tokens_map.json) from `tokenizer_dir` when given.
// With `hdf5`, also writes model.h5 holding the same tensors under the same names. With `max_shard_mb` > 0
// (export.max_shard_mb) and more tensor data than that (MB = 10^6 bytes), the tensors go into transformers' shards
// instead: model-00001-of-0000N.safetensors … and model.safetensors.index.json, split in the key table's order
// layer by layer as save_pretrained(max_shard_size=…) splits them (core/io/safetensors_index.h plan_shards).
// The folder is written whole or not at all (core::StagedFolder): `dir` then holds exactly this model's files, or
// its previous content untouched after a failure or a kill. Rank 0 alone writes in a data-parallel run.
void save_bert(const Bert& model, const std::string& dir, const std::string& tokenizer_dir = "", bool hdf5 = false,
               double max_shard_mb = 0);

// How write_bert_files writes the weights: model.h5 beside them, transformers' shards of at most max_shard_mb MB,
// without the classifier (a sentence-transformers export), at the element type `dtype` (export.dtype: fp32, bf16 or
// fp16; config.json's torch_dtype names it, model.h5 holds the rounded values at fp32).
struct WeightFiles {
  bool hdf5 = false;
  double max_shard_mb = 0;
  bool encoder_only = false;
  std::string dtype = "fp32";
};

// Whether `dir` holds a model folder headprune wrote (save_bert, `prune export`): told by its config.json's content
// (an object with headprune's "heads_per_layer", which every export since the first writes and Hugging Face never
// does), not by file names: a user's Hugging Face folder holds the same names.
bool holds_headprune_export(const std::string& dir);

// The files of save_bert, written into `dir` as it is (a fresh staging folder of the caller's, which adds its
// own files before it commits).
void write_bert_files(const Bert& model, const std::string& dir, const std::string& tokenizer_dir = "",
                      const WeightFiles& files = {});

}  // namespace hp::core
