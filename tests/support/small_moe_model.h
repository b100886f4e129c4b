// The small synthetic mixture-of-experts model the end-to-end tests
// quantize (tests/synth/moe_quantize_test.cc, the service's e2e test): 2
// blocks of hidden 64 (4 heads over 2 KV heads), 4 experts of 32, top-2,
// the vocabulary and tokenizer of `vocab_from`. Users link quant_synth.
#ifndef QUANT_TESTS_SUPPORT_SMALL_MOE_MODEL_H_
#define QUANT_TESTS_SUPPORT_SMALL_MOE_MODEL_H_

#include <string>

#include "bench/synth/synth_checkpoint.h"

namespace quant::testing {

inline constexpr int kSmallMoeExperts = 4;
inline constexpr int kSmallMoeTopK = 2;
inline constexpr int kSmallMoeBlocks = 2;

// "qwen3_moe" or "mixtral".
inline synth::SynthOptions SmallMoeModel(const std::string& out_dir,
                                         const std::string& vocab_from,
                                         const std::string& family) {
  synth::SynthOptions options;
  options.out_dir = out_dir;
  options.vocab_from = vocab_from;
  options.hidden = 64;
  options.intermediate = 64;
  options.layers = kSmallMoeBlocks;
  options.heads = 4;
  options.kv_heads = 2;
  options.experts = kSmallMoeExperts;
  options.experts_per_token = kSmallMoeTopK;
  options.expert_intermediate = 32;
  options.moe_family = family;
  return options;
}

}  // namespace quant::testing

#endif  // QUANT_TESTS_SUPPORT_SMALL_MOE_MODEL_H_
