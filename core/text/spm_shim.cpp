// The SentencePiece shim (see core/text/spm_shim.h): the only code linked with libsentencepiece.
#include "core/text/spm_shim.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

void set_error(char* err, size_t err_len, const std::string& what) {
  if (err_len == 0) return;
  std::strncpy(err, what.c_str(), err_len - 1);
  err[err_len - 1] = '\0';
}

}  // namespace

extern "C" {

void* hp_spm_load(const char* path, char* err, size_t err_len) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto status = sp->Load(path);
  if (status.ok()) return sp;
  set_error(err, err_len, status.ToString());
  delete sp;
  return nullptr;
}

void hp_spm_free(void* model) { delete static_cast<sentencepiece::SentencePieceProcessor*>(model); }

int hp_spm_piece_size(const void* model) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(model)->GetPieceSize();
}

int hp_spm_id_to_piece(const void* model, int id, char* buf, int buf_len) {
  const std::string& piece = static_cast<const sentencepiece::SentencePieceProcessor*>(model)->IdToPiece(id);
  const int n = static_cast<int>(piece.size());
  if (n < buf_len) std::memcpy(buf, piece.c_str(), piece.size() + 1);
  return n;
}

int hp_spm_encode(const void* model, const char* text, size_t len, int* ids, int cap, char* err, size_t err_len) {
  const auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(model);
  std::vector<std::string> pieces;
  const auto status = sp->Encode(std::string_view(text, len), &pieces);
  if (!status.ok()) {
    set_error(err, err_len, status.ToString());
    return -1;
  }
  for (size_t i = 0; i < pieces.size() && static_cast<int>(i) < cap; ++i) ids[i] = sp->PieceToId(pieces[i]);
  return static_cast<int>(pieces.size());
}

}  // extern "C"
