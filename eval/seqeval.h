// Entity-level scores of a tagger as seqeval computes them (github.com/chakki-works/seqeval 1.2.2,
// seqeval.metrics.{precision,recall,f1,accuracy}_score in their default mode: not strict, conlleval-compatible),
// so a BIO tagger's numbers match Hugging Face run_ner.py's. Torch-free.
//
// A chunk is read from each tag's first character (B, I, E, S, O, or another) and its type (the text after the
// first '-' past that character, "_" when there is none), by seqeval's start_of_chunk and end_of_chunk rules:
// an I- after O or after another type starts a chunk, a change of type ends one, and so on. Sentences are read as
// seqeval reads them: joined into one sequence, an "O" after each. The first character is a code point, as in
// Python; an empty tag (seqeval raises) reads as a tag of no known kind.
#pragma once

#include <string>
#include <vector>

namespace hp::eval {

// An entity: its type and first and last positions in a sentence.
struct Entity {
  std::string type;
  int begin = 0, end = 0;
  bool operator==(const Entity& o) const { return type == o.type && begin == o.begin && end == o.end; }
};

// The chunks of one sequence of tags, in order (seqeval's get_entities on a flat list).
std::vector<Entity> entities(const std::vector<std::string>& tags);

// Micro over entity types: precision = exact matches / predicted entities, recall = exact matches / gold entities,
// f1 = 2pr / (p + r), each 0 when its denominator is 0 (seqeval's zero_division "warn"). accuracy: the fraction of
// positions whose tag equals the gold one, 0 when there are none (seqeval raises).
struct EntityScores {
  double precision = 0, recall = 0, f1 = 0, accuracy = 0;
};

// gold[s] and pred[s] are sentence s's tags; InternalError when the sentence counts or lengths differ.
EntityScores entity_scores(const std::vector<std::vector<std::string>>& gold,
                           const std::vector<std::vector<std::string>>& pred);

}  // namespace hp::eval
