// train/pending_steps: the training step's scalars read to the host in one go, in step order, summed over ranks.
#include "train/pending_steps.h"

#include <catch2/catch.hpp>

using hp::train::PendingSteps;
using hp::train::StepRow;

TEST_CASE("pending steps: one read gives every step's row in order, the summed columns reduced once", "[train]") {
  PendingSteps p;
  CHECK(p.empty());
  const torch::Device cpu(torch::kCPU);
  for (long k = 1; k <= PendingSteps::kReadEvery; ++k) {
    StepRow row;
    row.step = k, row.lr = 0.1 * static_cast<double>(k);
    const auto x = static_cast<float>(k);
    // Float32 and float64 scalars, [1]-shaped ones and an undefined one (no distillation: 0).
    p.add(row, {torch::tensor(x), torch::tensor({2.0 * x}), torch::Tensor(), torch::tensor(x / 4)},
          {torch::tensor(10.0 * x, torch::kFloat64), torch::tensor(x + 0.5f), torch::Tensor(), torch::tensor(-x),
           torch::tensor(x * x)},
          cpu);
    CHECK(p.due() == (k == PendingSteps::kReadEvery));
  }
  int reductions = 0;
  const auto rows = p.take([&](torch::Tensor& t) {
    ++reductions;
    CHECK(t.sizes() == torch::IntArrayRef({PendingSteps::kReadEvery, 4}));
    t.mul_(3);  // three ranks holding the same shares
  });
  CHECK(reductions == 1);
  CHECK(p.reads() == 1);
  CHECK(p.empty());
  REQUIRE(static_cast<long>(rows.size()) == PendingSteps::kReadEvery);
  for (long i = 0; i < PendingSteps::kReadEvery; ++i) {
    const StepRow& r = rows[i];
    const double x = static_cast<double>(i + 1);
    CHECK(r.step == i + 1);
    CHECK(r.lr == Approx(0.1 * x));
    CHECK(r.loss == 3 * x);
    CHECK(r.task_loss == 6 * x);
    CHECK(r.distill == 0.0);
    CHECK(r.distill_hidden == Approx(0.75 * x));
    CHECK(r.grad_norm == 10 * x);  // not summed over ranks: every rank holds it alike
    CHECK(r.expected == x + 0.5);
    CHECK(r.penalty == 0.0);
    CHECK(r.lambda1 == -x);
    CHECK(r.lambda2 == x * x);
  }
  CHECK(p.take({}).empty());  // nothing pending: no read
  CHECK(p.reads() == 1);
}
