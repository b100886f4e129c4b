// Options and result of GPTQ, shared by the blocked implementation and the
// column-by-column reference.
#ifndef QUANT_CORE_QUANT_GPTQ_OPTIONS_H_
#define QUANT_CORE_QUANT_GPTQ_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/thread_pool.h"
#include "core/quant/grid.h"
#include "core/quant/quantized_layer.h"

namespace quant {

struct GptqOptions {
  GridSpec grid;
  // γ: γ·mean(diag H)·I is added to H before the factorization.
  double damp_percent = 0.01;
  // Quantize columns by descending diag(H) (stable for ties).
  bool act_order = false;
  // With act-order, fix every group's parameters up front from the weights in
  // storage order (so g_idx stays i/group_size).
  bool static_groups = false;
  // Columns per lazy batch: errors are pushed into later columns as one
  // matrix-matrix product per block.
  int64_t block_size = 128;
  // A failed Cholesky multiplies γ by damp_retry_factor (from 1e-3 when γ is
  // 0), at most max_damp_retries times; then the layer fails.
  int max_damp_retries = 8;
  double damp_retry_factor = 10.0;
  // Factorize H_γ (Cholesky, triangular inverse) in double rather than float.
  // Float is about twice as fast and what the reference implementations use;
  // double tolerates nearly singular H with tiny damping.
  bool factor_in_double = false;
  std::string layer_name;  // For error messages.
  // Spreads the triangular inverse behind U (by fixed tiles of columns and
  // rows) and each block's column sweep with its update of the later
  // columns (by fixed tiles of rows of W, which are independent) over its
  // threads; inline when null. The tiles are the same whatever the thread
  // count, so are the results. Not owned.
  ThreadPool* pool = nullptr;
};

// Fixed tiles of GPTQ's parallel work (see GptqOptions::pool).
inline constexpr int64_t kGptqSolveTile = 32;  // Right-hand sides.
inline constexpr int64_t kGptqRowTile = 512;   // Rows of W.

struct GptqResult {
  QuantizedLayer layer;
  double damp_used = 0.0;  // The γ that factorized.
  int damp_retries = 0;    // How many times γ had to be raised.
  int64_t dead_columns = 0;
};

}  // namespace quant

#endif  // QUANT_CORE_QUANT_GPTQ_OPTIONS_H_
