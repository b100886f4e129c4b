// quant-shard-precision: what the precision of a round's partial Hessians
// does to GPTQ's result (docs/DATA_PARALLEL.md, "What travels"). A layer's
// calibration tokens are cut into shards; each shard's XᵀX is accumulated
// as the product does (HessianAccumulator, float32), stored in some
// precision and the shards summed. Each way is compared with the same sum
// accumulated in float64 throughout: the Hessian's relative error, the
// share of GPTQ codes (w4, g128, act-order) that differ from GPTQ on the
// float64 Hessian, and the output error tr(E H Eᵀ) on held-out tokens,
// relative to the float64 Hessian's own.
//
// The activations are synthetic but shaped like a transformer layer's
// inputs: correlated channels (a random low-rank mix plus noise), scales
// spread log-normally over the channels and a few outlier channels 30
// times larger, which is what makes f16's range matter.
//
//   quant-shard-precision --k=1024 --shards=8 --shard_tokens=2048
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "common/flag_names.h"
#include "core/base/status_macros.h"
#include "core/base/thread_pool.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/isa.h"
#include "core/pack/packed_tensor.h"
#include "core/quant/gptq.h"
#include "core/quant/hessian.h"
#include "core/quant/matrix_types.h"
#include "core/quant/output_error.h"

ABSL_FLAG(int64_t, k, 1024, "Input features of the layer (Hessian K x K).");
ABSL_FLAG(int64_t, n, 1024, "Output features of the layer's weight.");
ABSL_FLAG(int, shards, 8, "Calibration shards.");
ABSL_FLAG(int64_t, shard_tokens, 2048, "Tokens per shard.");
ABSL_FLAG(int64_t, heldout_tokens, 4096, "Held-out tokens (the error).");
ABSL_FLAG(int, threads, 2, "Threads for the accumulation and GPTQ.");
ABSL_FLAG(uint64_t, seed, 1, "Random seed of the activations and weight.");
ABSL_FLAG(std::string, isa, "",
          "Kernel level (auto, v2, v3, v4); default QUANT_ISA, else auto.");

namespace quant {
namespace {

// Activations of a layer: x = (z M + noise) ∘ scale, z of rank K/8.
class ActivationSource {
 public:
  ActivationSource(int64_t k, uint64_t seed) : k_(k), rng_(seed) {
    const int64_t rank = std::max<int64_t>(1, k / 8);
    std::normal_distribution<float> normal;
    mix_ = RowMatrixF(rank, k);
    for (int64_t i = 0; i < mix_.size(); ++i) mix_.data()[i] = normal(rng_);
    mix_ /= std::sqrt(static_cast<float>(rank));
    scale_.resize(k);
    std::lognormal_distribution<float> spread(0.0f, 0.7f);
    for (int64_t c = 0; c < k; ++c) scale_[c] = spread(rng_);
    for (int64_t c = 0; c < k; c += 97) scale_[c] *= 30.0f;  // Outliers.
  }

  RowMatrixF Next(int64_t tokens) {
    std::normal_distribution<float> normal;
    RowMatrixF z(tokens, mix_.rows());
    for (int64_t i = 0; i < z.size(); ++i) z.data()[i] = normal(rng_);
    RowMatrixF x = z * mix_;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t c = 0; c < k_; ++c) {
        x(t, c) = (x(t, c) + 0.3f * normal(rng_)) * scale_[c];
      }
    }
    return x;
  }

 private:
  int64_t k_;
  std::mt19937_64 rng_;
  RowMatrixF mix_;
  std::vector<float> scale_;
};

// One way of carrying the shards' sums to the reduce.
struct Way {
  std::string name;
  DType stored;         // A shard's triangle is rounded through it.
  bool sum_in_double;   // The reduce adds the shards in float64.
  Eigen::MatrixXd sum;  // The reduce's K x K sum, in float64 for comparing.
  int64_t non_finite = 0;
};

std::vector<float> Rounded(const std::vector<float>& lower, DType dtype,
                           int64_t* non_finite) {
  std::vector<float> out(lower.size());
  for (size_t i = 0; i < lower.size(); ++i) {
    out[i] =
        dtype == DType::kF32 ? lower[i] : RoundTripThrough(lower[i], dtype);
    if (!std::isfinite(out[i])) ++*non_finite;
  }
  return out;
}

void AddTriangle(const std::vector<float>& lower, int64_t k, bool in_double,
                 Eigen::MatrixXd* sum) {
  int64_t at = 0;
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c <= r; ++c, ++at) {
      const double value = lower[at];
      double& low = (*sum)(r, c);
      // A float sum rounds after every addition, as a float32 reduce does.
      low = in_double ? low + value
                      : static_cast<double>(static_cast<float>(low) +
                                            static_cast<float>(value));
      (*sum)(c, r) = low;
    }
  }
}

absl::Status Run() {
  const int64_t k = absl::GetFlag(FLAGS_k);
  const int64_t n = absl::GetFlag(FLAGS_n);
  const int shards = absl::GetFlag(FLAGS_shards);
  const int64_t shard_tokens = absl::GetFlag(FLAGS_shard_tokens);
  const int64_t heldout_tokens = absl::GetFlag(FLAGS_heldout_tokens);
  if (k < 8 || n < 1 || shards < 1 || shard_tokens < 1 || heldout_tokens < 1) {
    return absl::InvalidArgumentError(
        "--k >= 8, --n, --shards, --shard_tokens and --heldout_tokens >= 1");
  }
  QUANT_RETURN_IF_ERROR(kernels::InitProcessIsa(absl::GetFlag(FLAGS_isa)));
  ThreadPool pool(std::max(1, absl::GetFlag(FLAGS_threads)));
  ActivationSource source(k, absl::GetFlag(FLAGS_seed));

  std::vector<Way> ways = {
      {"f32 shards, f32 sum (built)", DType::kF32, false, {}, 0},
      {"f32 shards, f64 sum", DType::kF32, true, {}, 0},
      {"bf16 shards, f32 sum", DType::kBF16, false, {}, 0},
      {"f16 shards, f32 sum", DType::kF16, false, {}, 0},
  };
  for (Way& way : ways) way.sum = Eigen::MatrixXd::Zero(k, k);
  Eigen::MatrixXd reference = Eigen::MatrixXd::Zero(k, k);  // All float64.
  for (int s = 0; s < shards; ++s) {
    const RowMatrixF x = source.Next(shard_tokens);
    HessianAccumulator shard(k);
    QUANT_RETURN_IF_ERROR(shard.Add(x, &pool));
    const std::vector<float> lower = shard.LowerTriangle();
    for (Way& way : ways) {
      AddTriangle(Rounded(lower, way.stored, &way.non_finite), k,
                  way.sum_in_double, &way.sum);
    }
    const Eigen::MatrixXd xd = x.cast<double>();
    reference.noalias() += xd.transpose() * xd;
  }
  const RowMatrixF heldout = source.Next(heldout_tokens);
  QUANT_ASSIGN_OR_RETURN(OutputErrorEvaluator evaluate,
                         OutputErrorEvaluator::FromActivations(heldout));

  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) + 1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  RowMatrixF weight(n, k);
  for (int64_t i = 0; i < weight.size(); ++i) weight.data()[i] = normal(rng);
  GptqOptions options;
  options.grid.bits = 4;
  options.grid.group_size = 128;
  options.act_order = true;
  options.pool = &pool;
  options.layer_name = "synthetic";
  const RowMatrixF reference_f = reference.cast<float>();
  QUANT_ASSIGN_OR_RETURN(const GptqResult base,
                         QuantizeGptq(weight, reference_f, options));
  const double base_error =
      evaluate.SquaredError(weight, base.layer.dequantized, &pool);
  const double norm = reference.norm();

  absl::PrintF(
      "== shard precision: K %d, N %d, %d shards x %d tokens, %d held-out; "
      "GPTQ w4 g128 act-order; kernels %s\n",
      k, n, shards, shard_tokens, heldout_tokens,
      kernels::IsaName(kernels::ProcessIsa()));
  absl::PrintF("%-30s %14s %12s %14s %12s\n", "way", "H rel. error",
               "non-finite", "codes differ", "error ratio");
  absl::PrintF("%-30s %14s %12d %14s %12.6f\n", "f64 throughout (reference)",
               "0", 0, "0", 1.0);
  for (const Way& way : ways) {
    if (way.non_finite > 0) {
      absl::PrintF("%-30s %14s %12d %14s %12s\n", way.name, "-", way.non_finite,
                   "-", "(GPTQ refuses)");
      continue;
    }
    const double h_error = (way.sum - reference).norm() / norm;
    const RowMatrixF h = way.sum.cast<float>();
    QUANT_ASSIGN_OR_RETURN(const GptqResult result,
                           QuantizeGptq(weight, h, options));
    int64_t differ = 0;
    for (int64_t i = 0; i < result.layer.codes.size(); ++i) {
      differ += result.layer.codes.data()[i] != base.layer.codes.data()[i];
    }
    const double error =
        evaluate.SquaredError(weight, result.layer.dequantized, &pool);
    absl::PrintF("%-30s %14.3e %12d %13.4f%% %12.6f\n", way.name, h_error,
                 way.non_finite,
                 100.0 * static_cast<double>(differ) /
                     static_cast<double>(result.layer.codes.size()),
                 error / base_error);
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace quant

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "GPTQ's result with a round's partial Hessians "
      "stored and summed in several precisions, against float64.\n"
      "Example: quant-shard-precision --k=1024 --shards=8 "
      "--shard_tokens=2048");
  quant::common::ListFlagsOfMainFile(argv[0]);
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "quant-shard-precision: unexpected argument %s\n",
                 positional[1]);
    return 1;
  }
  const absl::Status status = quant::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "quant-shard-precision: %s\n",
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}
