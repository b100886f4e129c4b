// Blocked right-looking Cholesky over a pool (see cholesky.h).
#include "core/quant/cholesky.h"

#include <Eigen/Cholesky>
#include <algorithm>
#include <utility>
#include <vector>

namespace quant {
namespace {

template <typename Matrix>
bool FactorLower(Matrix* a, ThreadPool* pool) {
  using Scalar = typename Matrix::Scalar;
  const int64_t n = a->rows();
  for (int64_t j = 0; j < n; j += kCholeskyPanel) {
    const int64_t jb = std::min(kCholeskyPanel, n - j);
    const int64_t rest = n - j - jb;
    Eigen::Ref<Matrix> a11 = a->block(j, j, jb, jb);
    Eigen::LLT<Eigen::Ref<Matrix>> panel(a11);  // in place, lower
    if (panel.info() != Eigen::Success) return false;
    if (rest == 0) break;
    // L21 = A21 · L11⁻ᵀ, in fixed tiles of a panel's width in rows.
    const int64_t row_tiles = (rest + kCholeskyPanel - 1) / kCholeskyPanel;
    ParallelFor(pool, row_tiles, [&](int64_t tile) {
      const int64_t r = tile * kCholeskyPanel;
      auto a21 =
          a->block(j + jb + r, j, std::min(kCholeskyPanel, rest - r), jb);
      a->block(j, j, jb, jb)
          .template triangularView<Eigen::Lower>()
          .transpose()
          .template solveInPlace<Eigen::OnTheRight>(a21);
    });
    // A22 -= L21 · L21ᵀ on the lower triangle, tile (r, c) with r >= c.
    const int64_t blocks = (rest + kCholeskyTile - 1) / kCholeskyTile;
    std::vector<std::pair<int64_t, int64_t>> tiles;
    tiles.reserve(static_cast<size_t>(blocks * (blocks + 1) / 2));
    for (int64_t r = 0; r < blocks; ++r) {
      for (int64_t c = 0; c <= r; ++c) tiles.emplace_back(r, c);
    }
    const int64_t base = j + jb;
    ParallelFor(pool, static_cast<int64_t>(tiles.size()), [&](int64_t i) {
      const int64_t row = tiles[i].first * kCholeskyTile;
      const int64_t col = tiles[i].second * kCholeskyTile;
      const int64_t rows = std::min(kCholeskyTile, rest - row);
      const int64_t cols = std::min(kCholeskyTile, rest - col);
      const auto l_rows = a->block(base + row, j, rows, jb);
      if (row == col) {
        a->block(base + row, base + row, rows, rows)
            .template selfadjointView<Eigen::Lower>()
            .rankUpdate(l_rows, Scalar(-1));
      } else {
        a->block(base + row, base + col, rows, cols).noalias() -=
            l_rows * a->block(base + col, j, cols, jb).transpose();
      }
    });
  }
  return true;
}

}  // namespace

bool CholeskyLowerInPlace(Eigen::MatrixXf* a, ThreadPool* pool) {
  return FactorLower(a, pool);
}

bool CholeskyLowerInPlace(Eigen::MatrixXd* a, ThreadPool* pool) {
  return FactorLower(a, pool);
}

}  // namespace quant
