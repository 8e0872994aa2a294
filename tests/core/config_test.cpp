// Config binding: YAML, --set, dump → load round trip, unknown keys with suggestions, type errors
// with file:line:col, and validate().
#include <catch2/catch.hpp>

#include <fstream>
#include <unistd.h>  // getpid

#include "core/base/config.h"
#include "core/base/errors.h"

using Catch::Contains;

namespace {
std::string write_tmp(const std::string& name, const std::string& text) {
  std::string path = "/tmp/hp_cfg_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("YAML and --set fill the typed structs", "[core][config]") {
  hp::core::Config cfg;
  hp::core::load_yaml(cfg, write_tmp("ok.yaml", "data:\n  task: mrpc\n  max_seq_len: 64\neval:\n  batch_size: 8\n"));
  CHECK(cfg.data.task == "mrpc");
  CHECK(cfg.data.max_seq_len == 64);
  CHECK(cfg.eval.batch_size == 8);
  hp::core::apply_set(cfg, "eval.batch_size=16");
  CHECK(cfg.eval.batch_size == 16);
  CHECK(cfg.run.seed == 42);  // untouched default
}

TEST_CASE("dump_yaml then load_yaml gives the same config", "[core][config]") {
  hp::core::Config a;
  a.data.task = "stsb";
  a.run.seed = 7;
  a.eval.mask = "1:2,3";
  a.infer.hidden = true;
  hp::core::Config b;
  hp::core::load_yaml(b, write_tmp("dump.yaml", hp::core::dump_yaml(a)));
  CHECK(hp::core::dump_yaml(a) == hp::core::dump_yaml(b));
  CHECK(b.eval.mask == "1:2,3");
  CHECK(b.infer.hidden);
}

TEST_CASE("config errors name the key, the place and the fix", "[core][config][bad]") {
  hp::core::Config cfg;
  REQUIRE_THROWS_WITH(hp::core::load_yaml(cfg, write_tmp("typo.yaml", "eval:\n  batch_sise: 8\n")),
                      Contains(":2:3: unknown key 'eval.batch_sise'; did you mean 'eval.batch_size'?"));
  REQUIRE_THROWS_WITH(hp::core::load_yaml(cfg, write_tmp("type.yaml", "data:\n  max_seq_len: long\n")),
                      Contains("type.yaml:2:16: data.max_seq_len: expected an integer, got 'long'"));
  REQUIRE_THROWS_WITH(hp::core::load_yaml(cfg, "/nonexistent.yaml"), Contains("cannot open config file"));
  REQUIRE_THROWS_WITH(hp::core::apply_set(cfg, "eval.batch"), Contains("expected key=value"));
  REQUIRE_THROWS_WITH(hp::core::apply_set(cfg, "eval.bach_size=3"), Contains("did you mean 'eval.batch_size'"));
  cfg.eval.batch_size = 0;
  REQUIRE_THROWS_WITH(hp::core::validate(cfg), Contains("eval.batch_size = 0"));
  REQUIRE_THROWS_AS(hp::core::validate(cfg), hp::ConfigError);
}

TEST_CASE("config_doc lists every key once", "[core][config]") {
  std::string doc = hp::core::config_doc();
  hp::core::Config cfg;
  for (const auto& f : hp::core::config_fields(cfg)) {
    INFO(f.path);
    CHECK(doc.find("`" + f.path + "`") != std::string::npos);
  }
}
