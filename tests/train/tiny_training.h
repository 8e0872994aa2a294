// The tiny training setup of the trainer tests (tests/train/trainer_test.cpp, device_test.cpp): the tiny BERT
// (L=2, H=4, D=32, 3 labels) and synthetic data with a learnable rule: the label says which of two marker tokens
// occurs (or neither).
#pragma once

#include <filesystem>
#include <random>
#include <string>

#include "core/base/config.h"
#include "core/data/glue.h"
#include "core/io/checkpoint.h"  // load_bert
#include "fixtures.h"
#include "train/trainer.h"

namespace hp::test {

constexpr int kMarker = 30;  // words of the tiny vocab: kMarker → label 0, kMarker + 1 → label 1

// n examples of 4..10 random other word ids; a third get kMarker, a third kMarker + 1 at a random place.
inline hp::core::EncodedDataset make_data(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  hp::core::EncodedDataset d;
  d.has_labels = true;
  for (int i = 0; i < n; ++i) {
    int len = 4 + static_cast<int>(rng() % 7);
    std::vector<int32_t> ids = {2};  // [CLS]
    for (int k = 0; k < len; ++k) {
      int32_t w = 14 + static_cast<int32_t>(rng() % 84);
      ids.push_back(w == kMarker || w == kMarker + 1 ? kMarker + 2 : w);
    }
    const int label = i % 3;
    if (label < 2) ids[1 + rng() % len] = kMarker + label;
    ids.push_back(3);  // [SEP]
    d.type_ids.emplace_back(ids.size(), 0);
    d.ids.push_back(ids);
    d.labels.push_back(static_cast<float>(label));
  }
  return d;
}

inline hp::core::Bert tiny_model() {
  hp::core::LoadOptions lo;
  lo.num_labels = 3;
  lo.seed = 7;
  return hp::core::load_bert(kTinyBert, lo);
}

inline std::string fresh_dir(const std::string& name) {
  std::string dir = std::string(HP_BINARY_DIR) + "/test_tmp/train/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

struct Setup {
  hp::core::TrainConfig tc;
  hp::core::GateConfig gc;
  hp::core::RunConfig rc;
  hp::core::EncodedDataset train = make_data(192, 1), dev = make_data(64, 2);
  hp::train::TrainData data() const {
    hp::train::TrainData d;
    d.task = &hp::core::find_task("mnli");
    d.train = &train;
    d.eval = &dev;
    d.eval_batch_size = 32;
    return d;
  }
  Setup() {
    tc.epochs = 20;  // 240 steps: the tiny random encoder needs ~150 to pick up the rule
    tc.batch_size = 16;
    tc.lr_peak = 3e-3;
    tc.weight_decay = 0.01;
    rc.seed = 11;
  }
};

}  // namespace hp::test
