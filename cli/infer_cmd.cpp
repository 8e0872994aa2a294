// `prune infer`: logits (and optionally last hidden states) for each line of a text file, written to
// HDF5 or JSON. Lines are "text" or "text_a<TAB>text_b". Used for parity checks and by users.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "core/data/batching.h"
#include "core/data/glue.h"  // read_text_lines
#include "core/io/checkpoint.h"
#include "core/kernels/lowp_gemm.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/io/tensor_io.h"
#include "eval/evaluator.h"  // calibrate_int8, dataset_logits, put_rows
#include "cli/commands.h"

namespace hp::cli {
namespace {

// Lines are read as the GLUE reader reads them (BOM, CR, UTF-8: core::read_text_lines).
std::vector<core::Example> read_lines(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path + ": is a folder; --input takes a text file with one example per line");
  if (!std::ifstream(path)) throw InputError(path + ": cannot read the --input file; give a text file with one example per line");
  std::vector<core::Example> out;
  const std::vector<std::string> lines = core::read_text_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty()) continue;
    core::Example ex;
    ex.line = static_cast<int>(i + 1);
    size_t tab = line.find('\t');
    ex.text_a = line.substr(0, tab);
    if (tab != std::string::npos) ex.text_b = line.substr(tab + 1);
    if (ex.text_b.find('\t') != std::string::npos)
      throw InputError(path + ":" + std::to_string(ex.line) +
                       ": more than 2 tab-separated fields; use \"text\" or \"text_a<TAB>text_b\"");
    out.push_back(ex);
  }
  if (out.empty()) throw InputError(path + ": no examples (all lines empty); give one example per line");
  return out;
}

// The output's format from its extension; anything else is refused before the model runs.
bool output_is_json(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") return true;
  if (ext == ".h5" || ext == ".hdf5") return false;
  throw ConfigError("--output " + path + ": infer writes HDF5 (.h5, .hdf5) or JSON (.json), and '" + ext +
                    "' is neither; name the file with one of these extensions");
}

}  // namespace

int run_infer(const core::Config& cfg) {
  if (cfg.infer.input.empty()) throw ConfigError("infer.input is empty; pass --input FILE");
  const std::string out_path = cfg.infer.output.empty() ? cfg.infer.input + ".logits.h5" : cfg.infer.output;
  const bool json = output_is_json(out_path);
  auto examples = read_lines(cfg.infer.input);
  core::LoadReport report;
  core::Bert model = core::load_bert(cfg.model.path, {}, &report);
  if (report.classifier_initialized)
    core::log_warn("infer", cfg.model.path + " has no classifier: logits come from a fresh classifier (seed " +
                                std::to_string(cfg.run.seed) + ")");
  core::check_max_seq_len(model.config(), cfg.data.max_seq_len);
  model.set_precision(core::precision_setting(cfg.run.precision));
  auto tok = core::Tokenizer::from_model_dir(cfg.model.path);
  const int calibrated = eval::calibrate_int8(model, cfg, tok);  // int8: on data.task's train split
  auto data = core::encode_examples(tok, examples, cfg.data.max_seq_len);
  core::BatchOptions bo;
  bo.batch_size = cfg.infer.batch_size;
  bo.pad_id = tok.pad_id();
  auto batches = core::make_batches(data, bo);

  const long N = static_cast<long>(data.size()), D = model.config().hidden_size;
  long S = 0;
  for (const auto& ids : data.ids) S = std::max<long>(S, static_cast<long>(ids.size()));
  const bool tagger = model.config().head == core::Head::kToken;  // logits per token: [N, S, C]
  auto logits = eval::dataset_logits(N, model.config().num_labels, tagger ? S : 0);
  auto hidden = cfg.infer.hidden ? torch::zeros({N, S, D}) : torch::Tensor();
  auto lengths = torch::zeros({N}, torch::kLong);
  torch::NoGradGuard no_grad;
  core::Progress progress("infer", N);
  long done = 0;
  for (const auto& b : batches) {
    auto out = model.forward(core::encoder_input(b));
    auto idx = torch::tensor(b.index, torch::kLong);
    eval::put_rows(logits, out.logits, b.index);
    lengths.index_copy_(0, idx, b.attention_mask.sum(1));
    if (hidden.defined()) hidden.narrow(1, 0, out.last_hidden.size(1)).index_copy_(0, idx, out.last_hidden);
    done += b.input_ids.size(0);
    progress.update(done);
  }
  progress.finish();

  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (long i = 0; i < N; ++i) {
      nlohmann::json e;
      e["line"] = examples[i].line;
      e["input_ids"] = data.ids[i];
      auto row = (tagger ? logits[i].narrow(0, 0, lengths[i].item<long>()) : logits[i]).contiguous();
      const std::vector<float> values(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
      if (tagger) {  // one row of tag logits per token
        const long C = model.config().num_labels;
        std::vector<std::vector<float>> rows;
        for (size_t t = 0; t < values.size(); t += static_cast<size_t>(C))
          rows.emplace_back(values.begin() + static_cast<long>(t), values.begin() + static_cast<long>(t) + C);
        e["logits"] = rows;
      } else {
        e["logits"] = values;
      }
      if (hidden.defined()) {
        auto h = hidden[i].narrow(0, 0, lengths[i].item<long>()).contiguous();
        std::vector<std::vector<float>> rows;
        for (long t = 0; t < h.size(0); ++t) rows.emplace_back(h[t].data_ptr<float>(), h[t].data_ptr<float>() + D);
        e["hidden"] = rows;
      }
      j.push_back(e);
    }
    core::write_file_atomic(out_path, j.dump() + "\n");
  } else {
    core::TensorMap t{{"logits", logits}, {"lengths", lengths}};
    if (hidden.defined()) t["last_hidden"] = hidden;
    core::write_hdf5(out_path, t, {{"model", cfg.model.path}, {"input", cfg.infer.input}, {"precision", cfg.run.precision},
                                 {"calibrated_examples", std::to_string(calibrated)}});
  }
  core::log_info("infer", "wrote " + out_path + " (" + std::to_string(N) + " examples)");
  return 0;
}

}  // namespace hp::cli
