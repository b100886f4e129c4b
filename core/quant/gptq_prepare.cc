// GPTQ's setup (dead columns, act-order, damping, factor U) and assembly.
#include "core/quant/gptq_prepare.h"

#include <Eigen/Cholesky>
#include <algorithm>
#include <numeric>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/layer_checks.h"

namespace quant {
namespace {

// dst = src across storage orders, tile by tile so both sides stay in cache.
template <typename Src, typename Dst>
void CopyTiled(const Src& src, Dst* dst) {
  constexpr int64_t kTile = 64;
  const int64_t n = src.rows();
  const int64_t k = src.cols();
  dst->resize(n, k);
  for (int64_t r0 = 0; r0 < n; r0 += kTile) {
    const int64_t rows = std::min(kTile, n - r0);
    for (int64_t c0 = 0; c0 < k; c0 += kTile) {
      const int64_t cols = std::min(kTile, k - c0);
      dst->block(r0, c0, rows, cols) = src.block(r0, c0, rows, cols);
    }
  }
}

// Cholesky of J (H + damping·I) J into `l`, in Scalar precision.
template <typename Scalar>
bool FactorReversed(const Eigen::MatrixXf& h, double damping,
                    Eigen::MatrixXf* l) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  Matrix reversed = h.reverse().template cast<Scalar>();
  reversed.diagonal().array() += static_cast<Scalar>(damping);
  Eigen::LLT<Eigen::Ref<Matrix>> llt(reversed);  // in place
  if (llt.info() != Eigen::Success) return false;
  if (!reversed.template triangularView<Eigen::Lower>()
           .toDenseMatrix()
           .allFinite()) {
    return false;
  }
  if constexpr (std::is_same_v<Scalar, float>) {
    *l = std::move(reversed);
  } else {
    *l = reversed.template cast<float>();
  }
  return true;
}

}  // namespace

void UpperFactorRows(const Eigen::MatrixXf& l, int64_t first, int64_t count,
                     Eigen::MatrixXf* rows, ThreadPool* pool) {
  const int64_t k = l.rows();
  const int64_t m = k - first;
  // Rows a = K-1-first-t of L⁻¹ (t < count) are the columns of X solving
  // L[:m,:m]ᵀ X = [0; I_count] (rows of L⁻¹ vanish right of the diagonal).
  Eigen::MatrixXf x = Eigen::MatrixXf::Zero(m, count);
  x.bottomRows(count).setIdentity();
  const int64_t tiles = (count + kGptqSolveTile - 1) / kGptqSolveTile;
  ParallelFor(pool, tiles, [&](int64_t tile) {
    const int64_t begin = tile * kGptqSolveTile;
    const int64_t width = std::min(kGptqSolveTile, count - begin);
    l.topLeftCorner(m, m)
        .transpose()
        .triangularView<Eigen::Upper>()
        .solveInPlace(x.middleCols(begin, width));
  });
  *rows = x.reverse().transpose();
  // Exact zeros left of the diagonal (the solve leaves rounding there only
  // if L were not triangular; it is, but keep the contract explicit).
  for (int64_t t = 0; t < count; ++t) rows->row(t).head(t).setZero();
}

absl::StatusOr<GptqWorkspace> PrepareGptq(const ConstRowMatrixRef& weights,
                                          const ConstRowMatrixRef& hessian,
                                          const GptqOptions& options) {
  const std::string& name = options.layer_name;
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(options.grid));
  QUANT_RETURN_IF_ERROR(CheckFiniteWeights(weights, name));
  const int64_t n = weights.rows();
  const int64_t k = weights.cols();
  QUANT_RETURN_IF_ERROR(CheckHessian(hessian, k, name));
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': block_size is ", options.block_size,
                     "; must be > 0"));
  }
  if (!(options.damp_percent >= 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': damp_percent is ",
                     options.damp_percent, "; must be >= 0"));
  }

  GptqWorkspace ws;
  // H is symmetric: its row-major storage read column-major is H itself, so
  // this is a contiguous copy.
  Eigen::MatrixXf h = hessian.transpose();
  // Column-major working copy, transposed tile by tile to stay in cache.
  Eigen::MatrixXf w_storage(n, k);
  constexpr int64_t kTile = 64;
  for (int64_t r0 = 0; r0 < n; r0 += kTile) {
    const int64_t rows = std::min(kTile, n - r0);
    for (int64_t c0 = 0; c0 < k; c0 += kTile) {
      const int64_t cols = std::min(kTile, k - c0);
      w_storage.block(r0, c0, rows, cols) = weights.block(r0, c0, rows, cols);
    }
  }
  for (int64_t c = 0; c < k; ++c) {
    if (h(c, c) == 0.0f) {  // Never active: nothing to preserve.
      h(c, c) = 1.0f;
      w_storage.col(c).setZero();
      ++ws.dead_columns;
    }
  }

  ws.order.resize(k);
  std::iota(ws.order.begin(), ws.order.end(), 0);
  if (options.act_order) {
    std::stable_sort(ws.order.begin(), ws.order.end(),
                     [&h](int32_t a, int32_t b) { return h(a, a) > h(b, b); });
  }

  if (options.static_groups) {
    const GridSpec& grid = options.grid;
    const int64_t groups = NumGroups(grid, k);
    const int64_t gs = EffectiveGroupSize(grid, k);
    ws.static_scales.resize(groups, n);
    ws.static_zeros.resize(groups, n);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t begin = g * gs;
        const GroupParams p = ComputeGroupParams(
            grid, w_storage.data() + begin * n + r, std::min(gs, k - begin), n);
        ws.static_scales(g, r) = p.scale;
        ws.static_zeros(g, r) = p.zero;
      }
    }
  }

  Eigen::MatrixXf hp;
  if (options.act_order) {
    ws.w.resize(n, k);
    hp.resize(k, k);
    for (int64_t p = 0; p < k; ++p) {
      ws.w.col(p) = w_storage.col(ws.order[p]);
      const float* src = h.col(ws.order[p]).data();
      float* dst = hp.col(p).data();
      for (int64_t q = 0; q < k; ++q) dst[q] = src[ws.order[q]];
    }
  } else {
    ws.w = std::move(w_storage);
    hp = std::move(h);
  }

  double mean_diag = 0.0;
  for (int64_t p = 0; p < k; ++p) mean_diag += hp(p, p);
  mean_diag /= static_cast<double>(k);
  double damp = options.damp_percent;
  for (int attempt = 0;; ++attempt) {
    const double added = damp * mean_diag;
    const bool factored = options.factor_in_double
                              ? FactorReversed<double>(hp, added, &ws.l)
                              : FactorReversed<float>(hp, added, &ws.l);
    if (factored) break;
    if (attempt >= options.max_damp_retries) {
      return absl::FailedPreconditionError(absl::StrCat(
          "layer '", name, "': Cholesky of the damped Hessian failed ",
          attempt + 1, " times, last damp_percent ", damp,
          " (max_damp_retries ", options.max_damp_retries, ")"));
    }
    damp = damp > 0.0 ? damp * options.damp_retry_factor : 1e-3;
    ++ws.damp_retries;
  }
  ws.damp_used = damp;
  return ws;
}

QuantizedLayer AssembleGptqLayer(
    const GptqWorkspace& ws, const GridSpec& grid, bool static_groups,
    const Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic>& codes,
    const RowMatrixF& scales, const RowMatrixF& zeros) {
  const int64_t n = codes.rows();
  const int64_t k = codes.cols();
  const int64_t gs = EffectiveGroupSize(grid, k);
  QuantizedLayer out;
  out.grid = grid;
  out.rows = n;
  out.cols = k;
  out.method = "gptq";
  out.scales = scales;
  out.zeros = zeros;
  out.order = ws.order;
  out.g_idx.resize(k);
  // Column-major in storage order first (contiguous column copies and a
  // vectorizable dequantization), then one tiled transpose to row-major.
  Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic> storage_codes(n, k);
  Eigen::MatrixXf dequantized(n, k);
  for (int64_t p = 0; p < k; ++p) {
    const int32_t c = ws.order[p];
    const int32_t g = static_cast<int32_t>(static_groups ? c / gs : p / gs);
    out.g_idx[c] = g;
    storage_codes.col(c) = codes.col(p);
    dequantized.col(c) =
        scales.row(g).transpose().array() *
        (codes.col(p).cast<float>().array() - zeros.row(g).transpose().array());
  }
  CopyTiled(storage_codes, &out.codes);
  CopyTiled(dequantized, &out.dequantized);
  return out;
}

}  // namespace quant
