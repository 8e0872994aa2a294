// A tagger's data (token classification): sentences of words with one tag each, read from CoNLL-U
// (core/data/conllu.h), whitespace-column CoNLL or JSON lines as Hugging Face run_ner.py reads them, and the tag
// set they make. Torch-free.
//
// Every file is read as read_text_lines reads it (core/data/glue.h): a UTF-8 BOM and the CR of CRLF dropped,
// trailing empty lines dropped, a byte that is not UTF-8 refused. Errors are one line each, "file:line: what;
// fix" (InputError), or ConfigError for a format or tag-column setting.
#pragma once

#include <string>
#include <vector>

namespace hp::core {

// One sentence: words[i] carries tags[i]. line: the 1-based line where it starts (CoNLL-U: its first token line).
struct TaggedSentence {
  std::vector<std::string> words;
  std::vector<std::string> tags;
  int line = 0;
};

enum class TokenFormat { kConllu, kConll, kJsonl };

// The format `setting` names ("conllu", "conll", "jsonl"), or when it is empty the format of the extension of
// `path` (.conllu; .conll, .txt, .iob, .bio; .jsonl, .json; any case). ConfigError naming data.format otherwise.
TokenFormat token_format(const std::string& path, const std::string& setting);

// Reads `path` as `f`:
//   kConllu  the syntactic words (ranges "3-4", empty nodes "5.1" and comments skipped) and the column
//            `tag_column` names: "upos" (also when empty), "xpos" or "deprel", each as written;
//   kConll   one word per line, its first whitespace-separated column the word and its last the tag; a blank line
//            ends a sentence; a -DOCSTART- line is skipped and ends one too (run_ner.py, conll2003);
//   kJsonl   one object per line with a "tokens" array of strings and a tag array under `tag_column`, or when that
//            is empty "ner_tags", else "tags"; a tag is a string or an integer, kept as its decimal text.
// InputError for an empty file or one without sentences, a CoNLL line of fewer than 2 columns, a CoNLL-U line of
// other than 10 fields (and read_conllu's other checks), invalid JSON, a line that is not an object, a missing
// tokens or tags key, a token that is not a string, a tag that is neither a string nor an integer, tokens and tags
// of different counts, bytes that are not UTF-8. ConfigError for a tag_column the format has not.
std::vector<TaggedSentence> read_tagged(const std::string& path, TokenFormat f, const std::string& tag_column);

// The tag set of the training sentences in id order: sorted (numerically when every tag is an integer, as Python
// sorts run_ner.py's int tags; else by bytes, Python's sorted on str), or `model_id2label` (the model's
// config.json id2label, in id order) when it holds every tag, so that a fine-tuned tagger keeps its ids.
std::vector<std::string> tag_labels(const std::vector<TaggedSentence>& train,
                                    const std::vector<std::string>& model_id2label);

// Whether `labels` is a BIO (IOB2) tag set, so entity metrics apply (eval/seqeval.h): every label is "O" or
// starts with "B-" or "I-", and at least one is not "O".
bool is_bio(const std::vector<std::string>& labels);

}  // namespace hp::core
