// Load options of a task (see core/data/task_options.h).
#include "core/data/task_options.h"

namespace hp::core {

LoadOptions task_load_options(const TaskSpec& task, uint64_t seed) {
  LoadOptions o;
  o.num_labels = task.num_labels();
  o.seed = seed;
  o.head = task.head;
  if (!task.is_regression())
    for (int i = 0; i < task.num_labels(); ++i) o.label_names.push_back(task.label_name(i));
  return o;
}

}  // namespace hp::core
