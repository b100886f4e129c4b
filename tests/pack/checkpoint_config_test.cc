// Tests for adding a quantization_config block to config.json.
#include "core/pack/checkpoint_config.h"

#include "core/pack/gptq_format.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

TEST(CheckpointConfigTest, AddsTheBlockAndKeepsTheRest) {
  absl::StatusOr<nlohmann::json> block = GptqQuantizationConfig({});
  ASSERT_TRUE(block.ok());
  absl::StatusOr<std::string> text = WithQuantizationConfig(
      R"({"model_type": "llama", "hidden_size": 64,
          "quantization_config": {"quant_method": "old"}})",
      *block);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json config =
      nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(config.is_discarded());
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["hidden_size"], 64);
  EXPECT_EQ(config["quantization_config"], *block);
}

TEST(CheckpointConfigTest, RefusesWhatIsNotAnObject) {
  EXPECT_FALSE(WithQuantizationConfig("[1, 2]", nlohmann::json::object()).ok());
  EXPECT_FALSE(WithQuantizationConfig("{", nlohmann::json::object()).ok());
  EXPECT_FALSE(WithQuantizationConfig("{}", nlohmann::json::array()).ok());
}

}  // namespace
}  // namespace quant
