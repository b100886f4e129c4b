// Shared setup for the pipeline tests.
#include "tests/pipeline/pipeline_fixture.h"

#include <functional>

#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_file.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/quantization_plan.h"
#include "core/pipeline/task_io.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant::testing {

std::string Stories260KDir() { return SharedPath("models/stories260K/hf-f32"); }

std::string TinyStoriesPath() { return SharedPath("data/tinystories_val.txt"); }

LocalQuantizeOptions Stories260KOptions(const Recipe& recipe,
                                        const std::string& out_dir) {
  LocalQuantizeOptions options;
  options.checkpoint_dir = Stories260KDir();
  options.calibration_path = TinyStoriesPath();
  options.out_dir = out_dir;
  options.recipe = recipe;
  return options;
}

ModelConfig TwoBlockConfig() {
  auto config = ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 256, "intermediate_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-05})");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig();
}

Recipe SmallRecipe(QuantMethod method, int group_size, OutputFormat format,
                   Propagation propagation, int samples, int seq_len) {
  Recipe recipe;
  recipe.method = method;
  recipe.bits = 4;
  recipe.group_size = group_size;
  recipe.format = format;
  recipe.propagation = propagation;
  recipe.calibration.samples = samples;
  recipe.calibration.seq_len = seq_len;
  recipe.calibration.heldout_fraction = 0.1;
  return recipe;
}

absl::StatusOr<LoadedModel> LoadStories260K(const Recipe& recipe) {
  LoadedModel loaded;
  QUANT_ASSIGN_OR_RETURN(loaded.checkpoint, Checkpoint::Open(Stories260KDir()));
  QUANT_ASSIGN_OR_RETURN(loaded.model, LlamaModel::Load(*loaded.checkpoint));
  QUANT_ASSIGN_OR_RETURN(loaded.tokenizer,
                         Tokenizer::LoadFromDirectory(Stories260KDir()));
  QUANT_ASSIGN_OR_RETURN(CalibrationFile file,
                         LoadCalibrationFile(TinyStoriesPath()));
  QUANT_ASSIGN_OR_RETURN(loaded.split,
                         BuildCalibrationSplit(file, *loaded.tokenizer,
                                               SplitOptionsFromRecipe(recipe)));
  return loaded;
}

namespace {

absl::StatusOr<HiddenStates> Embedded(const LlamaModel& model,
                                      const TokenWindows& windows) {
  std::vector<int32_t> ids;
  for (const auto& s : windows.sequences)
    ids.insert(ids.end(), s.begin(), s.end());
  HiddenStates h;
  h.seq_len = windows.seq_len;
  h.lengths = windows.lengths;
  QUANT_ASSIGN_OR_RETURN(h.rows, model.Embed(ids));
  return h;
}

}  // namespace

absl::StatusOr<BlockTaskInput> Block0Input(const LoadedModel& loaded,
                                           const Recipe& recipe) {
  QUANT_ASSIGN_OR_RETURN(QuantizationPlan plan,
                         PlanQuantization(loaded.model->config(), recipe));
  BlockTaskInput input;
  input.config = &loaded.model->config();
  input.weights = loaded.model->block(0);
  input.settings = plan.blocks[0];
  QUANT_ASSIGN_OR_RETURN(input.calibration,
                         Embedded(*loaded.model, loaded.split.calibration));
  QUANT_ASSIGN_OR_RETURN(input.heldout,
                         Embedded(*loaded.model, loaded.split.heldout));
  return input;
}

nlohmann::json LayersWithoutTimes(const std::string& dir, int block) {
  auto text = ReadFileToString(BlockOutputPrefix(dir, block) + ".layers.json");
  EXPECT_TRUE(text.ok()) << text.status();
  nlohmann::json doc = nlohmann::json::parse(text.ok() ? *text : "{}");
  std::function<void(nlohmann::json&)> strip = [&](nlohmann::json& j) {
    if (j.is_object()) {
      for (auto it = j.begin(); it != j.end();) {
        const std::string& key = it.key();
        if (key.size() >= 7 && key.compare(key.size() - 7, 7, "seconds") == 0) {
          it = j.erase(it);
        } else {
          strip(*it);
          ++it;
        }
      }
    } else if (j.is_array()) {
      for (nlohmann::json& item : j) strip(item);
    }
  };
  strip(doc);
  return doc;
}

std::string ReadOrEmpty(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

void ToMultiHead(ModelConfig* config, BlockWeights* weights) {
  const int per_kv = config->num_attention_heads / config->num_key_value_heads;
  const int d = config->head_dim;
  for (const LayerType type : {LayerType::kKProj, LayerType::kVProj}) {
    const RowMatrixF w = weights->Linear(type).weight;
    RowMatrixF wide(static_cast<int64_t>(config->num_attention_heads) * d,
                    w.cols());
    for (int h = 0; h < config->num_attention_heads; ++h) {
      wide.middleRows(static_cast<int64_t>(h) * d, d) =
          w.middleRows(static_cast<int64_t>(h / per_kv) * d, d);
    }
    weights->linear[type].weight = wide;
  }
  config->num_key_value_heads = config->num_attention_heads;
}

}  // namespace quant::testing
