// Rotary position embeddings in the rotate-half convention of Hugging Face
// Llama checkpoints, with Llama 3's frequency-dependent scaling.
#ifndef QUANT_CORE_FORWARD_ROPE_H_
#define QUANT_CORE_FORWARD_ROPE_H_

#include <cstdint>
#include <vector>

#include "core/model/model_config.h"
#include "core/quant/matrix_types.h"

namespace quant {

// cos/sin of position * inv_freq for positions [0, max_positions), each row
// holding head_dim / 2 values. Only the first kTablePositions are tabulated
// (a model may declare millions of positions; a table for all of them would
// take gigabytes before the first token), later ones are computed as used,
// with the same float32 arithmetic.
class RopeTable {
 public:
  static constexpr int64_t kTablePositions = int64_t{1} << 16;

  RopeTable(const ModelConfig& config, int64_t max_positions);

  int64_t max_positions() const { return max_positions_; }

  // Rotates every head of `x` ([seq_len, heads * head_dim], one sequence, row
  // t at position t) in place.
  void Apply(int head_dim, Eigen::Ref<RowMatrixF> x) const;

  // The inverse frequencies, exposed for tests (Llama 3 scaling applied).
  const std::vector<double>& inverse_frequencies() const { return inv_freq_; }

 private:
  std::vector<double> inv_freq_;
  int64_t max_positions_;
  RowMatrixF cos_;
  RowMatrixF sin_;
};

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_ROPE_H_
