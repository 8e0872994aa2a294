// Where the tests find their fixtures: each path under the source tree (HP_SOURCE_DIR, defined by
// tests/CMakeLists.txt) is spelled here once. tests/golden/README.md describes the goldens and their models.
#pragma once

#include <unistd.h>  // getpid

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace hp::test {

// The repository root, for its configs/ and tools/.
inline const std::string kSourceDir = HP_SOURCE_DIR;

// tests/data/golden/: the HF goldens (tests/golden/make_*.py) and the random models they come from.
inline const std::string kGoldenDir = kSourceDir + "/tests/data/golden/";
// Random BertForSequenceClassification, 2 layers × 4 heads, 3 labels, max_position_embeddings 64.
inline const std::string kTinyBert = kGoldenDir + "tiny_bert";
inline const std::string kTinyBertH5 = kGoldenDir + "tiny_bert.h5";  // its HF inputs, outputs and gradients
inline const std::string kTinyBertBin = kGoldenDir + "tiny_bert_bin";  // the same weights as pytorch_model.bin
inline const std::string kTinyBertReg = kGoldenDir + "tiny_bert_reg";  // the same encoder, a regression head
inline const std::string kTinyBertL4 = kGoldenDir + "tiny_bert_l4";  // 4 layers, peaked attention
inline const std::string kMiniLMH5 = kGoldenDir + "minilm.h5";  // HF outputs of the real model (kMiniLM)
inline const std::string kAnalysisGoldenDir = kGoldenDir + "analysis/";
inline const std::string kStatsGolden = kGoldenDir + "analysis_stats.json";
inline const std::string kTreeGolden = kGoldenDir + "explain/tree_tiny.json";

// Hand-made inputs: TSV and CoNLL-U for the analysis, tensor files with their sidecars, broken GLUE files.
inline const std::string kAnalysisDataDir = kSourceDir + "/tests/data/analysis/";
inline const std::string kTensorDataDir = kSourceDir + "/tests/data/tensors/";
inline const std::string kBadDataDir = kSourceDir + "/tests/data/bad";

// The real all-MiniLM-L6-v2 that scripts/setup.sh links; tests that need it skip without it.
inline const std::string kMiniLM = kSourceDir + "/checkpoints/all-MiniLM-L6-v2";
// ../shared beside the repository: GLUE and UD English EWT (kSharedData), a BERT WordPiece vocabulary (kSharedVocab).
inline const std::string kSharedData = kSourceDir + "/../shared/data";
inline const std::string kSharedVocab = kSourceDir + "/../shared/vocab";

// A scratch folder for one test's files, inside this build tree (HP_BINARY_DIR/test_tmp/NAME; its parent is
// created): checkouts and builds on one machine never share one, and a cached fixture (a pruning run that
// several tests read) cannot come from another checkout's sources.
// The names in a folder (not its subfolders' contents), sorted: what a test expects a command to leave there.
inline std::vector<std::string> file_names(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto root = std::filesystem::path(HP_BINARY_DIR) / "test_tmp";
  std::filesystem::create_directories(root);
  return root / name;
}

// `bytes` written to `name` in this process's scratch folder scratch_dir(PREFIX_<pid>), made fresh at the first
// write and removed at exit; its path. The tests of the file readers write their inputs with it.
inline std::string scratch_file(const std::string& prefix, const std::string& name, const std::string& bytes) {
  struct Folder {  // made at the first write, removed at exit
    std::filesystem::path dir;
    explicit Folder(const std::string& p) : dir(scratch_dir(p + "_" + std::to_string(::getpid()))) {
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
    }
    ~Folder() { std::filesystem::remove_all(dir); }
  };
  static Folder folder(prefix);
  const std::string path = (folder.dir / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

}  // namespace hp::test
