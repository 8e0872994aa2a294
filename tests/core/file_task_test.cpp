// core/data/file_task: a user's files as a task — splits, labels, metrics and data.metric, the model's id2label,
// slices and the held-out rows of read_task, and task_of's one task per setting. golden.files_run runs the whole
// pruning run on such files against the GLUE task run's golden.
#include "core/data/file_task.h"

#include <unistd.h>  // getpid

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "fixtures.h"

using Catch::Matchers::Contains;
using hp::core::DataConfig;
using hp::core::file_task;
using hp::core::read_task;

namespace {
namespace fs = std::filesystem;

// `text` written to a scratch file `name` of this process; its path.
std::string write(const std::string& name, const std::string& text) {
  return hp::test::scratch_file("hp_file_task_test", name, text);
}

DataConfig files(const std::string& train, const std::string& dev) {
  DataConfig d;
  d.train_file = write("train.csv", train);
  d.validation_file = write("dev.csv", dev);
  return d;
}

}  // namespace

TEST_CASE("a files' task: splits train and dev, labels sorted, accuracy, F1 and MCC for two classes",
          "[core][files]") {
  const DataConfig d = files("review,sentiment\ngood,positive\nbad,negative\nfine,positive\n",
                             "review,sentiment\nok,negative\n");
  DataConfig named = d;
  named.label_column = "sentiment";
  const auto t = file_task(named, {});
  CHECK(t.name == "files");
  CHECK(t.split_names() == std::vector<std::string>{"train", "dev"});
  CHECK(t.labels == std::vector<std::string>{"negative", "positive"});
  CHECK(t.metrics == std::vector<std::string>{"accuracy", "f1", "mcc"});
  CHECK(t.primary_metric == "accuracy");
  CHECK(t.files->text_a == "review");
  CHECK(t.files->text_b.empty());
  const auto dev = read_task(t, "", "dev");
  REQUIRE(dev.size() == 1);
  CHECK(dev[0].text_a == "ok");
  CHECK(dev[0].label == 0);  // negative
  CHECK(dev[0].has_label);
  // Slices and the held-out rows work on files as on GLUE's splits.
  CHECK(read_task(t, "", "train[1:]").size() == 2);
  CHECK(read_task(t, "", "train[-1:]")[0].text_a == "fine");
  CHECK(read_task(t, "", "train[holdout:1]").size() == 1);
  CHECK(read_task(t, "", "train[rest:1]").size() == 2);
  // data.metric picks the primary one among them, and names them when it is none.
  named.metric = "f1";
  CHECK(file_task(named, {}).primary_metric == "f1");
  named.metric = "spearman";
  CHECK_THROWS_WITH(file_task(named, {}),
                    "data.metric = spearman: classes in " + d.train_file +
                        " are measured by accuracy, f1, mcc; choose one of them");
}

TEST_CASE("a files' task: the model's id2label order, three classes' macro F1, scores' correlations",
          "[core][files]") {
  DataConfig d = files("text,label\na,positive\nb,negative\nc,neutral\n", "text,label\nd,neutral\n");
  CHECK(file_task(d, {}).labels == std::vector<std::string>{"negative", "neutral", "positive"});
  CHECK(file_task(d, {}).metrics == std::vector<std::string>{"accuracy", "macro_f1", "mcc"});
  const auto kept = file_task(d, {"positive", "neutral", "negative"});  // a fine-tuned model keeps its ids
  CHECK(kept.labels == std::vector<std::string>{"positive", "neutral", "negative"});
  CHECK(read_task(kept, "", "dev")[0].label == 1);
  d = files("sentence1,sentence2,label\na,b,0.5\nc,d,4\n", "sentence1,sentence2,label\ne,f,2.25\n");
  const auto scores = file_task(d, {});
  CHECK(scores.is_regression());
  CHECK(scores.metrics == std::vector<std::string>{"pearson", "spearman"});
  CHECK(scores.files->text_b == "sentence2");
  CHECK(read_task(scores, "", "dev")[0].label == 2.25f);
}

TEST_CASE("task_of: data.task's row without files, one task per setting with them", "[core][files]") {
  DataConfig glue;
  glue.task = "rte";
  CHECK(&hp::core::task_of(glue, "") == &hp::core::find_task("rte"));
  const DataConfig d = files("text,label\na,1\nb,0\n", "text,label\nc,1\n");
  const auto& once = hp::core::task_of(d, "");
  CHECK(&hp::core::task_of(d, "") == &once);
  DataConfig other = d;
  other.metric = "mcc";
  CHECK(hp::core::task_of(other, "").primary_metric == "mcc");
  CHECK(once.primary_metric == "accuracy");
  CHECK_THROWS_WITH(read_task(once, "", "test"), Contains("test"));
}

TEST_CASE("a user's files need no data root; data.task's split files do", "[core][files]") {
  DataConfig d = files("text,label\na,1\n", "text,label\nb,1\n");
  d.root = "/nonexistent/headprune-data";
  CHECK(hp::core::data_root_for(d).empty());
  DataConfig glue;
  glue.root = d.root;
  CHECK_THROWS_AS(hp::core::data_root_for(glue), hp::InputError);
}
