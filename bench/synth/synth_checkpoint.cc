// Writes a synthetic Llama checkpoint; see synth_checkpoint.h.
#include "bench/synth/synth_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/synth/gaussian_stream.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/io/atomic_file_writer.h"
#include "core/model/linear_layers.h"
#include "nlohmann/json.hpp"

namespace quant::synth {
namespace {

// Elements generated and converted at a time: bounds memory to a few MiB.
constexpr size_t kChunkElements = size_t{1} << 20;

// Files copied from --vocab_from when present; tokenizer.json must be.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "generation_config.json",
                                           "tokenizer.model",
                                           "vocab.json",
                                           "merges.txt"};

absl::Status CheckPositive(const char* flag, int64_t value) {
  if (value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be positive, got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ConfigJson(const SynthOptions& options) {
  QUANT_RETURN_IF_ERROR(CheckPositive("hidden", options.hidden));
  QUANT_RETURN_IF_ERROR(CheckPositive("intermediate", options.intermediate));
  QUANT_RETURN_IF_ERROR(CheckPositive("layers", options.layers));
  QUANT_RETURN_IF_ERROR(CheckPositive("heads", options.heads));
  QUANT_RETURN_IF_ERROR(CheckPositive("kv_heads", options.kv_heads));
  if (options.max_positions < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_positions must be 0 (the vocabulary source's) or "
                     "positive, got ",
                     options.max_positions));
  }
  if (options.hidden % options.heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--heads (", options.heads,
                                                   ") must divide --hidden (",
                                                   options.hidden, ")"));
  }
  if (options.heads % options.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_heads (", options.kv_heads,
                     ") must divide --heads (", options.heads, ")"));
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype must be f32 or bf16, got ", DTypeName(options.dtype)));
  }
  if (options.vocab_from.empty()) {
    return absl::InvalidArgumentError("--vocab_from is required");
  }
  if (options.experts < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--experts must be 0 (dense) or positive, got ", options.experts));
  }
  if (options.experts > 0) {
    if (options.moe_family != "qwen3_moe" && options.moe_family != "mixtral") {
      return absl::InvalidArgumentError(
          absl::StrCat("--moe_family must be qwen3_moe or mixtral, got \"",
                       options.moe_family, "\""));
    }
    if (options.experts_per_token < 1 ||
        options.experts_per_token > options.experts) {
      return absl::InvalidArgumentError(
          absl::StrCat("--experts_per_token must be in 1..--experts (",
                       options.experts, "), got ", options.experts_per_token));
    }
    if (options.expert_intermediate < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--expert_intermediate must be 0 (--intermediate) or "
                       "positive, got ",
                       options.expert_intermediate));
    }
  }
  QUANT_ASSIGN_OR_RETURN(const ModelConfig source,
                         LoadModelConfig(options.vocab_from));
  nlohmann::json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", options.hidden},
      {"intermediate_size", options.intermediate},
      {"num_hidden_layers", options.layers},
      {"num_attention_heads", options.heads},
      {"num_key_value_heads", options.kv_heads},
      {"head_dim", options.hidden / options.heads},
      {"vocab_size", source.vocab_size},
      {"max_position_embeddings", options.max_positions > 0
                                      ? options.max_positions
                                      : source.max_position_embeddings},
      {"rms_norm_eps", source.rms_norm_eps},
      {"rope_theta", source.rope_theta},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      // Tied, as in the small models whose tokenizer is borrowed: the
      // benchmark is about the decoder blocks.
      {"tie_word_embeddings", true},
      {"torch_dtype", options.dtype == DType::kBF16 ? "bfloat16" : "float32"},
      {"synthetic_seed", options.seed}};
  if (options.experts > 0 && options.moe_family == "qwen3_moe") {
    config["architectures"] = {"Qwen3MoeForCausalLM"};
    config["model_type"] = "qwen3_moe";
    config["num_experts"] = options.experts;
    config["num_experts_per_tok"] = options.experts_per_token;
    config["moe_intermediate_size"] = options.expert_intermediate > 0
                                          ? options.expert_intermediate
                                          : options.intermediate;
    config["norm_topk_prob"] = true;
    config["decoder_sparse_step"] = 1;
    config["mlp_only_layers"] = nlohmann::json::array();
    config.erase("mlp_bias");
  } else if (options.experts > 0) {
    config["architectures"] = {"MixtralForCausalLM"};
    config["model_type"] = "mixtral";
    config["num_local_experts"] = options.experts;
    config["num_experts_per_tok"] = options.experts_per_token;
    config.erase("mlp_bias");
    config.erase("attention_bias");
  }
  if (source.bos_token_id.has_value()) {
    config["bos_token_id"] = *source.bos_token_id;
  }
  if (source.eos_token_ids.size() == 1) {
    config["eos_token_id"] = source.eos_token_ids[0];
  } else if (!source.eos_token_ids.empty()) {
    config["eos_token_id"] = source.eos_token_ids;
  }
  return config;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Norm weights are 1 and other vectors (biases) 0; matrices are Gaussian
// scaled by 1/sqrt(fan_in), fan_in being the input (last) dimension.
absl::Status AppendTensor(const ExpectedTensor& tensor, uint64_t seed,
                          DType dtype, AtomicFileWriter& writer) {
  const bool matrix = tensor.shape.size() >= 2;
  const float constant = absl::StrContains(tensor.name, "norm") ? 1.0f : 0.0f;
  const float scale =
      matrix ? 1.0f / std::sqrt(static_cast<float>(tensor.shape.back())) : 0;
  GaussianStream stream(seed);
  std::vector<float> values;
  std::string bytes;
  for (int64_t left = NumElements(tensor.shape); left > 0;) {
    const size_t count = std::min<size_t>(kChunkElements, left);
    values.resize(count);
    if (matrix) {
      stream.Fill(values.data(), count, scale);
    } else {
      std::fill(values.begin(), values.end(), constant);
    }
    bytes.resize(count * DTypeSize(dtype));
    QUANT_RETURN_IF_ERROR(
        ConvertFromFloat(values.data(), count, dtype, bytes.data()));
    writer.Append(bytes);
    QUANT_RETURN_IF_ERROR(writer.status());
    left -= static_cast<int64_t>(count);
  }
  return absl::OkStatus();
}

// model.safetensors: header with every offset first, then the tensors in
// model order, generated chunk by chunk.
absl::StatusOr<int64_t> WriteTensors(const std::string& path,
                                     const std::vector<ExpectedTensor>& list,
                                     uint64_t seed, DType dtype) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t offset = 0;
  int64_t parameters = 0;
  for (const ExpectedTensor& t : list) {
    const uint64_t size = NumElements(t.shape) * DTypeSize(dtype);
    header[t.name] = {{"dtype", DTypeName(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + size}}};
    offset += size;
    parameters += NumElements(t.shape);
  }
  std::string text = header.dump();
  // The data section starts 8-byte aligned, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  char length[8];
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(n >> (8 * i));

  AtomicFileWriter writer(path);
  QUANT_RETURN_IF_ERROR(writer.status());
  writer.Append(absl::string_view(length, sizeof(length)));
  writer.Append(text);
  for (size_t i = 0; i < list.size(); ++i) {
    QUANT_RETURN_IF_ERROR(
        AppendTensor(list[i], TensorSeed(seed, i), dtype, writer));
  }
  QUANT_RETURN_IF_ERROR(writer.Commit());
  return parameters;
}

}  // namespace

absl::StatusOr<ModelConfig> SynthConfig(const SynthOptions& options) {
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json config, ConfigJson(options));
  return ParseModelConfig(config.dump(), "synthetic config.json");
}

absl::StatusOr<int64_t> WriteSynthCheckpoint(const SynthOptions& options) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("--out is required");
  }
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json config_json, ConfigJson(options));
  const std::string config_text = config_json.dump(2) + "\n";
  QUANT_ASSIGN_OR_RETURN(
      const ModelConfig config,
      ParseModelConfig(config_text, "synthetic config.json"));
  if (!FileExists(JoinPath(options.vocab_from, "tokenizer.json"))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--vocab_from: ", options.vocab_from, " has no tokenizer.json"));
  }
  if (!IsDirectory(options.out_dir)) {
    QUANT_RETURN_IF_ERROR(MakeDirectory(options.out_dir));
  }
  for (const char* name : kTokenizerFiles) {
    const std::string from = JoinPath(options.vocab_from, name);
    if (!FileExists(from)) continue;
    QUANT_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(from));
    QUANT_RETURN_IF_ERROR(
        WriteFileAtomically(JoinPath(options.out_dir, name), bytes));
  }
  QUANT_ASSIGN_OR_RETURN(
      const int64_t parameters,
      WriteTensors(JoinPath(options.out_dir, "model.safetensors"),
                   ListExpectedTensors(config), options.seed, options.dtype));
  // config.json last: a directory with one holds a whole checkpoint.
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(options.out_dir, "config.json"), config_text));
  return parameters;
}

}  // namespace quant::synth
