// The per-expert quantizer of a mixture-of-experts block on a small random
// block whose router leaves one expert rare: token counts per expert under
// natural and all_experts routing, each starved-expert policy, sequential
// down inputs, and results that do not depend on the thread count.
#include "core/pipeline/expert_quantizer.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/thread_pool.h"
#include "core/forward/moe_mlp.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

constexpr int kHidden = 32;
constexpr int kExperts = 4;
constexpr int kExpertInter = 16;
constexpr int kRareExpert = 3;

RowMatrixF Normal(std::mt19937& rng, int64_t rows, int64_t cols, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  RowMatrixF m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

struct MoeBlock {
  ModelConfig config;
  MoeMlpWeights weights;
  RowMatrixF calibration;
  RowMatrixF heldout;
};

// Rows share a positive component in dimension 0; the rare expert's router
// row weighs it strongly negative, so few tokens reach it.
MoeBlock MakeBlock(int64_t calibration_rows = 256) {
  std::mt19937 rng(7);
  MoeBlock b;
  b.config.architecture = Architecture::kQwen3Moe;
  b.config.hidden_size = kHidden;
  b.config.intermediate_size = 48;
  b.config.num_hidden_layers = 1;
  b.config.num_attention_heads = 4;
  b.config.num_key_value_heads = 4;
  b.config.head_dim = 8;
  b.config.moe.emplace();
  b.config.moe->num_experts = kExperts;
  b.config.moe->experts_per_token = 2;
  b.config.moe->expert_intermediate_size = kExpertInter;
  b.config.moe->norm_topk_prob = true;
  b.weights.router = Normal(rng, kExperts, kHidden, 0.3f);
  b.weights.router(kRareExpert, 0) = -3.0f;
  for (int e = 0; e < kExperts; ++e) {
    ExpertWeights expert;
    expert.gate.weight = Normal(rng, kExpertInter, kHidden, 0.2f);
    expert.up.weight = Normal(rng, kExpertInter, kHidden, 0.2f);
    expert.down.weight = Normal(rng, kHidden, kExpertInter, 0.2f);
    b.weights.experts.push_back(std::move(expert));
  }
  b.calibration = Normal(rng, calibration_rows, kHidden, 1.0f);
  b.heldout = Normal(rng, 128, kHidden, 1.0f);
  b.calibration.col(0).array() += 2.0f;
  b.heldout.col(0).array() += 2.0f;
  return b;
}

LayerSettings Gptq() {
  LayerSettings s;
  s.method = QuantMethod::kGptq;
  s.bits = 4;
  s.group_size = 16;
  s.grid = QuantGrid::kSym;
  s.damp.fraction = 0.01;
  return s;
}

struct ExpertRun {
  MoeBlock block;
  Recipe recipe;
  ExpertCalibrationPolicy policy;
  int threads = 1;
  LayerSettings settings = Gptq();

  absl::StatusOr<ExpertQuantization> Quantize() {
    recipe.group_size = 16;
    ThreadPool pool(threads);
    ExpertQuantizeInput input;
    input.config = &block.config;
    input.recipe = &recipe;
    input.block = 0;
    input.weights = &block.weights;
    for (LayerType type :
         {LayerType::kGateProj, LayerType::kUpProj, LayerType::kDownProj}) {
      input.settings[type] = settings;
    }
    input.policy = policy;
    input.calibration_rows = &block.calibration;
    input.heldout_rows = &block.heldout;
    input.pool = &pool;
    return QuantizeExperts(input);
  }
};

const LayerResult& Layer(const ExpertQuantization& q, int expert,
                         LayerType type) {
  for (const LayerResult& r : q.layers) {
    if (r.expert == expert && r.type == type) return r;
  }
  ADD_FAILURE() << "no layer for expert " << expert;
  return q.layers.front();
}

TEST(ExpertQuantizerTest, NaturalRoutingCountsAddUpToTopKTimesTokens) {
  ExpertRun run;
  run.block = MakeBlock();
  auto q = run.Quantize();
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->layers.size(), 3u * kExperts);
  // The router's own counts, computed independently of the quantizer.
  const std::vector<int64_t> routed =
      RouteTokens(*run.block.config.moe, run.block.weights.router,
                  run.block.calibration)
          .TokensPerExpert();
  EXPECT_EQ(q->routed_calibration_tokens, routed);
  int64_t total = 0;
  for (int e = 0; e < kExperts; ++e) {
    for (LayerType type :
         {LayerType::kGateProj, LayerType::kUpProj, LayerType::kDownProj}) {
      const LayerResult& r = Layer(*q, e, type);
      EXPECT_EQ(r.calibration_tokens, routed[e]) << r.name;
      EXPECT_EQ(r.heldout_tokens, q->routed_heldout_tokens[e]) << r.name;
      EXPECT_EQ(r.audit.hessian.tokens, routed[e]) << r.name;
      EXPECT_TRUE(r.quantized) << r.name;
      EXPECT_EQ(r.fallback, "") << r.name;
    }
    total += Layer(*q, e, LayerType::kGateProj).calibration_tokens;
  }
  EXPECT_EQ(total, 2 * run.block.calibration.rows());
  // The rare expert is rare, and still above zero.
  EXPECT_LT(routed[kRareExpert], run.block.calibration.rows() / 8);
  EXPECT_GT(routed[kRareExpert], 0);
  EXPECT_TRUE(q->starved_experts.empty());
  EXPECT_EQ(Layer(*q, 1, LayerType::kDownProj).name,
            "model.layers.0.mlp.experts.1.down_proj");
  // The effective weights are the quantized ones, and GPTQ beats RTN on
  // the calibration rows of a well-fed expert.
  const LayerResult& gate0 = Layer(*q, 0, LayerType::kGateProj);
  EXPECT_TRUE(
      q->effective.experts[0].gate.weight.isApprox(gate0.layer.dequantized));
  EXPECT_FALSE(q->effective.experts[0].gate.weight.isApprox(
      run.block.weights.experts[0].gate.weight));
  EXPECT_GT(gate0.audit.gain_calibration, 1.0);
}

TEST(ExpertQuantizerTest, AllExpertsRoutingFeedsEveryTokenToEveryExpert) {
  ExpertRun run;
  run.block = MakeBlock();
  run.policy.routing = ExpertRouting::kAllExperts;
  auto q = run.Quantize();
  ASSERT_TRUE(q.ok()) << q.status();
  for (const LayerResult& r : q->layers) {
    EXPECT_EQ(r.calibration_tokens, run.block.calibration.rows()) << r.name;
    // Audited on the tokens the expert serves.
    EXPECT_EQ(r.heldout_tokens, q->routed_heldout_tokens[r.expert]) << r.name;
  }
  // The statistics changed, so the rare expert's codes do too.
  ExpertRun natural;
  natural.block = MakeBlock();
  auto n = natural.Quantize();
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(
      Layer(*q, kRareExpert, LayerType::kGateProj)
          .layer.dequantized.isApprox(
              Layer(*n, kRareExpert, LayerType::kGateProj).layer.dequantized));
}

TEST(ExpertQuantizerTest, StarvedExpertsFollowThePolicy) {
  ExpertRun probe;
  probe.block = MakeBlock();
  const std::vector<int64_t> routed =
      RouteTokens(*probe.block.config.moe, probe.block.weights.router,
                  probe.block.calibration)
          .TokensPerExpert();
  const int64_t rare = routed[kRareExpert];
  // A threshold only the rare expert falls below.
  int64_t others = probe.block.calibration.rows();
  for (int e = 0; e < kExperts; ++e) {
    if (e != kRareExpert) others = std::min(others, routed[e]);
  }
  ASSERT_LT(rare, others);
  const int64_t threshold = rare + 1;

  ExpertRun rtn;
  rtn.block = MakeBlock();
  rtn.policy.min_tokens_per_expert = threshold;
  rtn.policy.on_starved_expert = StarvedExpertAction::kRtn;
  auto q = rtn.Quantize();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->starved_experts, std::vector<int>{kRareExpert});
  for (const LayerResult& r : q->layers) {
    if (r.expert == kRareExpert) {
      EXPECT_EQ(r.fallback, "rtn") << r.name;
      EXPECT_EQ(r.settings.method, QuantMethod::kRtn) << r.name;
      EXPECT_EQ(r.audit.method, "rtn") << r.name;
      EXPECT_THAT(r.fallback_reason,
                  HasSubstr(absl::StrCat("saw ", rare,
                                         " calibration tokens, fewer than "
                                         "moe.min_tokens_per_expert (",
                                         threshold, ")")));
      EXPECT_TRUE(r.quantized);
    } else {
      EXPECT_EQ(r.fallback, "") << r.name;
      EXPECT_EQ(r.settings.method, QuantMethod::kGptq) << r.name;
    }
  }

  ExpertRun damp;
  damp.block = MakeBlock();
  damp.policy.min_tokens_per_expert = threshold;
  damp.policy.on_starved_expert = StarvedExpertAction::kDamp;
  q = damp.Quantize();
  ASSERT_TRUE(q.ok()) << q.status();
  const LayerResult& gate = Layer(*q, kRareExpert, LayerType::kGateProj);
  EXPECT_EQ(gate.fallback, "damp");
  const double raised = std::min(
      1.0, 0.01 * static_cast<double>(threshold) / static_cast<double>(rare));
  EXPECT_DOUBLE_EQ(gate.settings.damp.fraction, raised);
  EXPECT_DOUBLE_EQ(gate.choices.damp_used, raised);
  EXPECT_EQ(gate.audit.method, "gptq");
  EXPECT_DOUBLE_EQ(Layer(*q, 0, LayerType::kGateProj).choices.damp_used, 0.01);

  ExpertRun fail;
  fail.block = MakeBlock();
  fail.policy.min_tokens_per_expert = threshold;
  fail.policy.on_starved_expert = StarvedExpertAction::kFail;
  q = fail.Quantize();
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(q.status().message(),
              HasSubstr(absl::StrCat("block 0 expert ", kRareExpert,
                                     ": its layers saw ", rare,
                                     " calibration tokens")));
}

// An expert no token reaches has no statistics for GPTQ: rounded to
// nearest even when the policy says damp.
TEST(ExpertQuantizerTest, ExpertWithNoTokenIsRoundedToNearest) {
  ExpertRun run;
  run.block = MakeBlock(64);
  // Every row's dimension 0 positive, weighed -100 by the rare expert.
  run.block.weights.router(kRareExpert, 0) = -100.0f;
  for (RowMatrixF* rows : {&run.block.calibration, &run.block.heldout}) {
    rows->col(0) = rows->col(0).cwiseAbs().array() + 1.0f;
  }
  run.policy.on_starved_expert = StarvedExpertAction::kDamp;
  auto q = run.Quantize();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->routed_calibration_tokens[kRareExpert], 0);
  EXPECT_EQ(q->starved_experts, std::vector<int>{kRareExpert});
  const LayerResult& down = Layer(*q, kRareExpert, LayerType::kDownProj);
  EXPECT_EQ(down.fallback, "rtn");
  EXPECT_THAT(down.fallback_reason, HasSubstr("saw no calibration token"));
  EXPECT_TRUE(down.quantized);
  EXPECT_EQ(down.calibration_tokens, 0);
}

// Under sequential propagation down is calibrated on the quantized gate
// and up; under independent on the original ones: different statistics.
TEST(ExpertQuantizerTest, SequentialDownSeesTheQuantizedGateAndUp) {
  ExpertRun sequential;
  sequential.block = MakeBlock();
  auto s = sequential.Quantize();
  ExpertRun independent;
  independent.block = MakeBlock();
  independent.recipe.propagation = Propagation::kIndependent;
  auto i = independent.Quantize();
  ASSERT_TRUE(s.ok() && i.ok());
  EXPECT_TRUE(Layer(*s, 0, LayerType::kGateProj)
                  .layer.dequantized.isApprox(
                      Layer(*i, 0, LayerType::kGateProj).layer.dequantized));
  EXPECT_NE(
      Layer(*s, 0, LayerType::kDownProj).audit.rtn_calibration.output_mse,
      Layer(*i, 0, LayerType::kDownProj).audit.rtn_calibration.output_mse);
}

TEST(ExpertQuantizerTest, ResultsDoNotDependOnTheThreadCount) {
  ExpertRun one;
  one.block = MakeBlock();
  ExpertRun two;
  two.block = MakeBlock();
  two.threads = 2;
  auto a = one.Quantize();
  auto b = two.Quantize();
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->layers.size(); ++i) {
    EXPECT_EQ(a->layers[i].layer.codes, b->layers[i].layer.codes)
        << a->layers[i].name;
    EXPECT_EQ(a->layers[i].layer.scales, b->layers[i].layer.scales)
        << a->layers[i].name;
  }
}

TEST(ExpertQuantizerTest, FewRowsAuditTheSameAsTheirHessian) {
  // Experts keep their rows while they have at most K: the audit's errors
  // come from X instead of XᵀX, the same numbers for less work.
  std::mt19937 rng(11);
  const int64_t k = 64;
  const RowMatrixF weight = Normal(rng, 32, k, 0.1f);
  const RowMatrixF calibration = Normal(rng, 40, k, 1.0f);
  const RowMatrixF heldout = Normal(rng, 30, k, 1.0f);
  Recipe recipe;
  recipe.group_size = 16;
  GroupQuantizeOptions options;
  options.recipe = &recipe;
  const std::vector<GroupLayerInput> layers = {{"layer", Gptq(), weight}};
  GroupActivationStatistics hessian(k, layers, options);
  GroupActivationStatistics rows(k, layers, options);
  rows.KeepFewRows();
  for (GroupActivationStatistics* s : {&hessian, &rows}) {
    ASSERT_TRUE(s->AddCalibration(calibration.topRows(25)).ok());
    ASSERT_TRUE(s->AddCalibration(calibration.bottomRows(15)).ok());
    ASSERT_TRUE(s->AddHeldout(heldout).ok());
  }
  EXPECT_EQ(hessian.calibration_rows(), nullptr);
  ASSERT_NE(rows.calibration_rows(), nullptr);
  EXPECT_EQ(*rows.calibration_rows(), calibration);
  ASSERT_NE(rows.heldout_rows(), nullptr);
  EXPECT_EQ(*rows.heldout_rows(), heldout);

  absl::StatusOr<QuantizedGroup> a =
      QuantizeLayerGroup(layers, hessian, options);
  absl::StatusOr<QuantizedGroup> b = QuantizeLayerGroup(layers, rows, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  // The same quantization (it reads H either way), the same audit.
  EXPECT_EQ(a->layers[0].layer.dequantized, b->layers[0].layer.dequantized);
  const LayerAudit& x = a->layers[0].audit;
  const LayerAudit& y = b->layers[0].audit;
  for (const auto& [p, q] : {std::pair{x.method_heldout, y.method_heldout},
                             {x.method_calibration, y.method_calibration},
                             {x.rtn_heldout, y.rtn_heldout},
                             {x.rtn_calibration, y.rtn_calibration}}) {
    EXPECT_GT(p.relative_error, 0.0);
    EXPECT_NEAR(q.relative_error, p.relative_error, 1e-5 * p.relative_error);
    EXPECT_NEAR(q.output_mse, p.output_mse, 1e-5 * p.output_mse);
  }
  EXPECT_EQ(x.rank_deficient, y.rank_deficient);

  // More than K rows: none kept, the Hessian serves.
  GroupActivationStatistics many(k, layers, options);
  many.KeepFewRows();
  ASSERT_TRUE(many.AddCalibration(calibration).ok());
  ASSERT_TRUE(many.AddCalibration(calibration).ok());
  EXPECT_EQ(many.calibration_rows(), nullptr);
  ASSERT_NE(many.heldout_rows(), nullptr);
  EXPECT_EQ(many.heldout_rows()->rows(), 0);
}

TEST(ExpertQuantizerTest, BadInputsAreNamed) {
  ExpertRun run;
  run.block = MakeBlock();
  run.block.weights.experts.pop_back();
  auto q = run.Quantize();
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.status().message(), HasSubstr("has 3 experts"));

  ExpertRun awq;
  awq.block = MakeBlock();
  awq.settings.method = QuantMethod::kAwq;
  q = awq.Quantize();
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(q.status().message(),
              HasSubstr("method awq is not supported for experts"));

  ExpertRun dense;
  dense.block = MakeBlock();
  dense.block.config.moe.reset();
  q = dense.Quantize();
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.status().message(), HasSubstr("not a mixture of experts"));
}

}  // namespace
}  // namespace quant
