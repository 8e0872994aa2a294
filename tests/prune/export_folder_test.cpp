// core::StagedFolder (a model folder written whole or not at all, #44) and the int8 ONNX export's failed check
// (prune/export/onnx.h, #46): what stays on disk after a failure, and what the message says.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <unistd.h>  // getpid

#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/io/checkpoint.h"
#include "fixtures.h"
#include "onnx_check.h"
#include "prune/export/onnx.h"
#include "prune/export/slim.h"
#include "skip.h"

namespace {

namespace fs = std::filesystem;
using hp::test::file_names;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// The entries of `parent` that a StagedFolder for `name` made (.NAME.tmp-*), left behind.
std::vector<std::string> leftovers(const fs::path& parent, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(parent))
    if (e.path().filename().string().rfind("." + name + ".tmp", 0) == 0) out.push_back(e.path().string());
  return out;
}


}  // namespace

TEST_CASE("StagedFolder: the content appears at the target whole at commit, not before", "[prune][export][files]") {
  const auto root = hp::test::scratch_dir("hp_staged_new");
  fs::remove_all(root);
  const fs::path target = root / "a" / "b" / "out";  // two missing parents
  {
    hp::core::StagedFolder folder(target.string());
    CHECK(fs::path(folder.path()).parent_path() == target.parent_path());  // beside it: one file system
    write(fs::path(folder.path()) / "config.json", "{}\n");
    CHECK(!fs::exists(target));
    folder.commit();
  }
  CHECK(file_names(target) == std::vector<std::string>{"config.json"});
  CHECK(leftovers(target.parent_path(), "out").empty());
}

TEST_CASE("StagedFolder: an earlier folder is replaced whole, no file of it left", "[prune][export][files]") {
  const auto root = hp::test::scratch_dir("hp_staged_replace");
  fs::remove_all(root);
  const fs::path target = root / "out";
  fs::create_directories(target);
  write(target / "vocab.txt", "old\n");
  write(target / "config.json", "old\n");
  hp::core::StagedFolder folder(target.string());
  write(fs::path(folder.path()) / "vocab.json", "{}\n");
  write(fs::path(folder.path()) / "config.json", "new\n");
  CHECK(hp::core::read_file((target / "config.json").string()) == "old\n");  // untouched until commit
  folder.commit();
  CHECK(file_names(target) == std::vector<std::string>{"config.json", "vocab.json"});
  CHECK(hp::core::read_file((target / "config.json").string()) == "new\n");
  CHECK(leftovers(root, "out").empty());
}

TEST_CASE("StagedFolder: a failure before commit leaves the target as it was, no temporary folder, no parent it made",
          "[prune][export][files]") {
  const auto root = hp::test::scratch_dir("hp_staged_fail");
  fs::remove_all(root);
  fs::create_directories(root / "kept");
  write(root / "kept" / "config.json", "earlier\n");
  for (const fs::path target : {root / "kept", root / "new" / "deeper" / "out"}) {
    INFO(target);
    try {
      hp::core::StagedFolder folder(target.string());
      write(fs::path(folder.path()) / "config.json", "half\n");
      throw hp::InternalError("a check failed");
    } catch (const hp::InternalError&) {
    }
    CHECK(leftovers(root, "kept").empty());
  }
  CHECK(file_names(root) == std::vector<std::string>{"kept"});  // new/deeper were made for it and removed again
  CHECK(hp::core::read_file((root / "kept" / "config.json").string()) == "earlier\n");
  // A file where the folder belongs is refused before anything is written.
  write(root / "file", "x");
  CHECK_THROWS_AS(hp::core::StagedFolder((root / "file").string()), hp::InputError);
  CHECK(file_names(root) == std::vector<std::string>{"file", "kept"});
}

TEST_CASE("StagedFolder: a killed writer's staging folder is removed by the next writer, a live one's kept",
          "[prune][export][files]") {
  const auto root = hp::test::scratch_dir("hp_staged_stale");
  fs::remove_all(root);
  fs::create_directories(root);
  // No process has pid 2^22 + 1 (above Linux's pid_max); our own pid is alive.
  const fs::path dead = root / ".out.tmp-4194305-0", alive = root / (".out.tmp-" + std::to_string(::getpid()) + "-7");
  const fs::path other = root / ".outer.tmp-4194305-0";  // another target's
  for (const auto& d : {dead, alive, other}) {
    fs::create_directories(d);
    write(d / "model.safetensors", "half");
  }
  hp::core::StagedFolder folder((root / "out").string());
  CHECK(!fs::exists(dead));
  CHECK(fs::exists(alive));
  CHECK(fs::exists(other));
  // A run folder taken over from a killed run: every dead writer's staging folder under it, at any depth.
  const fs::path deep = root / "recover" / ".best.tmp-4194305-3.old";
  fs::create_directories(deep / "sub");
  hp::core::remove_stale_staging_under(root.string());
  CHECK(!fs::exists(other));
  CHECK(!fs::exists(deep));
  CHECK(fs::exists(root / "recover"));
  CHECK(fs::exists(alive));
}

TEST_CASE("save_bert over a folder of another model leaves exactly the new model's files", "[prune][export][files]") {
  const auto root = hp::test::scratch_dir("hp_save_bert_over");
  fs::remove_all(root);
  const fs::path out = root / "model";
  fs::create_directories(out);
  for (const char* name : {"vocab.json", "merges.txt", "modeling_headprune.py", "config.json"}) write(out / name, "old");
  auto model = hp::core::load_bert(hp::test::kTinyBert);
  hp::core::save_bert(model, out.string(), hp::test::kTinyBert);
  hp::core::save_bert(model, (root / "fresh").string(), hp::test::kTinyBert);
  CHECK(file_names(out) == file_names(root / "fresh"));
  CHECK(!fs::exists(out / "vocab.json"));
  CHECK(hp::core::load_bert(out.string()).config().num_hidden_layers == model.config().num_hidden_layers);
  CHECK(leftovers(root, "model").empty());
}

TEST_CASE("a failed int8 ONNX check leaves no model.int8.onnx and no check file, and says which criterion failed",
          "[prune][export][onnx][lowp]") {
  auto model = hp::core::load_bert(hp::test::kTinyBert);
  const auto dir = hp::test::scratch_dir("hp_onnx_int8_fail");
  fs::remove_all(dir);
  hp::core::save_bert(model, dir.string(), hp::test::kTinyBert);
  const auto data = hp::test::int8_check_data(model, 64);
  hp::core::BatchOptions bo;
  bo.batch_size = 32;
  hp::prune::Int8CheckLimits impossible;
  impossible.min_agreement = 1.01;  // more than every example: the check cannot pass
  try {
    hp::prune::export_onnx(model, dir.string());
  } catch (const hp::InputError& e) {
    return hp::test::skip(std::string("the ONNX check: ") + e.what());
  }
  const auto before = file_names(dir);
  std::string message;
  try {
    hp::prune::export_onnx_int8(model, dir.string(), hp::core::find_task("mnli_subset"), data,
                                hp::core::make_batches(data, bo), impossible);
  } catch (const hp::InternalError& e) {
    message = e.what();
  }
  INFO(message);
  CHECK_THAT(message, Catch::StartsWith(dir.string() + "/model.int8.onnx: ONNX Runtime's int8 differs from "
                                                       "headprune's int8 (weights ±63) on 64 examples of mnli_subset: "));
  CHECK_THAT(message, Catch::Contains("% the same predictions (need 101%)"));
  CHECK_THAT(message, Catch::EndsWith("; export without --int8 (model.onnx alone), or compare headprune's int8 on "
                                      "your data with `prune eval --precision int8 --calibrate 0`"));
  CHECK(file_names(dir) == before);  // model.int8.onnx, onnx_int8_check.h5 and onnx_int8_logits.h5 all gone
  CHECK(fs::exists(dir / "model.onnx"));
}
