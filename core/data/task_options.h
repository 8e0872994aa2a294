// How a GLUE task loads a model: its label count and class names (core/data/glue.h's task table turned
// into core/io/checkpoint.h's LoadOptions).
#pragma once

#include <cstdint>

#include "core/data/glue.h"
#include "core/io/checkpoint.h"

namespace hp::core {

// num_labels and label_names of `task` (regression: 1 label, no names), and `seed`.
LoadOptions task_load_options(const TaskSpec& task, uint64_t seed);

}  // namespace hp::core
