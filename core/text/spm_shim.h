// The C interface of the SentencePiece shim (core/text/spm_shim.cpp, built as its own shared library
// hp_spm_shim). Debian's libsentencepiece carries and exports its own copy of protobuf, which clashes with the
// protobuf LibTorch loads (each binds the other's symbols: a crash at start-up). So the library is never linked
// into our programs: core/text/sentencepiece_model.cpp loads this shim into a link-map namespace of its own
// (dlmopen), which keeps SentencePiece and its protobuf to themselves. Torch-free, C only across the boundary;
// built without sanitizers in a sanitizer build (the namespace has no sanitizer runtime).
#pragma once

#include <cstddef>

extern "C" {
// A loaded model, or nullptr with the reason in err (NUL-terminated, at most err_len bytes).
void* hp_spm_load(const char* path, char* err, size_t err_len);
void hp_spm_free(void* model);
int hp_spm_piece_size(const void* model);
// Piece `id` copied into buf (NUL-terminated when it fits); returns its length in bytes.
int hp_spm_id_to_piece(const void* model, int id, char* buf, int buf_len);
// The model's ids of text[0, len) as encoded to pieces (Encode(text, &pieces), then PieceToId of each, as
// transformers' slow tokenizers do), written to ids up to `cap`; returns the number of pieces (call again with a
// larger cap when it exceeds cap), or -1 with the reason in err.
int hp_spm_encode(const void* model, const char* text, size_t len, int* ids, int cap, char* err, size_t err_len);
}
