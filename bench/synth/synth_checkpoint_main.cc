// quant-synth-checkpoint: writes a Llama-shaped (or mixture-of-experts)
// checkpoint with seeded pseudo-random weights and a borrowed tokenizer, for
// scaling benchmarks.
//
//   quant-synth-checkpoint --out /tmp/moe --hidden 2048 --layers 2
//     --heads 32 --kv_heads 4 --experts 128 --experts_per_token 8
//     --expert_intermediate 768 --vocab_from ...   (a Qwen3-30B-A3B slice)
//
//   quant-synth-checkpoint --out /tmp/synth300m --hidden 1024
//     --intermediate 2816 --layers 24 --heads 16 --kv_heads 16
//     --vocab_from ../shared/models/stories260K/hf-f32 --seed 0 --dtype bf16
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "bench/synth/synth_checkpoint.h"

ABSL_FLAG(std::string, out, "", "Output checkpoint directory. Required.");
ABSL_FLAG(std::string, vocab_from, "",
          "Checkpoint directory whose config.json (vocab size, special "
          "tokens) and tokenizer files are reused. Required.");
ABSL_FLAG(int64_t, hidden, 256, "hidden_size.");
ABSL_FLAG(int64_t, intermediate, 688, "intermediate_size (MLP width).");
ABSL_FLAG(int, layers, 4, "num_hidden_layers.");
ABSL_FLAG(int, heads, 4, "num_attention_heads; must divide --hidden.");
ABSL_FLAG(int, kv_heads, 4, "num_key_value_heads; must divide --heads.");
ABSL_FLAG(int64_t, max_positions, 0,
          "max_position_embeddings; 0 takes --vocab_from's.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the weights: same seed, same bytes.");
ABSL_FLAG(std::string, dtype, "f32", "Stored dtype: f32 or bf16.");
ABSL_FLAG(int, experts, 0,
          "Experts per block: > 0 writes a mixture-of-experts model "
          "(--moe_family) with every block sparse; 0 a dense Llama.");
ABSL_FLAG(int, experts_per_token, 2, "Experts each token is routed to.");
ABSL_FLAG(int64_t, expert_intermediate, 0,
          "qwen3_moe's moe_intermediate_size; 0 takes --intermediate.");
ABSL_FLAG(std::string, moe_family, "qwen3_moe",
          "qwen3_moe (Qwen3MoeForCausalLM) or mixtral (MixtralForCausalLM, "
          "experts of --intermediate).");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quant-synth-checkpoint: a synthetic Llama checkpoint.\n"
      "Example: quant-synth-checkpoint --out /tmp/m --hidden 1024 "
      "--intermediate 2816 --layers 24 --heads 16 --kv_heads 16 "
      "--vocab_from shared/models/stories260K/hf-f32");
  // --help lists this file's flags (absl looks for a file named after the
  // program, quant-synth-checkpoint.cc, and finds none).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "/synth_checkpoint_main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  quant::synth::SynthOptions options;
  options.out_dir = absl::GetFlag(FLAGS_out);
  options.vocab_from = absl::GetFlag(FLAGS_vocab_from);
  options.hidden = absl::GetFlag(FLAGS_hidden);
  options.intermediate = absl::GetFlag(FLAGS_intermediate);
  options.layers = absl::GetFlag(FLAGS_layers);
  options.heads = absl::GetFlag(FLAGS_heads);
  options.kv_heads = absl::GetFlag(FLAGS_kv_heads);
  options.max_positions = absl::GetFlag(FLAGS_max_positions);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.experts = absl::GetFlag(FLAGS_experts);
  options.experts_per_token = absl::GetFlag(FLAGS_experts_per_token);
  options.expert_intermediate = absl::GetFlag(FLAGS_expert_intermediate);
  options.moe_family = absl::GetFlag(FLAGS_moe_family);
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "f32") {
    options.dtype = quant::DType::kF32;
  } else if (dtype == "bf16") {
    options.dtype = quant::DType::kBF16;
  } else {
    std::fprintf(stderr,
                 "quant-synth-checkpoint: --dtype must be f32 or "
                 "bf16, got %s\n",
                 dtype.c_str());
    return 2;
  }
  const absl::StatusOr<int64_t> parameters =
      quant::synth::WriteSynthCheckpoint(options);
  if (!parameters.ok()) {
    std::fprintf(stderr, "quant-synth-checkpoint: %s\n",
                 std::string(parameters.status().message()).c_str());
    return parameters.status().code() == absl::StatusCode::kInvalidArgument ? 2
                                                                            : 1;
  }
  std::printf("quant-synth-checkpoint: wrote %s: %lld parameters\n",
              options.out_dir.c_str(), static_cast<long long>(*parameters));
  return 0;
}
