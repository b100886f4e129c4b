// The forward pass on tiny random checkpoints of the paths stories260K does
// not exercise (llama3 rope scaling, attention biases, qwen2 q/k/v biases,
// qwen3 q_norm/k_norm with head_dim != hidden / heads, mistral's sliding
// window, grouped-query attention, tied and untied lm_head), against float64
// logits computed by tests/fixtures/forward/generate_families.py from the
// Hugging Face modelling semantics.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/forward/llama_model.h"
#include "core/forward/rope.h"
#include "core/model/checkpoint.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::json;

// float32 forward vs float64 reference on logits of magnitude <= ~20.
constexpr double kLogitTolerance = 1e-4;

struct Fixture {
  ModelConfig config;
  json expected;
  std::vector<int32_t> ids;
  RowMatrixF logits;  // C++ forward over `ids`.
};

// Loads tests/fixtures/forward/`name` and runs the forward pass on its ids.
void RunFixture(const std::string& name, Fixture* fixture) {
  const std::string dir = testing::FixturesDir() + "/forward/" + name;
  auto text = ReadFileToString(dir + "/expected.json");
  ASSERT_TRUE(text.ok()) << text.status();
  fixture->expected = json::parse(*text);
  auto checkpoint = Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE((*checkpoint)->unexpected_tensors().empty())
      << name << ": unexpected tensor "
      << (*checkpoint)->unexpected_tensors().front();
  auto model = LlamaModel::Load(**checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();
  fixture->config = (*model)->config();
  fixture->ids = fixture->expected.at("input_ids").get<std::vector<int32_t>>();
  auto logits = (*model)->Forward({fixture->ids});
  ASSERT_TRUE(logits.ok()) << logits.status();
  fixture->logits = std::move(*logits);
  ASSERT_EQ(fixture->logits.rows(),
            static_cast<Eigen::Index>(fixture->ids.size()));
  ASSERT_EQ(fixture->logits.cols(), fixture->config.vocab_size);
}

// Largest |C++ logit - reference| over the positions stored under `key`.
double MaxDifference(const Fixture& fixture, const char* key) {
  const json& rows = fixture.expected.at(key);
  const int first = fixture.expected.at("first_logit_position").get<int>();
  EXPECT_EQ(first + static_cast<int>(rows.size()),
            static_cast<int>(fixture.ids.size()));
  double worst = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<double> row = rows[r].get<std::vector<double>>();
    EXPECT_EQ(static_cast<Eigen::Index>(row.size()), fixture.logits.cols());
    for (size_t c = 0; c < row.size(); ++c) {
      const double got = fixture.logits(first + static_cast<Eigen::Index>(r),
                                        static_cast<Eigen::Index>(c));
      worst = std::max(worst, std::abs(got - row[c]));
    }
  }
  return worst;
}

std::vector<int> ArgMaxes(const RowMatrixF& logits) {
  std::vector<int> out;
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    Eigen::Index best;
    logits.row(r).maxCoeff(&best);
    out.push_back(static_cast<int>(best));
  }
  return out;
}

void ExpectMatchesReference(const std::string& name) {
  Fixture fixture;
  ASSERT_NO_FATAL_FAILURE(RunFixture(name, &fixture));
  EXPECT_LT(MaxDifference(fixture, "logits"), kLogitTolerance) << name;
  EXPECT_EQ(ArgMaxes(fixture.logits),
            fixture.expected.at("argmax").get<std::vector<int>>())
      << name;
}

TEST(FamiliesTest, Llama3RopeScalingGqaUntiedWithBiases) {
  ExpectMatchesReference("llama3_scaled");
}

TEST(FamiliesTest, Qwen2QkvBiasGqaTied) {
  ExpectMatchesReference("qwen2_bias");
}

TEST(FamiliesTest, Qwen3QkNormWideHeadsGqaTied) {
  ExpectMatchesReference("qwen3_qknorm");
}

TEST(FamiliesTest, MistralSlidingWindowGqaUntied) {
  ExpectMatchesReference("mistral_window");
}

// A loader that recorded sliding_window but attended over every earlier
// position (as this one once did) is caught: full attention's reference
// logits are far from the windowed ones.
TEST(FamiliesTest, MistralOutputDependsOnSlidingWindow) {
  Fixture fixture;
  ASSERT_NO_FATAL_FAILURE(RunFixture("mistral_window", &fixture));
  ASSERT_EQ(fixture.config.sliding_window, 5);
  EXPECT_GT(MaxDifference(fixture, "logits_without_sliding_window"), 0.5);
  EXPECT_LT(MaxDifference(fixture, "logits"), kLogitTolerance);
}

// The fixtures exercise what their names promise, so a loader that ignored a
// field would not pass by accident.
TEST(FamiliesTest, FixturesExerciseTheirFeatures) {
  Fixture llama;
  ASSERT_NO_FATAL_FAILURE(RunFixture("llama3_scaled", &llama));
  ASSERT_TRUE(llama.config.rope_scaling.has_value());
  EXPECT_FALSE(llama.config.tie_word_embeddings);
  EXPECT_TRUE(llama.config.attention_bias);
  EXPECT_TRUE(llama.config.o_proj_bias);
  EXPECT_LT(llama.config.num_key_value_heads, llama.config.num_attention_heads);
  EXPECT_GT(llama.config.num_key_value_heads, 1);

  Fixture qwen2;
  ASSERT_NO_FATAL_FAILURE(RunFixture("qwen2_bias", &qwen2));
  EXPECT_EQ(qwen2.config.architecture, Architecture::kQwen2);
  EXPECT_TRUE(qwen2.config.attention_bias);
  EXPECT_FALSE(qwen2.config.o_proj_bias);
  EXPECT_TRUE(qwen2.config.tie_word_embeddings);

  Fixture qwen3;
  ASSERT_NO_FATAL_FAILURE(RunFixture("qwen3_qknorm", &qwen3));
  EXPECT_EQ(qwen3.config.architecture, Architecture::kQwen3);
  EXPECT_TRUE(qwen3.config.qk_norm);
  EXPECT_TRUE(qwen3.config.tie_word_embeddings);
  EXPECT_NE(qwen3.config.head_dim,
            qwen3.config.hidden_size / qwen3.config.num_attention_heads);
}

// Ignoring rope_scaling must be caught: the reference logits without scaling
// are far from the scaled ones, and the C++ output is close only to the
// latter.
TEST(FamiliesTest, Llama3OutputDependsOnRopeScaling) {
  Fixture fixture;
  ASSERT_NO_FATAL_FAILURE(RunFixture("llama3_scaled", &fixture));
  EXPECT_GT(MaxDifference(fixture, "logits_without_rope_scaling"), 0.5);
  EXPECT_LT(MaxDifference(fixture, "logits"), kLogitTolerance);
}

// One rotary frequency in each band: high kept, medium blended, low divided
// by the factor, as in transformers' _compute_llama3_parameters.
TEST(FamiliesTest, Llama3InverseFrequenciesMatchReference) {
  Fixture fixture;
  ASSERT_NO_FATAL_FAILURE(RunFixture("llama3_scaled", &fixture));
  const RopeTable rope(fixture.config, 4);
  const std::vector<double> expected =
      fixture.expected.at("inverse_frequencies").get<std::vector<double>>();
  const std::vector<double>& got = rope.inverse_frequencies();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // float32 tables: relative error ~1e-7.
    EXPECT_NEAR(got[i], expected[i], 1e-6 * expected[i]) << "frequency " << i;
  }
  // Unscaled: 1, 0.1, 0.01, 0.001. High band kept, low bands divided by 8.
  EXPECT_NEAR(got[0], 1.0, 1e-6);
  EXPECT_NEAR(got[2], 0.01 / 8, 1e-9);
  EXPECT_NEAR(got[3], 0.001 / 8, 1e-10);
  EXPECT_GT(got[1], 0.1 / 8 * 1.01);  // Medium band: strictly between.
  EXPECT_LT(got[1], 0.1 * 0.99);
}

}  // namespace
}  // namespace quant
