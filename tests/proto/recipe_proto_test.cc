// Checks that the generated API code builds and that the protobuf JSON
// mapping of a Recipe (used for recipe files and manifests) round-trips and
// refuses unknown fields by name.
#include <string>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "quant/v1/recipe.pb.h"

namespace quant {
namespace {

TEST(RecipeProtoTest, JsonRoundTrip) {
  v1::Recipe recipe;
  recipe.set_method(v1::METHOD_GPTQ);
  recipe.set_bits(4);
  recipe.set_group_size(128);
  recipe.mutable_damp()->set_fraction(0.01);
  recipe.mutable_calibration()->set_samples(128);
  recipe.add_ignore("lm_head");
  auto* override_layer = recipe.add_overrides();
  override_layer->set_match("layers\\.0\\..*down_proj");
  override_layer->set_bits(8);
  recipe.mutable_gates()->set_max_ppl_ratio(1.05);

  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(recipe, &json).ok());
  v1::Recipe parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), recipe.SerializeAsString());
  EXPECT_TRUE(parsed.overrides(0).has_bits());
  EXPECT_FALSE(parsed.overrides(0).has_group_size());
}

TEST(RecipeProtoTest, UnknownJsonFieldIsRefusedByName) {
  v1::Recipe parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(
      R"({"bits": 4, "bitz": 3})", &parsed);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(std::string(status.message()).find("bitz"), std::string::npos);
}

}  // namespace
}  // namespace quant
