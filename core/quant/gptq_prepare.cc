// GPTQ's setup (dead columns, act-order, damping, factor U) and assembly.
#include "core/quant/gptq_prepare.h"

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/cholesky.h"
#include "core/quant/layer_checks.h"

namespace quant {
namespace {

// Copies and permutations of whole layers run in strips of this many rows or
// columns over the pool: done on one thread they left the others waiting
// between GPTQ's parallel parts (docs/PERFORMANCE.md).
constexpr int64_t kCopyStrip = 64;

int64_t Strips(int64_t count) { return (count + kCopyStrip - 1) / kCopyStrip; }

// dst = src across storage orders, tile by tile so both sides stay in cache,
// a strip of rows per pool iteration.
template <typename Src, typename Dst>
void CopyTiled(const Src& src, Dst* dst, ThreadPool* pool) {
  const int64_t n = src.rows();
  const int64_t k = src.cols();
  dst->resize(n, k);
  ParallelFor(pool, Strips(n), [&](int64_t strip) {
    const int64_t r0 = strip * kCopyStrip;
    const int64_t rows = std::min(kCopyStrip, n - r0);
    for (int64_t c0 = 0; c0 < k; c0 += kCopyStrip) {
      const int64_t cols = std::min(kCopyStrip, k - c0);
      dst->block(r0, c0, rows, cols) = src.block(r0, c0, rows, cols);
    }
  });
}

// Cholesky of J (H + damping·I) J into `l`, in Scalar precision.
template <typename Scalar>
bool FactorReversed(const Eigen::MatrixXf& h, double damping, ThreadPool* pool,
                    Eigen::MatrixXf* l) {
  using Matrix = Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  Matrix reversed = h.reverse().template cast<Scalar>();
  reversed.diagonal().array() += static_cast<Scalar>(damping);
  if (!CholeskyLowerInPlace(&reversed, pool)) return false;
  const Eigen::Index n = reversed.rows();
  for (Eigen::Index c = 0; c < n; ++c) {
    if (!reversed.col(c).tail(n - c).allFinite()) return false;
  }
  if constexpr (std::is_same_v<Scalar, float>) {
    *l = std::move(reversed);
  } else {
    *l = reversed.template cast<float>();
  }
  return true;
}

}  // namespace

void InvertLowerTriangularInPlace(Eigen::MatrixXf* l, ThreadPool* pool) {
  const int64_t k = l->rows();
  if (k == 0) return;
  const int64_t last = ((k - 1) / kInverseBlock) * kInverseBlock;
  for (int64_t j = last; j >= 0; j -= kInverseBlock) {
    const int64_t jb = std::min(kInverseBlock, k - j);
    const int64_t rest = k - j - jb;
    if (rest > 0) {
      // With L = [L11 0; L21 L22] and L22⁻¹ already in place:
      // (L⁻¹)21 = -L22⁻¹ · L21 · L11⁻¹.
      const auto l22_inverse = l->block(j + jb, j + jb, rest, rest);
      const int64_t column_tiles = (jb + kGptqSolveTile - 1) / kGptqSolveTile;
      ParallelFor(pool, column_tiles, [&](int64_t tile) {
        const int64_t c = tile * kGptqSolveTile;
        auto a21 =
            l->block(j + jb, j + c, rest, std::min(kGptqSolveTile, jb - c));
        a21 = l22_inverse.triangularView<Eigen::Lower>() * a21;
      });
      // Tiles of kInverseBlock rows: with kGptqRowTile most block columns
      // of a 1024-column layer had one tile, solved on one thread.
      const auto l11 = l->block(j, j, jb, jb);
      const int64_t row_tiles = (rest + kInverseBlock - 1) / kInverseBlock;
      ParallelFor(pool, row_tiles, [&](int64_t tile) {
        const int64_t r = tile * kInverseBlock;
        auto a21 =
            l->block(j + jb + r, j, std::min(kInverseBlock, rest - r), jb);
        l11.triangularView<Eigen::Lower>().solveInPlace<Eigen::OnTheRight>(a21);
        a21 = -a21;
      });
    }
    // The diagonal block last: the solve above needed L11 itself.
    auto l11 = l->block(j, j, jb, jb);
    Eigen::MatrixXf inverse = Eigen::MatrixXf::Identity(jb, jb);
    l11.triangularView<Eigen::Lower>().solveInPlace(inverse);
    l11.triangularView<Eigen::Lower>() = inverse;
  }
}

void UpperFactorRows(const Eigen::MatrixXf& l_inverse, int64_t first,
                     int64_t count, Eigen::MatrixXf* rows) {
  const int64_t k = l_inverse.rows();
  const int64_t m = k - first;
  // rows(t, c) = U(first + t, first + c) = L⁻¹(K-1-first-t, K-1-first-c):
  // column c of `rows` is column K-1-first-c of L⁻¹ read upwards from row
  // K-1-first, contiguous in memory; zero below the diagonal of `rows`.
  rows->resize(count, m);
  const float* base = l_inverse.data();
  for (int64_t c = 0; c < m; ++c) {
    const float* column = base + (k - 1 - first - c) * k;
    float* out = rows->col(c).data();
    const int64_t filled = std::min(count, c + 1);
    for (int64_t t = 0; t < filled; ++t) out[t] = column[k - 1 - first - t];
    for (int64_t t = filled; t < count; ++t) out[t] = 0.0f;
  }
}

absl::StatusOr<GptqFactor> PrepareGptqFactor(const ConstRowMatrixRef& hessian,
                                             int64_t k,
                                             const GptqOptions& options) {
  const std::string& name = options.layer_name;
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(options.grid));
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

  GptqFactor factor;
  // H is symmetric: its row-major storage read column-major is H itself, so
  // this is a contiguous copy.
  Eigen::MatrixXf h = hessian.transpose();
  for (int64_t c = 0; c < k; ++c) {
    if (h(c, c) == 0.0f) {  // Never active: nothing to preserve.
      h(c, c) = 1.0f;
      factor.dead.push_back(c);
    }
  }

  factor.order.resize(k);
  std::iota(factor.order.begin(), factor.order.end(), 0);
  if (options.act_order) {
    std::stable_sort(factor.order.begin(), factor.order.end(),
                     [&h](int32_t a, int32_t b) { return h(a, a) > h(b, b); });
  }

  Eigen::MatrixXf hp;
  if (options.act_order) {
    hp.resize(k, k);
    ParallelFor(options.pool, Strips(k), [&](int64_t strip) {
      const int64_t end = std::min(k, (strip + 1) * kCopyStrip);
      for (int64_t p = strip * kCopyStrip; p < end; ++p) {
        const float* src = h.col(factor.order[p]).data();
        float* dst = hp.col(p).data();
        for (int64_t q = 0; q < k; ++q) dst[q] = src[factor.order[q]];
      }
    });
  } else {
    hp = std::move(h);
  }

  double mean_diag = 0.0;
  for (int64_t p = 0; p < k; ++p) mean_diag += hp(p, p);
  mean_diag /= static_cast<double>(k);
  double damp = options.damp_percent;
  for (int attempt = 0;; ++attempt) {
    const double added = damp * mean_diag;
    const bool factored =
        options.factor_in_double
            ? FactorReversed<double>(hp, added, options.pool, &factor.l_inverse)
            : FactorReversed<float>(hp, added, options.pool, &factor.l_inverse);
    if (factored) break;
    if (attempt >= options.max_damp_retries) {
      return absl::FailedPreconditionError(absl::StrCat(
          "layer '", name, "': Cholesky of the damped Hessian failed ",
          attempt + 1, " times, last damp_percent ", damp,
          " (max_damp_retries ", options.max_damp_retries, ")"));
    }
    damp = damp > 0.0 ? damp * options.damp_retry_factor : 1e-3;
    ++factor.damp_retries;
  }
  factor.damp_used = damp;
  InvertLowerTriangularInPlace(&factor.l_inverse, options.pool);
  return factor;
}

GptqWeights PrepareGptqWeights(const ConstRowMatrixRef& weights,
                               const GptqFactor& factor,
                               const GptqOptions& options) {
  const int64_t n = weights.rows();
  const int64_t k = weights.cols();
  GptqWeights out;
  // Column-major working copy, transposed tile by tile to stay in cache.
  Eigen::MatrixXf w_storage;
  CopyTiled(weights, &w_storage, options.pool);
  for (const int64_t c : factor.dead) w_storage.col(c).setZero();

  if (options.static_groups) {
    const GridSpec& grid = options.grid;
    const int64_t groups = NumGroups(grid, k);
    const int64_t gs = EffectiveGroupSize(grid, k);
    out.static_scales.resize(groups, n);
    out.static_zeros.resize(groups, n);
    ParallelFor(options.pool, Strips(n), [&](int64_t strip) {
      const int64_t end = std::min(n, (strip + 1) * kCopyStrip);
      for (int64_t r = strip * kCopyStrip; r < end; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t begin = g * gs;
          const GroupParams p =
              ComputeGroupParams(grid, w_storage.data() + begin * n + r,
                                 std::min(gs, k - begin), n);
          out.static_scales(g, r) = p.scale;
          out.static_zeros(g, r) = p.zero;
        }
      }
    });
  }

  if (options.act_order) {
    out.w.resize(n, k);
    ParallelFor(options.pool, Strips(k), [&](int64_t strip) {
      const int64_t end = std::min(k, (strip + 1) * kCopyStrip);
      for (int64_t p = strip * kCopyStrip; p < end; ++p) {
        out.w.col(p) = w_storage.col(factor.order[p]);
      }
    });
  } else {
    out.w = std::move(w_storage);
  }
  return out;
}

absl::StatusOr<GptqWorkspace> PrepareGptq(const ConstRowMatrixRef& weights,
                                          const ConstRowMatrixRef& hessian,
                                          const GptqOptions& options) {
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(options.grid));
  QUANT_RETURN_IF_ERROR(CheckFiniteWeights(weights, options.layer_name));
  QUANT_ASSIGN_OR_RETURN(GptqFactor factor,
                         PrepareGptqFactor(hessian, weights.cols(), options));
  GptqWeights prepared = PrepareGptqWeights(weights, factor, options);
  GptqWorkspace ws;
  ws.w = std::move(prepared.w);
  ws.static_scales = std::move(prepared.static_scales);
  ws.static_zeros = std::move(prepared.static_zeros);
  ws.l_inverse = std::move(factor.l_inverse);
  ws.order = std::move(factor.order);
  ws.damp_used = factor.damp_used;
  ws.damp_retries = factor.damp_retries;
  ws.dead_columns = static_cast<int64_t>(factor.dead.size());
  return ws;
}

QuantizedLayer AssembleGptqLayer(
    const std::vector<int32_t>& order, const GridSpec& grid, bool static_groups,
    const Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic>& codes,
    const RowMatrixF& scales, const RowMatrixF& zeros, ThreadPool* pool) {
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
  out.order = order;
  out.g_idx.resize(k);
  // Column-major in storage order first (contiguous column copies and a
  // vectorizable dequantization), then one tiled transpose to row-major.
  Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic> storage_codes(n, k);
  Eigen::MatrixXf dequantized(n, k);
  // `order` is a permutation, so strips of positions write disjoint columns.
  ParallelFor(pool, Strips(k), [&](int64_t strip) {
    const int64_t end = std::min(k, (strip + 1) * kCopyStrip);
    for (int64_t p = strip * kCopyStrip; p < end; ++p) {
      const int32_t c = order[p];
      const int32_t g = static_cast<int32_t>(static_groups ? c / gs : p / gs);
      out.g_idx[c] = g;
      storage_codes.col(c) = codes.col(p);
      dequantized.col(c) = scales.row(g).transpose().array() *
                           (codes.col(p).cast<float>().array() -
                            zeros.row(g).transpose().array());
    }
  });
  CopyTiled(storage_codes, &out.codes, pool);
  CopyTiled(dequantized, &out.dequantized, pool);
  return out;
}

}  // namespace quant
