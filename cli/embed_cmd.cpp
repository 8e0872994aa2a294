// `prune embed`: sentence embeddings of each line of a text file with a sentence-transformers folder (the original
// or a headprune export), as SentenceTransformer(folder).encode(lines) computes them (eval/embedding.h), written as
// HDF5, NumPy .npy or JSON lines.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/base/errors.h"
#include "core/base/files.h"
#include "core/base/log.h"
#include "core/data/glue.h"  // read_text_lines
#include "core/io/tensor_io.h"
#include "eval/embedding.h"
#include "eval/evaluator.h"  // calibrate_int8

namespace hp::cli {
namespace {

enum class Format { kHdf5, kNpy, kJsonl };

// The output's format from its extension; anything else is refused before the model runs.
Format output_format(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".h5" || ext == ".hdf5") return Format::kHdf5;
  if (ext == ".npy") return Format::kNpy;
  if (ext == ".jsonl") return Format::kJsonl;
  throw ConfigError("--output " + path + ": embed writes HDF5 (.h5, .hdf5), NumPy (.npy) or JSON lines (.jsonl), and '" +
                    ext + "' is none of these; name the file with one of these extensions");
}

// The non-empty lines (read as the GLUE reader reads them: BOM, CR, UTF-8) and their line numbers.
void read_sentences(const std::string& path, std::vector<std::string>& texts, std::vector<long>& lines) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path + ": is a folder; --input takes a text file with one sentence per line");
  const std::vector<std::string> all = core::read_text_lines(path);
  for (size_t i = 0; i < all.size(); ++i)
    if (!all[i].empty()) texts.push_back(all[i]), lines.push_back(static_cast<long>(i + 1));
  if (texts.empty()) throw InputError(path + ": no sentences (all lines empty); give one sentence per line");
}

// NumPy's .npy format 1.0: the magic, a header dict padded to a multiple of 64 bytes, then little-endian float32
// rows (numpy.load reads it; x86 is little-endian).
std::string npy_bytes(const torch::Tensor& t) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(t.size(0)) + ", " +
                       std::to_string(t.size(1)) + "), }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01', out += '\x00';
  out += static_cast<char>(header.size() & 0xff), out += static_cast<char>(header.size() >> 8);
  out += header;
  const auto c = t.to(torch::kFloat).contiguous();
  out.append(reinterpret_cast<const char*>(c.data_ptr<float>()), static_cast<size_t>(c.numel()) * sizeof(float));
  return out;
}

std::string jsonl_text(const torch::Tensor& t, const std::vector<long>& lines) {
  std::string out;
  const auto c = t.to(torch::kFloat).contiguous();
  for (long i = 0; i < c.size(0); ++i) {
    const float* row = c.data_ptr<float>() + i * c.size(1);
    out += nlohmann::json{{"line", lines[static_cast<size_t>(i)]}, {"embedding", std::vector<float>(row, row + c.size(1))}}
               .dump() +
           "\n";
  }
  return out;
}

}  // namespace

int run_embed(const core::Config& cfg) {
  if (cfg.embed.input.empty()) throw ConfigError("embed.input is empty; pass --input FILE (one sentence per line)");
  if (cfg.embed.batch_size < 1) throw ConfigError("embed.batch_size = " + std::to_string(cfg.embed.batch_size) + "; use 1 or more");
  if (cfg.embed.max_seq_len < 0)
    throw ConfigError("embed.max_seq_len = " + std::to_string(cfg.embed.max_seq_len) +
                      "; use 0 (the folder's max_seq_length) or a number of tokens");
  const std::string out = cfg.embed.output.empty() ? cfg.embed.input + ".embeddings.h5" : cfg.embed.output;
  std::error_code ec;
  if (std::filesystem::weakly_canonical(out, ec) == std::filesystem::weakly_canonical(cfg.embed.input, ec) ||
      std::filesystem::equivalent(out, cfg.embed.input, ec))
    throw ConfigError("--output " + out + " is the --input file: writing the embeddings would replace the sentences; "
                      "pass another --output, e.g. " + cfg.embed.input + ".embeddings.h5");
  const Format format = output_format(out);
  std::vector<std::string> texts;
  std::vector<long> lines;
  read_sentences(cfg.embed.input, texts, lines);
  auto enc = eval::load_sentence_encoder(cfg.model.path);
  enc.model.set_precision(core::precision_setting(cfg.run.precision));
  const int calibrated = eval::calibrate_int8(enc.model, cfg, enc.tokenizer);  // int8: on data.task's train split
  const int length = eval::embedding_length(enc, cfg.embed.max_seq_len);
  core::log_info("embed", std::to_string(texts.size()) + " sentences, up to " + std::to_string(length) +
                              " tokens each; pooling " + core::pooling_mode_name(enc.layout.pooling.modes.front()) +
                              (enc.layout.pooling.modes.size() > 1 ? " and more" : "") +
                              (enc.layout.normalize ? ", normalized" : "") + ", " + cfg.run.precision);
  const auto e = eval::embed_texts(enc, texts, cfg.embed.batch_size, cfg.embed.max_seq_len, true);
  switch (format) {
    case Format::kHdf5:
      core::write_hdf5(out, {{"embeddings", e}, {"lines", torch::tensor(lines, torch::kLong)}},
                       {{"model", cfg.model.path}, {"input", cfg.embed.input}, {"precision", cfg.run.precision},
                        {"calibrated_examples", std::to_string(calibrated)}, {"max_seq_len", std::to_string(length)}});
      break;
    case Format::kNpy: core::write_file_atomic(out, npy_bytes(e)); break;
    case Format::kJsonl: core::write_file_atomic(out, jsonl_text(e, lines)); break;
  }
  core::log_info("embed", "wrote " + out + " (" + std::to_string(e.size(0)) + " x " + std::to_string(e.size(1)) + ")");
  return 0;
}

}  // namespace hp::cli
