// Rows held out of a training split so that they are held out in fact, not only by row number.
//
// SST-2's training split is 67,349 phrases cut from 6,885 sentences: of its last 1,000 rows, 892 appear word for
// word inside other training rows, so a slice taken by row number is half trained on. The held-out rows here are
// *whole* rows — rows that no other row of the split contains — taken from the end of the file, and the rest of the
// split loses every row that shares text with them: for one-text tasks, a row that is part of a held-out row or
// contains one (whole words); for pair tasks, a row that shares either sentence. On SST-2 the 1,000 held-out rows are
// then full sentences like the dev split's (19.4 words on average against dev's 19.5; the last 1,000 rows: 9.4), and
// 10,293 phrases of them leave training. Tasks whose rows share no text (MRPC) are split as the row numbers say.
// Torch-free; deterministic (file order only).
#pragma once

#include <cstddef>
#include <vector>

#include "core/data/glue.h"

namespace hp::core {

struct Holdout {
  std::vector<std::size_t> held;  // indices of the held-out rows, in file order
  std::vector<std::size_t> rest;  // the other rows less those that share text with a held-out row, in file order
  std::size_t dropped = 0;  // rows in neither: not held out, but sharing text with a held-out row
};

// The last `n` whole rows of `rows` held out (fewer when the split has fewer whole rows), and the rest.
// Containment is looked for among spans of up to 64 words; longer rows count as whole.
Holdout hold_out(const std::vector<Example>& rows, std::size_t n);

}  // namespace hp::core
