// eval/seqeval against cases counted by hand from seqeval's chunk rules (sequence_labeling.py start_of_chunk and
// end_of_chunk) and the examples of its README and docstrings, whose printed values are quoted beside them.
// tests/core/token_reference.py compares the same scores with the seqeval package on random sequences.
#include "eval/seqeval.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/base/errors.h"  // InternalError

using hp::eval::entities;
using hp::eval::Entity;
using hp::eval::entity_scores;
using hp::eval::EntityScores;
using Tags = std::vector<std::string>;
using Sentences = std::vector<Tags>;
using Entities = std::vector<Entity>;

namespace Catch {
template <>
struct StringMaker<Entity> {
  static std::string convert(const Entity& e) {
    return "(" + e.type + ", " + std::to_string(e.begin) + ", " + std::to_string(e.end) + ")";
  }
};
}  // namespace Catch

namespace {
// A few divisions of small counts: exact up to one rounding each.
constexpr double kTol = 1e-15;

void check_scores(const EntityScores& got, double p, double r, double f1, double acc) {
  CHECK(got.precision == Approx(p).margin(kTol));
  CHECK(got.recall == Approx(r).margin(kTol));
  CHECK(got.f1 == Approx(f1).margin(kTol));
  CHECK(got.accuracy == Approx(acc).margin(kTol));
}
}  // namespace

TEST_CASE("seqeval: get_entities' docstring example", "[eval][seqeval]") {
  // get_entities(['B-PER', 'I-PER', 'O', 'B-LOC']) -> [('PER', 0, 1), ('LOC', 3, 3)]
  CHECK(entities({"B-PER", "I-PER", "O", "B-LOC"}) == Entities{{"PER", 0, 1}, {"LOC", 3, 3}});
}

TEST_CASE("seqeval: chunk rules in the default (conlleval) mode", "[eval][seqeval]") {
  // An I- after O, or at the start, begins a chunk.
  CHECK(entities({"I-PER", "I-PER", "O", "I-LOC"}) == Entities{{"PER", 0, 1}, {"LOC", 3, 3}});
  // A change of type ends a chunk and starts another, B- or I- alike.
  CHECK(entities({"B-PER", "I-LOC", "I-LOC", "B-ORG"}) == Entities{{"PER", 0, 0}, {"LOC", 1, 2}, {"ORG", 3, 3}});
  // B- after B- or I- of the same type: a new chunk.
  CHECK(entities({"B-PER", "B-PER", "I-PER", "B-PER"}) == Entities{{"PER", 0, 0}, {"PER", 1, 2}, {"PER", 3, 3}});
  // The last chunk closes at the end.
  CHECK(entities({"O", "B-MISC", "I-MISC"}) == Entities{{"MISC", 1, 2}});
  CHECK(entities({}).empty());
  CHECK(entities({"O", "O"}).empty());
  // IOBES: E- and S- end a chunk; I- after E- or S- starts one; E- after O starts one.
  CHECK(entities({"S-PER", "B-LOC", "E-LOC", "I-LOC", "O", "E-ORG"}) ==
        Entities{{"PER", 0, 0}, {"LOC", 1, 2}, {"LOC", 3, 3}, {"ORG", 5, 5}});
  // Bare "I" and "E" after O: both types are "_", so only the rules "O then I" and "O then E" start their chunks.
  CHECK(entities({"O", "I", "I", "O", "E"}) == Entities{{"_", 1, 2}, {"_", 4, 4}});
  // The type is the text after the first '-' past the first character; a bare "B" has the type "_".
  CHECK(entities({"B-I-X", "I-I-X", "B", "I"}) == Entities{{"I-X", 0, 1}, {"_", 2, 3}});
  // A tag of no known kind with a type is a chunk of its own ("PER": kind 'P', type "ER").
  CHECK(entities({"PER", "PER", "O"}) == Entities{{"ER", 0, 1}});
  // '.' starts no chunk and ends none at a type change after it; the I- after it starts one, the next '.' ends it.
  CHECK(entities({".", "I-A", "."}) == Entities{{"A", 1, 1}});
  // The first character is a code point: "ÉX" has the type "X", as chunk[1:] gives in Python.
  CHECK(entities({"\xC3\x89X", "O"}) == Entities{{"X", 0, 0}});
}

TEST_CASE("seqeval: sentences are joined by an O, as seqeval flattens them", "[eval][seqeval]") {
  // After the joining "O" the type is "_": a bare "X" (type "_") then starts no chunk and the next chunk ends
  // from the stale start 0, which a sentence read alone would not give. Counted by hand over
  // [B-A, O, X, B-A, O, O]: (A,0,0), (_,0,2), (A,3,3).
  CHECK(entities({"B-A", "O", "X", "B-A", "O"}) == Entities{{"A", 0, 0}, {"_", 0, 2}, {"A", 3, 3}});
  CHECK(entities({"X", "B-A"}) == Entities{{"_", 0, 0}, {"A", 1, 1}});
  // gold has (A,0,0), (A,3,3) and the stale (_,0,2); the prediction of X as O has only the two A chunks.
  check_scores(entity_scores({{"B-A"}, {"X", "B-A"}}, {{"B-A"}, {"O", "B-A"}}), 1.0, 2.0 / 3.0, 0.8, 2.0 / 3.0);
  // An I- at a sentence's start begins a chunk even when the sentence before ended inside one of the same type.
  check_scores(entity_scores({{"B-A", "I-A"}, {"I-A"}}, {{"B-A", "I-A"}, {"B-A"}}), 1.0, 1.0, 1.0, 2.0 / 3.0);
}

TEST_CASE("seqeval: the README's and docstrings' scores", "[eval][seqeval]") {
  // README: f1_score 0.50, accuracy_score 0.80; classification_report: MISC 0/0/0, PER 1/1/1, micro avg 0.50.
  const Sentences gold = {{"O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  const Sentences pred = {{"O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  check_scores(entity_scores(gold, pred), 0.5, 0.5, 0.5, 0.8);
  // f1_score's docstring: average='micro' -> 0.6666666666666666 (2 of 3 entities either way).
  const Sentences gold2 = {{"O", "O", "B-MISC", "I-MISC", "B-MISC", "O", "O"}, {"B-PER", "I-PER", "O"}};
  const Sentences pred2 = {{"O", "O", "B-MISC", "I-MISC", "B-MISC", "I-MISC", "O"}, {"B-PER", "I-PER", "O"}};
  const EntityScores s2 = entity_scores(gold2, pred2);
  CHECK(s2.f1 == 0.6666666666666666);
  check_scores(s2, 2.0 / 3.0, 2.0 / 3.0, 2.0 / 3.0, 0.9);
  // README, default against strict mode: [B-NP, I-NP, O] predicted [I-NP, I-NP, O] is 1.00 by default (the I-
  // after O starts the chunk); strict IOB2 would give 0.
  check_scores(entity_scores({{"B-NP", "I-NP", "O"}}, {{"I-NP", "I-NP", "O"}}), 1.0, 1.0, 1.0, 2.0 / 3.0);
}

TEST_CASE("seqeval: uneven precision and recall, and the zero cases", "[eval][seqeval]") {
  // gold: PER(0,1), LOC(3,3), ORG(5,5); pred: PER(0,1), LOC(3,4), ORG(5,5), MISC(7,7) -> tp 2, 4 predicted, 3 true.
  const Sentences gold = {{"B-PER", "I-PER", "O", "B-LOC", "O"}, {"B-ORG", "O", "O"}};
  const Sentences pred = {{"B-PER", "I-PER", "O", "B-LOC", "I-LOC"}, {"B-ORG", "O", "B-MISC"}};
  const double p = 2.0 / 4.0, r = 2.0 / 3.0;
  check_scores(entity_scores(gold, pred), p, r, 2 * p * r / (p + r), 6.0 / 8.0);
  // No entity anywhere: every score 0 (seqeval's zero_division "warn"), the tags all right.
  check_scores(entity_scores({{"O", "O"}}, {{"O", "O"}}), 0, 0, 0, 1.0);
  // Entities predicted, none true: precision 0 of 1, recall undefined -> 0.
  check_scores(entity_scores({{"O"}}, {{"B-X"}}), 0, 0, 0, 0);
  check_scores(entity_scores({}, {}), 0, 0, 0, 0);
  check_scores(entity_scores({{}, {"O"}}, {{}, {"O"}}), 0, 0, 0, 1.0);
}

TEST_CASE("seqeval: sentences of different counts or lengths are a bug", "[eval][seqeval]") {
  REQUIRE_THROWS_AS(entity_scores({{"O"}}, {}), hp::InternalError);
  REQUIRE_THROWS_AS(entity_scores({{"O", "O"}}, {{"O"}}), hp::InternalError);
}
