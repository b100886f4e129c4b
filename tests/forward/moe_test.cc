// The mixture-of-experts forward pass (Qwen3-MoE and Mixtral) on the tiny
// random checkpoints of tests/fixtures/forward, against the float64
// reference of generate_moe.py (transformers' Qwen3MoeSparseMoeBlock and
// MixtralSparseMoeBlock semantics): full-model logits, each MoE layer's
// token counts per expert, and one MoE MLP on its own.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/forward/block_forward.h"
#include "core/forward/llama_model.h"
#include "core/forward/moe_mlp.h"
#include "core/forward/rope.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::json;

// float32 forward vs float64 reference, as in families_test.
constexpr double kLogitTolerance = 1e-4;

struct MoeFixture {
  std::string dir;
  json expected;
  std::vector<int32_t> ids;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<LlamaModel> model;
};

void LoadFixture(const std::string& name, MoeFixture* fixture) {
  fixture->dir = testing::FixturesDir() + "/forward/" + name;
  auto text = ReadFileToString(fixture->dir + "/expected.json");
  ASSERT_TRUE(text.ok()) << text.status();
  fixture->expected = json::parse(*text);
  fixture->ids = fixture->expected.at("input_ids").get<std::vector<int32_t>>();
  auto checkpoint = Checkpoint::Open(fixture->dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE((*checkpoint)->unexpected_tensors().empty())
      << name << ": unexpected tensor "
      << (*checkpoint)->unexpected_tensors().front();
  fixture->checkpoint = std::move(*checkpoint);
  auto model = LlamaModel::Load(*fixture->checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();
  fixture->model = std::move(*model);
}

// Largest |got - reference| over the last positions stored under `key`.
double MaxLogitDifference(const MoeFixture& fixture, const RowMatrixF& logits,
                          const char* key) {
  const json& rows = fixture.expected.at(key);
  const int first = fixture.expected.at("first_logit_position").get<int>();
  double worst = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<double> row = rows[r].get<std::vector<double>>();
    EXPECT_EQ(static_cast<Eigen::Index>(row.size()), logits.cols());
    for (size_t c = 0; c < row.size(); ++c) {
      worst =
          std::max(worst, std::abs(logits(first + static_cast<Eigen::Index>(r),
                                          static_cast<Eigen::Index>(c)) -
                                   row[c]));
    }
  }
  return worst;
}

void ExpectLogitsMatch(const std::string& name) {
  MoeFixture fixture;
  ASSERT_NO_FATAL_FAILURE(LoadFixture(name, &fixture));
  auto logits = fixture.model->Forward({fixture.ids});
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_LT(MaxLogitDifference(fixture, *logits, "logits"), kLogitTolerance)
      << name;
  std::vector<int> argmax;
  for (Eigen::Index r = 0; r < logits->rows(); ++r) {
    Eigen::Index best;
    logits->row(r).maxCoeff(&best);
    argmax.push_back(static_cast<int>(best));
  }
  EXPECT_EQ(argmax, fixture.expected.at("argmax").get<std::vector<int>>())
      << name;
}

// Each MoE layer's tokens per expert, running the blocks stage by stage.
std::vector<std::vector<int64_t>> RoutedTokens(const MoeFixture& fixture) {
  const ModelConfig& config = fixture.model->config();
  const int seq_len = static_cast<int>(fixture.ids.size());
  const RopeTable rope(config, seq_len);
  auto embedded = fixture.model->Embed(fixture.ids);
  EXPECT_TRUE(embedded.ok()) << embedded.status();
  RowMatrixF hidden = *embedded;
  std::vector<std::vector<int64_t>> routed;
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    const BlockWeights& weights = fixture.model->block(b);
    if (weights.moe.has_value()) {
      const RowMatrixF attention_input =
          AttentionInput(config, weights, hidden);
      const RowMatrixF residual = AttentionResidual(
          weights, hidden,
          AttentionContext(config, weights, rope, seq_len, attention_input));
      MoeRouting routing;
      RunMoeMlp(*config.moe, *weights.moe, MlpInput(config, weights, residual),
                &routing);
      routed.push_back(routing.TokensPerExpert());
    }
    hidden = RunBlock(config, weights, rope, seq_len, hidden);
  }
  return routed;
}

TEST(MoeForwardTest, Qwen3MoeLogitsMatchTheReference) {
  ExpectLogitsMatch("qwen3_moe");
}

TEST(MoeForwardTest, MixtralLogitsMatchTheReference) {
  ExpectLogitsMatch("mixtral");
}

// The same experts receive the same tokens as in the reference, and under
// natural routing every token goes to exactly top-k experts.
TEST(MoeForwardTest, TokensReachTheSameExpertsAsInTheReference) {
  for (const char* name : {"qwen3_moe", "mixtral"}) {
    MoeFixture fixture;
    ASSERT_NO_FATAL_FAILURE(LoadFixture(name, &fixture));
    const std::vector<std::vector<int64_t>> routed = RoutedTokens(fixture);
    EXPECT_EQ(routed, fixture.expected.at("routed_tokens")
                          .get<std::vector<std::vector<int64_t>>>())
        << name;
    const int top_k = fixture.model->config().moe->experts_per_token;
    for (const std::vector<int64_t>& counts : routed) {
      EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}),
                top_k * static_cast<int64_t>(fixture.ids.size()))
          << name;
    }
  }
}

// One MoE MLP on the reference's input; with norm_topk_prob off, the
// output moves to the reference's unnormalised one, so a loader that
// ignored the flag would fail here and in the logits.
TEST(MoeForwardTest, MoeMlpMatchesTheReferenceWithAndWithoutNormTopkProb) {
  MoeFixture fixture;
  ASSERT_NO_FATAL_FAILURE(LoadFixture("qwen3_moe", &fixture));
  auto probe =
      SafetensorsFile::Open(fixture.dir + "/moe_mlp_probe.safetensors");
  ASSERT_TRUE(probe.ok()) << probe.status();
  auto read = [&](const char* tensor) {
    auto t = (*probe)->ReadFloat(tensor);
    EXPECT_TRUE(t.ok()) << t.status();
    return RowMatrixF(
        Eigen::Map<const RowMatrixF>(t->data.data(), t->shape[0], t->shape[1]));
  };
  const RowMatrixF input = read("input");
  const int layer = fixture.expected.at("moe_mlp_probe_layer").get<int>();
  const ModelConfig& config = fixture.model->config();
  ASSERT_TRUE(config.IsMoeBlock(layer));
  MoeConfig moe = *config.moe;
  ASSERT_TRUE(moe.norm_topk_prob);
  const MoeMlpWeights& weights = *fixture.model->block(layer).moe;
  const RowMatrixF normalised = RunMoeMlp(moe, weights, input);
  EXPECT_LT((normalised - read("output")).cwiseAbs().maxCoeff(), 1e-5);
  moe.norm_topk_prob = false;
  const RowMatrixF plain = RunMoeMlp(moe, weights, input);
  EXPECT_LT(
      (plain - read("output_without_norm_topk_prob")).cwiseAbs().maxCoeff(),
      1e-5);
  EXPECT_GT((plain - normalised).cwiseAbs().maxCoeff(), 0.05);

  auto logits = fixture.model->Forward({fixture.ids});
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_GT(
      MaxLogitDifference(fixture, *logits, "logits_without_norm_topk_prob"),
      0.5);
}

// The fixtures exercise what their names promise: a dense block between
// MoE blocks (mlp_only_layers), the Mixtral names, rare experts.
TEST(MoeForwardTest, FixturesExerciseTheirFeatures) {
  MoeFixture qwen;
  ASSERT_NO_FATAL_FAILURE(LoadFixture("qwen3_moe", &qwen));
  const ModelConfig& q = qwen.model->config();
  EXPECT_EQ(q.architecture, Architecture::kQwen3Moe);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_TRUE(q.IsMoeBlock(0));
  EXPECT_FALSE(q.IsMoeBlock(1));  // mlp_only_layers: [1]
  EXPECT_TRUE(q.IsMoeBlock(2));
  EXPECT_FALSE(qwen.model->block(1).moe.has_value());
  EXPECT_EQ(ListLinearLayers(q, 1).size(), 7u);
  EXPECT_EQ(ListLinearLayers(q, 0).size(), 4u);
  EXPECT_EQ(ListExpertLayers(q, 0).size(), 3u * 8);
  EXPECT_EQ(ListExpertLayers(q, 0)[0].name,
            "model.layers.0.mlp.experts.0.gate_proj");
  EXPECT_EQ(RouterName(q, 2), "model.layers.2.mlp.gate");

  MoeFixture mixtral;
  ASSERT_NO_FATAL_FAILURE(LoadFixture("mixtral", &mixtral));
  const ModelConfig& m = mixtral.model->config();
  EXPECT_EQ(m.architecture, Architecture::kMixtral);
  EXPECT_TRUE(m.moe->norm_topk_prob);
  EXPECT_EQ(m.moe->expert_intermediate_size, m.intermediate_size);
  const std::vector<LinearLayerSpec> experts = ListExpertLayers(m, 1);
  ASSERT_EQ(experts.size(), 3u * 6);
  EXPECT_EQ(experts[3].name, "model.layers.1.block_sparse_moe.experts.1.w1");
  EXPECT_EQ(experts[4].name, "model.layers.1.block_sparse_moe.experts.1.w3");
  EXPECT_EQ(experts[5].name, "model.layers.1.block_sparse_moe.experts.1.w2");
  EXPECT_EQ(experts[5].type, LayerType::kDownProj);
  EXPECT_EQ(experts[5].expert, 1);

  for (const MoeFixture* fixture : {&qwen, &mixtral}) {
    bool rare = false;
    for (const auto& counts : fixture->expected.at("routed_tokens")
                                  .get<std::vector<std::vector<int64_t>>>()) {
      for (int64_t c : counts) rare = rare || c <= 1;
    }
    EXPECT_TRUE(rare) << fixture->dir;
  }
}

// A missing expert tensor is refused when the checkpoint is opened, naming
// the tensor.
TEST(MoeForwardTest, MissingExpertTensorIsNamed) {
  const std::string dir = testing::MakeTempDir();
  const std::string source = testing::FixturesDir() + "/forward/mixtral";
  auto config = ReadFileToString(source + "/config.json");
  ASSERT_TRUE(config.ok());
  // One expert more than the file holds.
  json parsed = json::parse(*config);
  parsed["num_local_experts"] = 7;
  ASSERT_TRUE(WriteFileAtomically(dir + "/config.json", parsed.dump()).ok());
  auto weights = ReadFileToString(source + "/model.safetensors");
  ASSERT_TRUE(weights.ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/model.safetensors", *weights).ok());
  auto checkpoint = Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_NE(checkpoint.status().message().find(
                "model.layers.0.block_sparse_moe.gate.weight"),
            std::string::npos)
      << checkpoint.status();
  EXPECT_NE(checkpoint.status().message().find(
                "model.layers.0.block_sparse_moe.experts.6.w1.weight"),
            std::string::npos)
      << checkpoint.status();
}

}  // namespace
}  // namespace quant
