// The measured dispatch (core/kernels/dispatch_probe.h) with a fake timer, so that no outcome depends on this CPU:
// the faster side taken either way, nothing timed where the CPU has no bf16 side, the cached choice reused under its
// key and probed again under another, the warning for a bf16 precision measured slower, train.precision: auto.
#include "core/kernels/dispatch_probe.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "fixtures.h"

using hp::core::ProbeKernel;

namespace {

// A timer whose answers are given per kernel, counting its calls.
struct FakeTimer {
  std::map<ProbeKernel, double> ms;
  int calls = 0;
  hp::core::ProbeTimer timer() {
    return [this](ProbeKernel k) {
      ++calls;
      return ms.at(k);
    };
  }
};

const hp::core::ProbeCandidates kBoth{true, true, false};  // the attention products and the matmul

}  // namespace

TEST_CASE("the probe takes the faster side of each choice, bf16 or fp32", "[core][dispatch]") {
  FakeTimer slow_bf16{{{ProbeKernel::kAttentionFp32, 1.0}, {ProbeKernel::kAttentionBf16, 1.6},
                       {ProbeKernel::kMatmulFp32, 373}, {ProbeKernel::kMatmulBf16, 656}}};
  const auto a = hp::core::probe_dispatch("k", kBoth, slow_bf16.timer());
  CHECK(slow_bf16.calls == 4 * hp::core::kProbeRounds);  // fp32 and bf16 in turn, per choice
  CHECK(!a.attention_bf16());
  CHECK(!a.matmul_bf16());
  CHECK(a.attention.fp32_ms == 1.0);
  CHECK(a.matmul.bf16_ms == 656);
  FakeTimer fast_bf16{{{ProbeKernel::kAttentionFp32, 1.0}, {ProbeKernel::kAttentionBf16, 0.7},
                       {ProbeKernel::kMatmulFp32, 373}, {ProbeKernel::kMatmulBf16, 236}}};
  const auto b = hp::core::probe_dispatch("k", kBoth, fast_bf16.timer());
  CHECK(b.attention_bf16());
  CHECK(b.matmul_bf16());
  // One faster, the other slower: each choice its own.
  FakeTimer mixed{{{ProbeKernel::kAttentionFp32, 1.0}, {ProbeKernel::kAttentionBf16, 0.7},
                   {ProbeKernel::kMatmulFp32, 373}, {ProbeKernel::kMatmulBf16, 656}}};
  const auto c = hp::core::probe_dispatch("k", kBoth, mixed.timer());
  CHECK(c.attention_bf16());
  CHECK(!c.matmul_bf16());
  // Within the margin (bf16 3% faster): fp32 stays.
  FakeTimer close{{{ProbeKernel::kAttentionFp32, 1.0}, {ProbeKernel::kAttentionBf16, 0.97},
                   {ProbeKernel::kMatmulFp32, 373}, {ProbeKernel::kMatmulBf16, 362}}};
  const auto e = hp::core::probe_dispatch("k", kBoth, close.timer());
  CHECK(!e.attention_bf16());
  CHECK(!e.matmul_bf16());
  // Each side's fastest round is kept: a slow round (a passing load) does not decide.
  int call = 0;
  const auto f = hp::core::probe_dispatch("k", {true, false}, [&](ProbeKernel k) {
    ++call;
    const bool first_round = call <= 2;
    return k == ProbeKernel::kAttentionBf16 ? (first_round ? 5.0 : 0.7) : 1.0;
  });
  CHECK(f.attention.bf16_ms == 0.7);
  CHECK(f.attention_bf16());
  CHECK(!f.matmul.measured());
  // A CPU without the bf16 side: nothing timed, nothing chosen but fp32.
  FakeTimer none{{}};
  const auto d = hp::core::probe_dispatch("k", hp::core::ProbeCandidates{}, none.timer());
  CHECK(none.calls == 0);
  CHECK(!d.attention.measured());
  CHECK(!d.attention_bf16());
  CHECK(!d.matmul_bf16());
  CHECK_THAT(hp::core::dispatch_summary(d), Catch::Contains("nothing to measure"));
  CHECK_THAT(hp::core::dispatch_summary(c), Catch::Contains("attention products bf16 0.7 ms vs fp32 1 ms: bf16") &&
                                                Catch::Contains("matmul bf16 656 ms vs fp32 373 ms: fp32"));
}

TEST_CASE("the probe's choice is cached under the machine key and probed again under another", "[core][dispatch]") {
  const auto dir = hp::test::scratch_dir("hp_dispatch_cache");
  std::filesystem::remove_all(dir);
  const std::string file = (dir / "sub" / "dispatch.json").string();  // its folder made on the way
  FakeTimer t{{{ProbeKernel::kAttentionFp32, 1.0}, {ProbeKernel::kAttentionBf16, 1.6},
               {ProbeKernel::kMatmulFp32, 373}, {ProbeKernel::kMatmulBf16, 656}}};
  bool probed = false;
  const auto first = hp::core::cached_dispatch(file, "machine A", kBoth, t.timer(), &probed);
  CHECK(probed);
  CHECK(t.calls == 4 * hp::core::kProbeRounds);
  REQUIRE(std::filesystem::exists(file));
  // The same key: read back, nothing timed, even where the timer would now say otherwise.
  t.ms[ProbeKernel::kAttentionBf16] = 0.1;
  const auto again = hp::core::cached_dispatch(file, "machine A", kBoth, t.timer(), &probed);
  CHECK(!probed);
  CHECK(t.calls == 4 * hp::core::kProbeRounds);
  CHECK(!again.attention_bf16());
  CHECK(again.matmul.fp32_ms == first.matmul.fp32_ms);
  CHECK(again.key == "machine A");
  // Another key (another CPU, cap, thread count or library): probed again, both kept.
  const auto other = hp::core::cached_dispatch(file, "machine B", kBoth, t.timer(), &probed);
  CHECK(probed);
  CHECK(t.calls == 8 * hp::core::kProbeRounds);
  CHECK(other.attention_bf16());
  CHECK(!hp::core::cached_dispatch(file, "machine A", kBoth, t.timer(), &probed).attention_bf16());
  CHECK(!probed);
  // A file that is not JSON is probed over.
  { std::ofstream(file) << "{not json"; }
  hp::core::cached_dispatch(file, "machine A", kBoth, t.timer(), &probed);
  CHECK(probed);
  CHECK(t.calls == 12 * hp::core::kProbeRounds);
}

TEST_CASE("a bf16 precision asked for where bf16 measured slower is warned about, by how much", "[core][dispatch]") {
  hp::core::MeasuredDispatch d;
  d.matmul = {373, 656};
  CHECK(hp::core::slower_bf16_warning(d, "run.precision") ==
        "run.precision = bf16 runs as asked, but this CPU's bf16 matmuls ran at x0.57 the speed of fp32's (656 ms vs "
        "373 ms) in the dispatch probe: fp32 is faster here");
  d.matmul = {373, 236};
  CHECK(hp::core::slower_bf16_warning(d, "run.precision").empty());
  d.matmul = {};
  CHECK(hp::core::slower_bf16_warning(d, "run.precision").empty());  // nothing measured: nothing to say
  // train.precision reads training's products, not the matmuls.
  d.matmul = {373, 656};
  d.training = {5.8, 2.9};
  CHECK(hp::core::slower_bf16_warning(d, "train.precision").empty());
  d.matmul = {373, 236};
  d.training = {2.9, 5.8};
  CHECK(hp::core::slower_bf16_warning(d, "train.precision") ==
        "train.precision = bf16 runs as asked, but this CPU's bf16 training products ran at x0.50 the speed of fp32's "
        "(5.8 ms vs 2.9 ms) in the dispatch probe: fp32 is faster here");
}

TEST_CASE("train.precision auto trains at bf16 only where training's bf16 products measured faster", "[core][dispatch]") {
  const hp::core::ProbeCandidates training_only{false, false, true};
  FakeTimer fast{{{ProbeKernel::kTrainingFp32, 8.0}, {ProbeKernel::kTrainingBf16, 4.0}}};
  const auto a = hp::core::probe_dispatch("k", training_only, fast.timer());
  CHECK(fast.calls == 2 * hp::core::kProbeRounds);  // the training choice alone
  std::string why;
  CHECK(hp::core::auto_training_precision(a, &why) == "bf16");
  CHECK(why == "bf16: the dispatch probe measured training's bf16 products at x2.00 the speed of fp32's (4 ms vs 8 ms)");
  CHECK_THAT(hp::core::dispatch_summary(a), Catch::Contains("training products bf16 4 ms vs fp32 8 ms: bf16"));
  // Slower (an Xeon whose vdpbf16ps runs at half the FMA rate) or within the margin: fp32.
  FakeTimer slow{{{ProbeKernel::kTrainingFp32, 8.0}, {ProbeKernel::kTrainingBf16, 14.0}}};
  CHECK(hp::core::auto_training_precision(hp::core::probe_dispatch("k", training_only, slow.timer()), &why) == "fp32");
  CHECK_THAT(why, Catch::StartsWith("fp32: ") && Catch::Contains("x0.57"));
  FakeTimer close{{{ProbeKernel::kTrainingFp32, 8.0}, {ProbeKernel::kTrainingBf16, 7.8}}};
  CHECK(hp::core::auto_training_precision(hp::core::probe_dispatch("k", training_only, close.timer()), &why) == "fp32");
  // No bf16 path (AVX2, or the cap): nothing timed, fp32, and the log says why.
  FakeTimer none{{}};
  CHECK(hp::core::auto_training_precision(hp::core::probe_dispatch("k", {}, none.timer()), &why) == "fp32");
  CHECK(none.calls == 0);
  CHECK_THAT(why, Catch::Contains("no native bf16"));
}

TEST_CASE("a cached dispatch without the training choice is probed again", "[core][dispatch]") {
  const auto dir = hp::test::scratch_dir("hp_dispatch_old_cache");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "dispatch.json").string();
  // An entry written before training's products were probed.
  { std::ofstream(file) << R"({"machine A": {"key": "machine A", "attention": {"fp32_ms": 1, "bf16_ms": 2},)"
                           R"( "matmul": {"fp32_ms": 3, "bf16_ms": 4}}})"; }
  FakeTimer t{{{ProbeKernel::kTrainingFp32, 8.0}, {ProbeKernel::kTrainingBf16, 4.0}}};
  bool probed = false;
  const auto d = hp::core::cached_dispatch(file, "machine A", {false, false, true}, t.timer(), &probed);
  CHECK(probed);
  CHECK(d.training_bf16());
}
