// A sentence-transformers folder as sentence-transformers reads it: modules.json lists the modules in order —
// the Transformer (the encoder folder, core/io/checkpoint.h), Pooling (1_Pooling/config.json) and optionally
// Normalize — and sentence_bert_config.json gives the Transformer's max_seq_length. headprune computes the
// embedding of SentenceTransformer(path).encode(texts) from these (core/model/pooling.h); a module it does not
// compute (Dense, a second Transformer, ...) is refused, naming it. Torch-free: the fuzz target reads it too.
#pragma once

#include <string>
#include <vector>

#include "core/model/pooling_mode.h"

namespace hp::core {

struct SentenceModel {
  std::string dir;  // the folder
  std::string transformer_dir;  // the Transformer module's folder (dir itself when its path is "")
  std::string pooling_file;  // the Pooling module's config.json
  int max_seq_length = 0;  // sentence_bert_config.json; 0 when the file or the key is absent
  bool do_lower_case = false;  // sentence_bert_config.json: the texts lowered before tokenizing
  // config_sentence_transformers.json: prompts[default_prompt_name], put before every text as encode() puts it when
  // no prompt is given; empty when the folder names none.
  std::string prompt;
  SentencePooling pooling;
  bool normalize = false;  // a Normalize module follows: unit L2 norm
  // The embedding's width: the pooled modes times the dimension.
  int embedding_width() const { return static_cast<int>(pooling.modes.size()) * pooling.dimension; }
};

// One entry of modules.json: its type's last name ("Transformer", "Pooling", "Normalize", ...) and its folder.
struct SentenceModule {
  std::string type;  // "sentence_transformers.models.Pooling" -> "Pooling"
  std::string path;  // relative to the model folder; "" = the folder itself
};

// Whether `dir` holds a modules.json (a sentence-transformers folder).
bool is_sentence_model(const std::string& dir);

// Reads modules.json, the pooling config and sentence_bert_config.json of `dir`. InputError naming the file and key
// and what to do: a missing or malformed file, a module type headprune does not compute, a path leaving the folder,
// no pooling mode, modules out of order.
SentenceModel read_sentence_model(const std::string& dir);

// The sentence-transformers files of an export of `src` into `dir`, whose config.json and weights hold its encoder,
// maybe slimmed to hidden size `width`: modules.json (the Transformer at the folder itself, Pooling in 1_Pooling,
// Normalize in 2_Normalize when `src` lists it), 1_Pooling/config.json (src's settings, word_embedding_dimension =
// width), and sentence_bert_config.json and config_sentence_transformers.json as `src` holds them.
// SentenceTransformer(dir) loads the folder (a slimmed encoder with trust_remote_code=True, as transformers does).
void write_sentence_model_files(const SentenceModel& src, int width, const std::string& dir);

// The files and folders write_sentence_model_files writes, by name.
bool is_sentence_model_file(const std::string& name);

// The parsers of the three files, from their text; `where` names the file in errors (the fuzz target calls these).
std::vector<SentenceModule> parse_modules_json(const std::string& text, const std::string& where);
SentencePooling parse_pooling_config(const std::string& text, const std::string& where);
int parse_max_seq_length(const std::string& text, const std::string& where);  // sentence_bert_config.json
bool parse_do_lower_case(const std::string& text, const std::string& where);  // its do_lower_case; false if absent
// config_sentence_transformers.json's default prompt: prompts[default_prompt_name], "" when default_prompt_name is
// absent or null. InputError when it names no prompt (sentence-transformers refuses the folder too) or a prompt is
// not a string.
std::string parse_default_prompt(const std::string& text, const std::string& where);

}  // namespace hp::core
