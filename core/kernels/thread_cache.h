// Values a thread made by key and keeps for its later calls (oneDNN primitives by shape): one map per thread, never
// shared, so no lock; cleared once it holds kMax entries (keys such as a batch's row count vary without end).
#pragma once

#include <cstddef>
#include <map>

namespace hp::core {

template <class Key, class Value, std::size_t kMax = 512>
std::map<Key, Value>& thread_cache() {
  thread_local std::map<Key, Value> made;
  if (made.size() >= kMax) made.clear();
  return made;
}

}  // namespace hp::core
