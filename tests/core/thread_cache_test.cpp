// core/kernels/thread_cache.h, the cache of the AMX path's matmul primitives, on any CPU: each thread its own map
// (a map shared between threads would be written by several at once), kept between calls, bounded.
#include "core/kernels/thread_cache.h"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

TEST_CASE("thread_cache: one map per thread, kept between its calls, cleared at its bound", "[core][kernels]") {
  using Cache = std::map<int, int>;
  auto& here = hp::core::thread_cache<int, int>();
  here.clear();
  here[1] = 10;
  CHECK(&hp::core::thread_cache<int, int>() == &here);  // the same thread finds what it made
  CHECK(hp::core::thread_cache<int, int>().at(1) == 10);
  // Four threads fill their own maps at once: each sees exactly its own keys, none of this thread's.
  constexpr int kThreads = 4, kKeys = 300;
  std::vector<const Cache*> maps(kThreads);
  std::vector<std::size_t> sizes(kThreads);
  std::vector<bool> own(kThreads, true);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto& m = hp::core::thread_cache<int, int>();
      maps[t] = &m;
      for (int k = 0; k < kKeys; ++k) m[t * kKeys + k] = t;
      sizes[t] = m.size();
      for (const auto& [key, value] : m) own[t] = own[t] && value == t && key / kKeys == t;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(maps[t] != &here);
    CHECK(sizes[t] == kKeys);
    CHECK(own[t]);
    for (int u = 0; u < t; ++u) CHECK(maps[t] != maps[u]);
  }
  CHECK(here.size() == 1);
  // Bounded: a call that finds kMax entries starts over.
  auto& small = hp::core::thread_cache<int, int, 3>();
  small.clear();
  for (int k = 0; k < 3; ++k) hp::core::thread_cache<int, int, 3>()[k] = k;
  CHECK(small.size() == 3);
  CHECK(hp::core::thread_cache<int, int, 3>().empty());
}
