// Attention rollout (see analysis/rollout.h).
#include "analysis/rollout.h"

#include <Eigen/Dense>

#include "core/base/errors.h"

namespace hp::analysis {

std::vector<float> attention_rollout(const std::vector<float>& att, int L, int H, int n,
                                     const std::vector<uint8_t>& kept) {
  using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const size_t nn = static_cast<size_t>(n) * n;
  if (att.size() != static_cast<size_t>(L) * H * nn)
    throw Error("attention_rollout: expected " + std::to_string(L) + "×" + std::to_string(H) + "×" + std::to_string(n) +
                "² values, got " + std::to_string(att.size()));
  if (!kept.empty() && kept.size() != static_cast<size_t>(L) * H)
    throw Error("attention_rollout: kept must hold L×H flags");
  std::vector<float> out(static_cast<size_t>(L) * nn);
  Mat rollout = Mat::Identity(n, n);
  for (int l = 0; l < L; ++l) {
    Mat mean = Mat::Zero(n, n);
    int present = 0;
    for (int h = 0; h < H; ++h) {
      if (!kept.empty() && !kept[static_cast<size_t>(l) * H + h]) continue;
      mean += Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                  att.data() + (static_cast<size_t>(l) * H + h) * nn, n, n)
                  .cast<double>();
      ++present;
    }
    const Mat mix = present ? Mat(0.5 * mean / present + 0.5 * Mat::Identity(n, n)) : Mat(Mat::Identity(n, n));
    rollout = mix * rollout;
    for (size_t k = 0; k < nn; ++k) out[l * nn + k] = static_cast<float>(rollout.data()[k]);
  }
  return out;
}

}  // namespace hp::analysis
