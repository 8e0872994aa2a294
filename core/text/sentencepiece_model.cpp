// SentencePiece (XLM-R) through the SentencePiece library itself (Debian libsentencepiece-dev), with the ids of
// HF's slow XLMRobertaTokenizer: the fairseq dictionary puts <s>=0 <pad>=1 </s>=2 <unk>=3 first, so a model
// piece k > 0 is k+1 (fairseq_offset 1), the model's <unk> (k = 0) is 3, and <mask> is pieces+1.
// Text is split on the added tokens first (Tokenizer::tokenize_ids), then each part is encoded to pieces
// (sp_model.encode(text, out_type=str)) and each piece mapped to its id, as _tokenize + _convert_token_to_id do.
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "core/base/errors.h"  // InputError
#include "core/text/spm_shim.h"
#include "core/text/token_model.h"
#include "core/text/tokenizer.h"

namespace hp::core {
namespace text {
namespace {

constexpr int32_t kFairseqOffset = 1;
constexpr int32_t kFairseqUnk = 3;
// fairseq's dictionary head, ids 0..3 (XLMRobertaTokenizer.fairseq_tokens_to_ids).
const char* const kFairseqTokens[] = {"<s>", "<pad>", "</s>", "<unk>"};

// Where the shim is: $HP_SPM_SHIM; else installed beside the program (<bin>/../lib, cmake --install); else where
// the build made it (HP_SPM_SHIM_PATH).
std::string shim_path() {
  const char* env = std::getenv("HP_SPM_SHIM");
  if (env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "lib" / "libhp_spm_shim.so";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return HP_SPM_SHIM_PATH;
}

// The shim's functions (core/text/spm_shim.h), from the shared library loaded once into a link-map namespace of
// its own (dlmopen LM_ID_NEWLM): SentencePiece, its protobuf and their C++ runtime bind only to each other, never
// to LibTorch's protobuf. (RTLD_LOCAL | RTLD_DEEPBIND did the same until ASan, which refuses DEEPBIND, was run over
// the tokenizer tests: google/sanitizers#611.) Nothing allocated on one side is freed on the other.
struct SpmApi {
  decltype(&hp_spm_load) load;
  decltype(&hp_spm_free) free;
  decltype(&hp_spm_piece_size) piece_size;
  decltype(&hp_spm_id_to_piece) id_to_piece;
  decltype(&hp_spm_encode) encode;
};

const SpmApi& spm_api() {
  static const SpmApi api = [] {
    const std::string path = shim_path();
    void* lib = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      throw InputError(path + ": cannot load the SentencePiece shim (" + std::string(dlerror()) +
                       "); rebuild headprune (it builds hp_spm_shim) with libsentencepiece-dev installed, or point "
                       "HP_SPM_SHIM at the library");
    auto sym = [&](const char* name) {
      void* f = dlsym(lib, name);
      if (!f) throw InputError(path + ": has no " + std::string(name) + "; rebuild headprune");
      return f;
    };
    return SpmApi{reinterpret_cast<decltype(&hp_spm_load)>(sym("hp_spm_load")),
                  reinterpret_cast<decltype(&hp_spm_free)>(sym("hp_spm_free")),
                  reinterpret_cast<decltype(&hp_spm_piece_size)>(sym("hp_spm_piece_size")),
                  reinterpret_cast<decltype(&hp_spm_id_to_piece)>(sym("hp_spm_id_to_piece")),
                  reinterpret_cast<decltype(&hp_spm_encode)>(sym("hp_spm_encode"))};
  }();
  return api;
}

using SpmHandle = std::shared_ptr<void>;

std::string id_to_piece(const SpmHandle& sp, int id) {
  std::string piece(64, '\0');
  int n = spm_api().id_to_piece(sp.get(), id, piece.data(), static_cast<int>(piece.size()));
  if (n >= static_cast<int>(piece.size())) {
    piece.assign(static_cast<size_t>(n) + 1, '\0');
    spm_api().id_to_piece(sp.get(), id, piece.data(), n + 1);
  }
  piece.resize(static_cast<size_t>(n));
  return piece;
}

class SentencePieceModel : public TokenModel {
 public:
  SentencePieceModel(SpmHandle sp, std::string path) : sp_(std::move(sp)), path_(std::move(path)) {}
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    std::vector<int> pieces(text.size() + 16);
    char err[512] = "";
    int n = spm_api().encode(sp_.get(), text.data(), text.size(), pieces.data(), static_cast<int>(pieces.size()), err,
                             sizeof err);
    if (n > static_cast<int>(pieces.size())) {
      pieces.resize(static_cast<size_t>(n));
      n = spm_api().encode(sp_.get(), text.data(), text.size(), pieces.data(), n, err, sizeof err);
    }
    if (n < 0) throw InputError(path_ + ": SentencePiece cannot encode the text (" + std::string(err) + ")");
    for (int i = 0; i < n; ++i) ids.push_back(pieces[i] > 0 ? pieces[i] + kFairseqOffset : kFairseqUnk);
  }

 private:
  SpmHandle sp_;
  std::string path_;
};

}  // namespace
}  // namespace text

Tokenizer Tokenizer::from_sentencepiece(const std::string& model_file, const std::vector<AddedToken>& added) {
  const auto& api = text::spm_api();
  char err[512] = "";
  text::SpmHandle sp(api.load(model_file.c_str(), err, sizeof err), api.free);
  if (!sp) {
    // The library's parse failure names its own source line; say what it means instead.
    const std::string why = std::string(err).find("ParseFromArray") != std::string::npos
                                ? "the file is not a SentencePiece model protobuf"
                                : std::string(err);
    throw InputError(model_file + ": cannot load the SentencePiece model (" + why +
                     "); use the sentencepiece.bpe.model saved with the model (XLMRobertaTokenizer.save_pretrained)");
  }
  const int pieces = api.piece_size(sp.get());
  if (pieces < 3)
    throw InputError(model_file + ": SentencePiece model of " + std::to_string(pieces) +
                     " pieces, too few for XLM-R's ids (<unk>, <s>, </s> and more); use the model's own file");
  // ids: the fairseq head 0..3, pieces 3..size-1 at k+1, <mask> last (HF's _convert_id_to_token).
  auto vocab = std::make_shared<text::Vocab>();
  vocab->id_to_token.resize(static_cast<size_t>(pieces) + 2);
  for (int32_t id = 0; id < 4; ++id) vocab->id_to_token[static_cast<size_t>(id)] = text::kFairseqTokens[id];
  for (int k = 3; k < pieces; ++k) vocab->id_to_token[static_cast<size_t>(k + 1)] = text::id_to_piece(sp, k);
  vocab->id_to_token.back() = "<mask>";
  // find(): the fairseq names first, then the pieces (the first id wins a repeated name).
  for (size_t id = 0; id < vocab->id_to_token.size(); ++id)
    vocab->token_to_id.emplace(vocab->id_to_token[id], static_cast<int32_t>(id));
  Tokenizer tok;
  tok.kind_ = TokenizerKind::kSentencePiece;
  tok.set_specials(added, *vocab, model_file);
  tok.model_ = std::make_shared<text::SentencePieceModel>(std::move(sp), model_file);
  tok.vocab_ = std::move(vocab);
  return tok;
}

}  // namespace hp::core
