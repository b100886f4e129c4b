// MeasureWorkRates; see rate_probe.h.
#include "core/estimate/rate_probe.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/functional/function_ref.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"
#include "core/forward/block_weights.h"
#include "core/forward/rope.h"
#include "core/model/linear_layers.h"
#include "core/quant/gptq.h"
#include "core/quant/hessian.h"

namespace quant {
namespace {

constexpr int kHidden = 384;
constexpr int kIntermediate = 1024;
constexpr int kHeads = 6;
constexpr int kSeqLen = 128;
constexpr int kSequencesPerThread = 2;
constexpr int64_t kHessianTokens = 2048;

ModelConfig ProbeConfig() {
  ModelConfig config;
  config.model_type = "llama";
  config.hidden_size = kHidden;
  config.intermediate_size = kIntermediate;
  config.num_hidden_layers = 1;
  config.num_attention_heads = kHeads;
  config.num_key_value_heads = kHeads;
  config.head_dim = kHidden / kHeads;
  config.vocab_size = 32;
  config.max_position_embeddings = kSeqLen;
  return config;
}

RowMatrixF Random(int64_t rows, int64_t cols, float scale, std::mt19937* rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  RowMatrixF m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(*rng);
  return m;
}

// The faster of two timed runs (the first also warms caches and threads),
// as flops per second.
template <typename Fn>
absl::StatusOr<double> Rate(double flops, Fn run) {
  double best = 0.0;
  for (int round = 0; round < 2; ++round) {
    const auto start = std::chrono::steady_clock::now();
    QUANT_RETURN_IF_ERROR(run());
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    best = std::max(best, flops / std::max(took.count(), 1e-9));
  }
  return best;
}

}  // namespace

absl::StatusOr<WorkRates> MeasureWorkRates(ThreadPool* pool) {
  std::mt19937 rng(20261204);
  const ModelConfig config = ProbeConfig();
  BlockWeights block;
  block.input_norm = Eigen::VectorXf::Ones(kHidden);
  block.post_attention_norm = Eigen::VectorXf::Ones(kHidden);
  for (const LinearLayerSpec& spec : ListLinearLayers(config, 0)) {
    block.linear[spec.type].weight =
        Random(spec.out_features, spec.in_features, 0.05f, &rng);
  }
  const RopeTable rope(config, kSeqLen);
  const int threads = pool == nullptr ? 1 : pool->threads();
  const int chunks = threads;
  const RowMatrixF hidden =
      Random(int64_t{kSequencesPerThread} * kSeqLen, kHidden, 1.0f, &rng);
  const auto parallel = [&](int64_t n, absl::FunctionRef<void(int64_t)> fn) {
    if (pool == nullptr) {
      for (int64_t i = 0; i < n; ++i) fn(i);
    } else {
      pool->ParallelFor(n, fn);
    }
  };

  WorkRates rates;
  // Forward: each thread runs its own sequences through the block, as the
  // block task spreads chunks of sequences.
  const double forward_flops = static_cast<double>(chunks) *
                               kSequencesPerThread * kSeqLen *
                               BlockForwardFlopsPerToken(config, kSeqLen);
  QUANT_ASSIGN_OR_RETURN(
      rates.forward_flops_per_second, Rate(forward_flops, [&] {
        parallel(chunks, [&](int64_t) {
          RowMatrixF out = RunBlock(config, block, rope, kSeqLen, hidden);
          (void)out;
        });
        return absl::OkStatus();
      }));

  const RowMatrixF activations = Random(kHessianTokens, kHidden, 1.0f, &rng);
  QUANT_ASSIGN_OR_RETURN(rates.hessian_flops_per_second,
                         Rate(HessianFlops(kHessianTokens, kHidden), [&] {
                           HessianAccumulator hessian(kHidden);
                           return hessian.Add(activations, pool);
                         }));

  HessianAccumulator accumulated(kHidden);
  QUANT_RETURN_IF_ERROR(accumulated.Add(activations, pool));
  const RowMatrixF h = accumulated.Finish();
  const RowMatrixF& weights = block.Linear(LayerType::kQProj).weight;
  GptqOptions options;
  options.grid.bits = 4;
  options.grid.group_size = 128;
  options.pool = pool;
  options.layer_name = "rate probe";
  QUANT_ASSIGN_OR_RETURN(
      rates.gptq_flops_per_second,
      Rate(GptqFlops(weights.rows(), weights.cols()), [&]() -> absl::Status {
        return QuantizeGptq(weights, h, options).status();
      }));
  return rates;
}

}  // namespace quant
