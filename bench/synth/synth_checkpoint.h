// A Llama-shaped (or Qwen3-MoE / Mixtral) checkpoint with deterministic
// pseudo-random weights, for measuring the quantizer and the service at sizes
// the shared models do not reach. Weights are Gaussian scaled by 1/sqrt(fan_in)
// (so activations keep their scale through the blocks), norms are 1. The
// vocabulary and tokenizer come from an existing checkpoint, so calibration
// text tokenizes as usual.
//
// The generator streams: model.safetensors is written tensor by tensor in
// chunks through AtomicFileWriter, so memory stays small whatever the size.
#ifndef QUANT_BENCH_SYNTH_SYNTH_CHECKPOINT_H_
#define QUANT_BENCH_SYNTH_SYNTH_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/dtype.h"
#include "core/model/model_config.h"

namespace quant::synth {

struct SynthOptions {
  std::string out_dir;     // Created when missing; its parent must exist.
  std::string vocab_from;  // Checkpoint dir with config.json + tokenizer.
  int64_t hidden = 256;
  int64_t intermediate = 688;
  int layers = 4;
  int heads = 4;
  int kv_heads = 4;
  // max_position_embeddings; 0 takes vocab_from's. Real models' calibration
  // windows (2048 tokens) are longer than the small models' contexts.
  int64_t max_positions = 0;
  uint64_t seed = 0;
  DType dtype = DType::kF32;  // kF32 or kBF16.
  // A mixture-of-experts model when experts > 0: "qwen3_moe"
  // (Qwen3MoeForCausalLM, q/k norms, experts of expert_intermediate) or
  // "mixtral" (MixtralForCausalLM, experts of `intermediate`), every block
  // sparse, each token routed to experts_per_token experts. Routers are
  // Gaussian like the other matrices, so some experts get few tokens.
  int experts = 0;
  int experts_per_token = 2;
  int64_t expert_intermediate = 0;  // qwen3_moe; 0: `intermediate`.
  std::string moe_family = "qwen3_moe";
};

// The config the generator writes for `options` (vocab_size, bos/eos and
// rope settings from `vocab_from`'s config.json). InvalidArgument naming the
// bad option (e.g. "--heads (3) must divide --hidden (64)").
absl::StatusOr<ModelConfig> SynthConfig(const SynthOptions& options);

// Writes config.json, model.safetensors and the tokenizer files found in
// `vocab_from` into `out_dir`, each file atomically. Returns the number of
// parameters written.
absl::StatusOr<int64_t> WriteSynthCheckpoint(const SynthOptions& options);

}  // namespace quant::synth

#endif  // QUANT_BENCH_SYNTH_SYNTH_CHECKPOINT_H_
