// What the torch-free code (prune/run/key_use.cpp) may ask of the criteria by name (prune/heads/criteria.h holds
// the table and the scoring).
#pragma once

#include <string>

namespace hp::prune {

// True when the criterion `name` scores from prune.gates_run's gates; false for any other name, known or not.
bool criterion_reads_gated_run(const std::string& name);

}  // namespace hp::prune
