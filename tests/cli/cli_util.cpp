// What the CLI tests share (see tests/cli/cli_util.h).
#include "cli/cli_util.h"

#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "skip.h"

namespace hp::test {

void browser_check(const std::filesystem::path& page, const std::string& shots) {
  if (!std::filesystem::exists(HP_REF_PYTHON))
    return skip(std::string(HP_REF_PYTHON) + " missing: run scripts/setup.sh for the browser check");
  auto b = run_command(std::string(HP_REF_PYTHON) + " " + kSourceDir + "/tests/report/browser_check.py " +
                       page.string() + " --shots " + scratch_dir(shots).string() + " --expect-slim");
  INFO(b.output);
  if (b.code == kSkipExitCode) return skip("browser check skipped: " + b.output.substr(0, b.output.find('\n')));
  // Its FAIL lines in the assertion itself: Catch prints them first, above the long captured outputs (CI cuts those).
  std::string failed;
  for (size_t at = b.output.find("FAIL: "); at != std::string::npos; at = b.output.find("FAIL: ", at + 1))
    failed += b.output.substr(at, b.output.find('\n', at) - at) + "\n";
  CHECK(failed == "");
  CHECK(b.code == 0);
}

Run run_prune(const std::string& args) { return run_command(std::string(HP_PRUNE_EXE) + " " + args); }

Run run_command(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A data root with a small mnli_subset (3 classes, like the tiny model) in words of the tiny vocab.
std::string tiny_data_root() {
  const auto root = hp::test::scratch_dir("hp_prune_data");
  std::filesystem::create_directories(root / "mnli_subset_textfooler");
  const std::vector<std::string> a = {"the movie was great", "i love this film",    "the actors played badly",
                                      "it is not very fun",  "she hated the story", "we love the old man"};
  const std::vector<std::string> b = {"it was good", "the plot is boring", "he is funny", "they hate it", "no"};
  const std::vector<std::string> labels = {"entailment", "neutral", "contradiction"};
  for (const char* file : {"mnli_matched.tsv", "mnli_mismatched.tsv"}) {
    // Written beside and renamed into place: a test in another process may be reading the file now.
    const auto path = root / "mnli_subset_textfooler" / file;
    const auto tmp = path.string() + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream f(tmp);
      for (int i = 0; i < 30; ++i)
        f << labels[(i * 7 + (file[5] == 'm' ? 1 : 0)) % 3] << "\t" << a[i % a.size()] << " .\t"
          << b[(i * 3) % b.size()] << " !\n";
    }
    std::filesystem::rename(tmp, path);
  }
  return root.string();
}

std::string tiny_prune_args(const std::string& out) {
  return "--model " + kTinyBert + " --task mnli_subset --max-seq-len 32 --data-root " + tiny_data_root() + " --out " +
         out +
         " --set prune.rank_split=matched --set prune.eval_split=mismatched --rank-examples 12 --schedule 0,25,50,75,100"
         " --set prune.attattr_steps=3 --set prune.bootstrap=50 --set prune.latency=false --set eval.batch_size=8"
         " --set prune.rank_batch_size=4";
}

void check_errors(const std::vector<ErrorCase>& cases, const std::string& suffix,
                  const std::filesystem::path& written) {
  for (const auto& c : cases) {
    INFO("prune " << c.args << suffix);
    const auto r = run_prune(c.args + suffix);
    INFO(r.output);
    CHECK(r.code == c.code);
    CHECK_THAT(r.output, Catch::Contains("error: ") && Catch::Contains(c.expect));
    CHECK_THAT(r.output, !Catch::Contains("terminate called") && !Catch::Contains("Segmentation"));
    if (!written.empty()) CHECK(!std::filesystem::exists(written));
  }
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace hp::test
