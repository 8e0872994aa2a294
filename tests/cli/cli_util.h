// What the CLI tests share: running the `prune` executable, the fixtures (tests/fixtures.h: the tiny golden
// model and the rest), a tiny data root, and the arguments of a small pruning run on them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fixtures.h"

namespace hp::test {

struct Run {
  int code;
  std::string output;  // stdout + stderr
};

// A shell command with stdout and stderr together.
Run run_command(const std::string& command);

// `prune ARGS` with stdout and stderr together.
Run run_prune(const std::string& args);

// A data root with a small mnli_subset (3 classes, like the tiny model) in words of the tiny vocab.
std::string tiny_data_root();

// Arguments of a small pruning run of the tiny model writing to `out`.
std::string tiny_prune_args(const std::string& out);

// A command that must fail: prune ARGS exits with `code` and prints "error: " and `expect` on one line.
struct ErrorCase {
  std::string args, expect;
  int code;
};

// Runs every case (ARGS + `suffix`): the exit code, the message, no crash, and `written` absent afterwards
// (bad input writes nothing; empty = not checked).
void check_errors(const std::vector<ErrorCase>& cases, const std::string& suffix = "",
                  const std::filesystem::path& written = {});

// tests/report/browser_check.py on the report `page` (screenshots into the scratch folder `shots`); a skip without
// the reference Python, Chromium or websocket-client.
void browser_check(const std::filesystem::path& page, const std::string& shots);

// The whole file as a string ("" if missing).
std::string slurp(const std::filesystem::path& path);

}  // namespace hp::test
