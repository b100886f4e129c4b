// Parsing and checking of Hugging Face config.json for the Llama family.
#include "core/model/model_config.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

// Accepted ranges of the size fields: well above any released model
// (Llama 4 Scout declares 10M positions; the widest hidden size is ~25k),
// low enough that a typo or a hostile file cannot ask for terabytes, and
// within the 32-bit indices the kernels and token ids use.
constexpr int64_t kMaxPositionLimit = int64_t{1} << 24;
constexpr int64_t kMaxHiddenSize = int64_t{1} << 17;
constexpr int64_t kMaxIntermediateSize = int64_t{1} << 20;
constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

using json = nlohmann::json;

struct ArchitectureNames {
  Architecture architecture;
  absl::string_view class_name;
  absl::string_view model_type;
};

constexpr ArchitectureNames kArchitectures[] = {
    {Architecture::kLlama, "LlamaForCausalLM", "llama"},
    {Architecture::kMistral, "MistralForCausalLM", "mistral"},
    {Architecture::kQwen2, "Qwen2ForCausalLM", "qwen2"},
    {Architecture::kQwen3, "Qwen3ForCausalLM", "qwen3"},
    {Architecture::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe"},
    {Architecture::kMixtral, "MixtralForCausalLM", "mixtral"},
};

// Hugging Face's default max_position_embeddings for each family, used when
// the file leaves it out.
int64_t DefaultMaxPositions(Architecture architecture) {
  switch (architecture) {
    case Architecture::kLlama:
      return 2048;
    case Architecture::kMistral:
    case Architecture::kMixtral:
      return 4096 * 32;
    case Architecture::kQwen2:
    case Architecture::kQwen3:
    case Architecture::kQwen3Moe:
      return 32768;
  }
  return 2048;
}

// Short rendering of a JSON value for error messages.
std::string Show(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Typed access to the fields of one JSON object. Field names in errors are
// prefixed with `path` (e.g. "rope_scaling.") and messages with `source`.
class FieldReader {
 public:
  FieldReader(const json& object, absl::string_view source,
              absl::string_view path = "")
      : object_(object), source_(source), path_(path) {}

  absl::Status Error(absl::string_view field, absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": \"", path_, field, "\" ", problem));
  }

  // The field's value, or nullptr when it is absent or null.
  const json* Get(absl::string_view field) const {
    auto it = object_.find(std::string(field));
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(
      absl::string_view field) const {
    const json* value = Get(field);
    if (value == nullptr) return std::optional<int64_t>();
    if (value->is_number_unsigned()) {
      const uint64_t u = value->get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(field, absl::StrCat("(", Show(*value),
                                         ") is too large for a 64-bit "
                                         "integer"));
      }
      return std::optional<int64_t>(static_cast<int64_t>(u));
    }
    if (!value->is_number_integer()) {
      return Error(field,
                   absl::StrCat("must be an integer, got ", Show(*value)));
    }
    return std::optional<int64_t>(value->get<int64_t>());
  }

  // A required integer in [1, max].
  absl::StatusOr<int64_t> PositiveInt(
      absl::string_view field,
      int64_t max = std::numeric_limits<int32_t>::max()) const {
    QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(field));
    if (!value.has_value()) return Error(field, "is missing");
    return CheckPositive(field, *value, max);
  }

  absl::StatusOr<int64_t> CheckPositive(absl::string_view field, int64_t value,
                                        int64_t max) const {
    // One message for both ends, so the user sees the accepted range.
    if (value <= 0 || value > max) {
      return Error(field, absl::StrCat("must be a positive integer in 1..", max,
                                       ", got ", value));
    }
    return value;
  }

  absl::StatusOr<std::optional<double>> OptionalNumber(
      absl::string_view field) const {
    const json* value = Get(field);
    if (value == nullptr) return std::optional<double>();
    if (!value->is_number()) {
      return Error(field, absl::StrCat("must be a number, got ", Show(*value)));
    }
    return std::optional<double>(value->get<double>());
  }

  // A number > 0 and finite; `fallback` when absent.
  absl::StatusOr<double> PositiveNumber(absl::string_view field,
                                        std::optional<double> fallback) const {
    QUANT_ASSIGN_OR_RETURN(std::optional<double> value, OptionalNumber(field));
    if (!value.has_value()) {
      if (!fallback.has_value()) return Error(field, "is missing");
      return *fallback;
    }
    if (!(*value > 0) || !std::isfinite(*value)) {
      return Error(field, absl::StrCat("must be a positive number, got ",
                                       Show(*Get(field))));
    }
    return *value;
  }

  absl::StatusOr<bool> Bool(absl::string_view field, bool fallback) const {
    const json* value = Get(field);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      return Error(field,
                   absl::StrCat("must be true or false, got ", Show(*value)));
    }
    return value->get<bool>();
  }

  absl::StatusOr<std::optional<std::string>> OptionalString(
      absl::string_view field) const {
    const json* value = Get(field);
    if (value == nullptr) return std::optional<std::string>();
    if (!value->is_string()) {
      return Error(field, absl::StrCat("must be a string, got ", Show(*value)));
    }
    return std::optional<std::string>(value->get<std::string>());
  }

 private:
  const json& object_;
  absl::string_view source_;
  absl::string_view path_;
};

absl::StatusOr<Architecture> ResolveArchitecture(const FieldReader& fields) {
  std::optional<Architecture> from_class;
  std::string class_name;
  if (const json* list = fields.Get("architectures")) {
    if (!list->is_array() || list->empty() || !(*list)[0].is_string()) {
      return fields.Error("architectures",
                          absl::StrCat("must be a non-empty list of strings, "
                                       "got ",
                                       Show(*list)));
    }
    class_name = (*list)[0].get<std::string>();
    for (const ArchitectureNames& names : kArchitectures) {
      if (names.class_name == class_name) from_class = names.architecture;
    }
    if (!from_class.has_value()) {
      return fields.Error(
          "architectures",
          absl::StrCat("(\"", class_name,
                       "\") is not a supported architecture; supported: ",
                       SupportedArchitecturesList()));
    }
  }
  QUANT_ASSIGN_OR_RETURN(std::optional<std::string> model_type,
                         fields.OptionalString("model_type"));
  if (model_type.has_value()) {
    std::optional<Architecture> from_type;
    for (const ArchitectureNames& names : kArchitectures) {
      if (names.model_type == *model_type) from_type = names.architecture;
    }
    if (!from_type.has_value()) {
      return fields.Error(
          "model_type",
          absl::StrCat("(\"", *model_type,
                       "\") is not a supported architecture; supported: ",
                       SupportedArchitecturesList()));
    }
    if (from_class.has_value() && *from_class != *from_type) {
      return fields.Error("model_type",
                          absl::StrCat("(\"", *model_type,
                                       "\") does not match \"architectures\" "
                                       "(\"",
                                       class_name, "\")"));
    }
    return *from_type;
  }
  if (from_class.has_value()) return *from_class;
  return fields.Error(
      "architectures",
      absl::StrCat("and \"model_type\" are both missing; supported: ",
                   SupportedArchitecturesList()));
}

absl::StatusOr<std::optional<Llama3RopeScaling>> ParseRopeScaling(
    const FieldReader& fields, absl::string_view source) {
  const json* value = fields.Get("rope_scaling");
  if (value == nullptr) return std::optional<Llama3RopeScaling>();
  if (!value->is_object()) {
    return fields.Error("rope_scaling", absl::StrCat("must be null or an "
                                                     "object, got ",
                                                     Show(*value)));
  }
  const FieldReader scaling(*value, source, "rope_scaling.");
  // Transformers renamed "type" to "rope_type"; files carry either.
  const char* type_field = "rope_type";
  QUANT_ASSIGN_OR_RETURN(std::optional<std::string> type,
                         scaling.OptionalString(type_field));
  if (!type.has_value()) {
    type_field = "type";
    QUANT_ASSIGN_OR_RETURN(type, scaling.OptionalString(type_field));
  }
  if (!type.has_value()) {
    return scaling.Error("rope_type", "is missing");
  }
  if (*type == "default") return std::optional<Llama3RopeScaling>();
  if (*type != "llama3") {
    return scaling.Error(type_field,
                         absl::StrCat("(\"", *type,
                                      "\") is not supported; supported: "
                                      "\"llama3\" (or null for plain RoPE)"));
  }
  Llama3RopeScaling result;
  QUANT_ASSIGN_OR_RETURN(result.factor,
                         scaling.PositiveNumber("factor", std::nullopt));
  QUANT_ASSIGN_OR_RETURN(
      result.low_freq_factor,
      scaling.PositiveNumber("low_freq_factor", std::nullopt));
  QUANT_ASSIGN_OR_RETURN(
      result.high_freq_factor,
      scaling.PositiveNumber("high_freq_factor", std::nullopt));
  QUANT_ASSIGN_OR_RETURN(result.original_max_position_embeddings,
                         scaling.PositiveInt("original_max_position_embeddings",
                                             kMaxPositionLimit));
  // The wavelength bands low..high must be ordered, or the interpolation
  // between them divides by zero or inverts.
  if (!(result.high_freq_factor > result.low_freq_factor)) {
    return scaling.Error(
        "high_freq_factor",
        absl::StrCat("(", result.high_freq_factor,
                     ") must be greater than \"rope_scaling.low_freq_factor\" "
                     "(",
                     result.low_freq_factor, ")"));
  }
  return std::optional<Llama3RopeScaling>(result);
}

absl::Status ParseTokenIds(const FieldReader& fields, ModelConfig& config) {
  QUANT_ASSIGN_OR_RETURN(config.bos_token_id,
                         fields.OptionalInt("bos_token_id"));
  const json* eos = fields.Get("eos_token_id");
  if (eos == nullptr) return absl::OkStatus();
  if (eos->is_array()) {
    for (const json& id : *eos) {
      if (!id.is_number_integer()) {
        return fields.Error(
            "eos_token_id",
            absl::StrCat("must be an integer or a list of integers, got ",
                         Show(*eos)));
      }
      config.eos_token_ids.push_back(id.get<int64_t>());
    }
    return absl::OkStatus();
  }
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> id,
                         fields.OptionalInt("eos_token_id"));
  config.eos_token_ids.push_back(*id);
  return absl::OkStatus();
}

// Cross-field checks: the shapes the checkpoint must have follow from these.
absl::Status CheckHeads(const FieldReader& fields, ModelConfig& config) {
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads,
                         fields.OptionalInt("num_key_value_heads"));
  if (kv_heads.has_value()) {
    QUANT_ASSIGN_OR_RETURN(
        int64_t checked,
        fields.CheckPositive("num_key_value_heads", *kv_heads,
                             std::numeric_limits<int32_t>::max()));
    config.num_key_value_heads = static_cast<int>(checked);
  } else {
    config.num_key_value_heads = config.num_attention_heads;
  }
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return fields.Error("num_key_value_heads",
                        absl::StrCat("(", config.num_key_value_heads,
                                     ") must divide \"num_attention_heads\" (",
                                     config.num_attention_heads, ")"));
  }
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim,
                         fields.OptionalInt("head_dim"));
  if (head_dim.has_value()) {
    QUANT_ASSIGN_OR_RETURN(
        int64_t checked, fields.CheckPositive("head_dim", *head_dim, 1 << 16));
    config.head_dim = static_cast<int>(checked);
  } else {
    if (config.hidden_size % config.num_attention_heads != 0) {
      return fields.Error(
          "num_attention_heads",
          absl::StrCat("(", config.num_attention_heads,
                       ") must divide \"hidden_size\" (", config.hidden_size,
                       ") when \"head_dim\" is not set"));
    }
    config.head_dim =
        static_cast<int>(config.hidden_size / config.num_attention_heads);
  }
  // Rotary embeddings rotate pairs of dimensions.
  if (config.head_dim % 2 != 0) {
    return fields.Error("head_dim",
                        absl::StrCat("(", config.head_dim,
                                     ") must be even for rotary embeddings"));
  }
  return absl::OkStatus();
}

// The router and expert fields of the mixture-of-experts families, with
// transformers' defaults (Qwen3MoeConfig: 128 experts, top-8,
// moe_intermediate_size 768, norm_topk_prob false, decoder_sparse_step 1;
// MixtralConfig: 8 local experts, top-2, always renormalised).
absl::StatusOr<std::optional<MoeConfig>> ParseMoe(const FieldReader& fields,
                                                  const ModelConfig& config) {
  const bool qwen3_moe = config.architecture == Architecture::kQwen3Moe;
  if (!qwen3_moe && config.architecture != Architecture::kMixtral) {
    return std::optional<MoeConfig>();
  }
  MoeConfig moe;
  const char* experts_field = qwen3_moe ? "num_experts" : "num_local_experts";
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> experts,
                         fields.OptionalInt(experts_field));
  // 4096 is far above any released model (DeepSeek-V3: 256).
  QUANT_ASSIGN_OR_RETURN(
      int64_t num_experts,
      fields.CheckPositive(experts_field, experts.value_or(qwen3_moe ? 128 : 8),
                           4096));
  moe.num_experts = static_cast<int>(num_experts);
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> top_k,
                         fields.OptionalInt("num_experts_per_tok"));
  QUANT_ASSIGN_OR_RETURN(
      int64_t experts_per_token,
      fields.CheckPositive("num_experts_per_tok",
                           top_k.value_or(qwen3_moe ? 8 : 2), 4096));
  if (experts_per_token > num_experts) {
    return fields.Error(
        "num_experts_per_tok",
        absl::StrCat("(", experts_per_token, ") must not exceed \"",
                     experts_field, "\" (", num_experts, ")"));
  }
  moe.experts_per_token = static_cast<int>(experts_per_token);
  if (qwen3_moe) {
    QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> size,
                           fields.OptionalInt("moe_intermediate_size"));
    QUANT_ASSIGN_OR_RETURN(
        moe.expert_intermediate_size,
        fields.CheckPositive("moe_intermediate_size", size.value_or(768),
                             kMaxIntermediateSize));
    QUANT_ASSIGN_OR_RETURN(moe.norm_topk_prob,
                           fields.Bool("norm_topk_prob", false));
    QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> step,
                           fields.OptionalInt("decoder_sparse_step"));
    QUANT_ASSIGN_OR_RETURN(
        int64_t sparse_step,
        fields.CheckPositive("decoder_sparse_step", step.value_or(1), 1 << 16));
    moe.decoder_sparse_step = static_cast<int>(sparse_step);
    if (const json* only = fields.Get("mlp_only_layers")) {
      if (!only->is_array()) {
        return fields.Error("mlp_only_layers",
                            absl::StrCat("must be a list of layer indices, "
                                         "got ",
                                         Show(*only)));
      }
      for (size_t i = 0; i < only->size(); ++i) {
        const json& layer = (*only)[i];
        if (!layer.is_number_integer() || layer.get<int64_t>() < 0 ||
            layer.get<int64_t>() >= config.num_hidden_layers) {
          return fields.Error(absl::StrCat("mlp_only_layers[", i, "]"),
                              absl::StrCat("must be a layer index in 0..",
                                           config.num_hidden_layers - 1,
                                           ", got ", Show(layer)));
        }
        moe.mlp_only_layers.push_back(static_cast<int>(layer.get<int64_t>()));
      }
    }
  } else {
    moe.expert_intermediate_size = config.intermediate_size;
    moe.norm_topk_prob = true;
  }
  return std::optional<MoeConfig>(moe);
}

}  // namespace

bool ModelConfig::IsMoeBlock(int block) const {
  if (!moe.has_value()) return false;
  for (int dense : moe->mlp_only_layers) {
    if (dense == block) return false;
  }
  return (block + 1) % moe->decoder_sparse_step == 0;
}

absl::string_view ArchitectureName(Architecture architecture) {
  for (const ArchitectureNames& names : kArchitectures) {
    if (names.architecture == architecture) return names.class_name;
  }
  return "unknown";
}

absl::string_view ArchitectureModelType(Architecture architecture) {
  for (const ArchitectureNames& names : kArchitectures) {
    if (names.architecture == architecture) return names.model_type;
  }
  return "unknown";
}

std::string SupportedArchitecturesList() {
  std::vector<std::string> names;
  for (const ArchitectureNames& entry : kArchitectures) {
    names.push_back(
        absl::StrCat(entry.class_name, " (\"", entry.model_type, "\")"));
  }
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source) {
  QUANT_ASSIGN_OR_RETURN(const json root, ParseJsonFile(json_text, source));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": must hold a JSON object"));
  }
  const FieldReader fields(root, source);
  ModelConfig config;
  QUANT_ASSIGN_OR_RETURN(config.architecture, ResolveArchitecture(fields));
  config.model_type = std::string(ArchitectureModelType(config.architecture));

  QUANT_ASSIGN_OR_RETURN(config.hidden_size,
                         fields.PositiveInt("hidden_size", kMaxHiddenSize));
  QUANT_ASSIGN_OR_RETURN(
      config.intermediate_size,
      fields.PositiveInt("intermediate_size", kMaxIntermediateSize));
  QUANT_ASSIGN_OR_RETURN(int64_t layers,
                         fields.PositiveInt("num_hidden_layers", 1 << 16));
  config.num_hidden_layers = static_cast<int>(layers);
  QUANT_ASSIGN_OR_RETURN(int64_t heads,
                         fields.PositiveInt("num_attention_heads", 1 << 16));
  config.num_attention_heads = static_cast<int>(heads);
  QUANT_RETURN_IF_ERROR(CheckHeads(fields, config));
  QUANT_ASSIGN_OR_RETURN(config.vocab_size,
                         fields.PositiveInt("vocab_size", kMaxVocabSize));

  QUANT_ASSIGN_OR_RETURN(config.rms_norm_eps,
                         fields.PositiveNumber("rms_norm_eps", 1e-6));
  QUANT_ASSIGN_OR_RETURN(config.rope_theta,
                         fields.PositiveNumber("rope_theta", 10000.0));
  QUANT_ASSIGN_OR_RETURN(config.rope_scaling, ParseRopeScaling(fields, source));
  // transformers' default RoPE rotates only this fraction of each head when
  // the config sets it; the forward pass rotates whole heads.
  QUANT_ASSIGN_OR_RETURN(std::optional<double> partial_rotary,
                         fields.OptionalNumber("partial_rotary_factor"));
  if (partial_rotary.has_value() && *partial_rotary != 1.0) {
    return fields.Error("partial_rotary_factor",
                        absl::StrCat("(", *partial_rotary,
                                     ") is not supported; only 1 (RoPE over "
                                     "the whole head)"));
  }
  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> max_positions,
                         fields.OptionalInt("max_position_embeddings"));
  QUANT_ASSIGN_OR_RETURN(
      config.max_position_embeddings,
      fields.CheckPositive(
          "max_position_embeddings",
          max_positions.value_or(DefaultMaxPositions(config.architecture)),
          kMaxPositionLimit));

  QUANT_ASSIGN_OR_RETURN(config.tie_word_embeddings,
                         fields.Bool("tie_word_embeddings", false));
  QUANT_ASSIGN_OR_RETURN(bool attention_bias,
                         fields.Bool("attention_bias", false));
  // Biases follow the Hugging Face modelling code of each family, which
  // hard-codes them for qwen2 and mistral whatever the file says.
  switch (config.architecture) {
    case Architecture::kLlama:
    case Architecture::kQwen3:
    case Architecture::kQwen3Moe:
      config.attention_bias = attention_bias;
      config.o_proj_bias = attention_bias;
      break;
    case Architecture::kMistral:
    case Architecture::kMixtral:
      config.attention_bias = false;
      config.o_proj_bias = false;
      break;
    case Architecture::kQwen2:
      config.attention_bias = true;
      config.o_proj_bias = false;
      break;
  }
  config.qk_norm = config.architecture == Architecture::kQwen3 ||
                   config.architecture == Architecture::kQwen3Moe;
  QUANT_ASSIGN_OR_RETURN(bool mlp_bias, fields.Bool("mlp_bias", false));
  if (mlp_bias) {
    return fields.Error("mlp_bias", "(true) is not supported; must be false");
  }
  QUANT_ASSIGN_OR_RETURN(std::optional<std::string> hidden_act,
                         fields.OptionalString("hidden_act"));
  if (hidden_act.has_value() && *hidden_act != "silu") {
    return fields.Error("hidden_act",
                        absl::StrCat("(\"", *hidden_act,
                                     "\") is not supported; must be "
                                     "\"silu\""));
  }

  QUANT_RETURN_IF_ERROR(ParseTokenIds(fields, config));
  // Newer transformers write "dtype" in place of "torch_dtype".
  QUANT_ASSIGN_OR_RETURN(std::optional<std::string> dtype,
                         fields.OptionalString("torch_dtype"));
  if (!dtype.has_value()) {
    QUANT_ASSIGN_OR_RETURN(dtype, fields.OptionalString("dtype"));
  }
  config.torch_dtype = dtype.value_or("");

  QUANT_ASSIGN_OR_RETURN(std::optional<int64_t> window,
                         fields.OptionalInt("sliding_window"));
  if (window.has_value()) {
    QUANT_RETURN_IF_ERROR(
        fields.CheckPositive("sliding_window", *window, kMaxPositionLimit)
            .status());
  }
  QUANT_ASSIGN_OR_RETURN(bool use_sliding_window,
                         fields.Bool("use_sliding_window", false));
  // As transformers reads them: MistralConfig applies sliding_window to
  // every layer; Qwen2/Qwen3 only with use_sliding_window, and then only
  // from layer max_window_layers on, which the forward pass does not model,
  // so such a checkpoint is refused rather than run with full attention;
  // LlamaConfig has no sliding window at all (the fields are ignored there,
  // as transformers ignores them).
  switch (config.architecture) {
    case Architecture::kMistral:
    case Architecture::kMixtral:
      config.sliding_window = window;
      break;
    case Architecture::kQwen2:
    case Architecture::kQwen3:
    case Architecture::kQwen3Moe:
      if (use_sliding_window && window.has_value()) {
        return fields.Error(
            "use_sliding_window",
            "(true) is not supported: layers from \"max_window_layers\" on "
            "would attend over a sliding window, which this version does not "
            "apply; set it to false only if the model was trained that way");
      }
      break;
    case Architecture::kLlama:
      break;
  }
  // Newer configs list each layer's attention; anything but full attention
  // (or, for mistral, its sliding window on every layer) is refused.
  if (const json* layer_types = fields.Get("layer_types")) {
    if (!layer_types->is_array()) {
      return fields.Error("layer_types", "must be a list of strings");
    }
    const std::string wanted = config.sliding_window.has_value()
                                   ? "sliding_attention"
                                   : "full_attention";
    for (size_t i = 0; i < layer_types->size(); ++i) {
      const json& type = (*layer_types)[i];
      if (!type.is_string() || type.get<std::string>() != wanted) {
        return fields.Error(absl::StrCat("layer_types[", i, "]"),
                            absl::StrCat("(", Show(type),
                                         ") is not supported; every layer "
                                         "must be \"",
                                         wanted, "\" for this config"));
      }
    }
  }

  QUANT_ASSIGN_OR_RETURN(config.moe, ParseMoe(fields, config));

  if (const json* quantization = fields.Get("quantization_config")) {
    std::string method = "unknown";
    if (quantization->is_object()) {
      auto it = quantization->find("quant_method");
      if (it != quantization->end() && it->is_string()) {
        method = it->get<std::string>();
      }
    }
    config.quantization_method = method;
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& checkpoint_dir,
                                            FileSystem* fs) {
  const std::string path = JoinPath(checkpoint_dir, "config.json");
  // Real config.json files are a few KB; the bound keeps a wrong path from
  // reading a multi-GB file.
  QUANT_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path, size_t{1} << 20));
  return ParseModelConfig(text, path);
}

}  // namespace quant
