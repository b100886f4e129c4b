// audit.json's layer and gate objects parse, key for key, into the API's
// LayerAudit and GateReport messages (no unknown field allowed), so
// `quantctl report --json` and audit.json stay the same document.
#include <string>

#include "core/pipeline/audit_report.h"
#include "core/pipeline/gates.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "quant/v1/audit.pb.h"

namespace quant {
namespace {

absl::Status ParseStrict(const nlohmann::json& j,
                         google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(j.dump(), message, options);
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(std::string(status.message()));
}

LayerResult QuantizedLayerResult(QuantMethod method) {
  LayerResult l;
  l.name = "model.layers.0.self_attn.q_proj";
  l.type = LayerType::kQProj;
  l.input_group = InputGroup::kAttnIn;
  l.settings.method = method;
  l.quantized = true;
  l.audit.method_heldout.relative_error = 0.03;
  l.audit.rtn_heldout.relative_error = 0.04;
  l.audit.gain_heldout = 1.7;
  l.audit.hessian.tokens = 1000;
  l.audit.overfit = true;
  l.choices.damp_used = 0.01;
  l.choices.damp_grid = {0.001, 0.01};
  l.choices.damp_validation_error = {2.0, 1.0};
  if (method == QuantMethod::kAwq) {
    l.choices.awq_alpha = 0.25f;
    l.awq_fold = "input_layernorm";
  }
  return l;
}

TEST(AuditContractTest, EveryAuditJsonLayerParsesIntoLayerAudit) {
  LayerResult kept;
  kept.name = "model.layers.0.mlp.down_proj";
  kept.type = LayerType::kDownProj;
  kept.input_group = InputGroup::kMlpOut;
  kept.reason = "format gptq cannot hold it: K=172";
  kept.awq_fold = "shares the input scaled into up_proj";
  LayerResult producer = QuantizedLayerResult(QuantMethod::kGptq);
  producer.absorbed_awq_scales_of = "down_proj";
  for (const LayerResult& layer :
       {QuantizedLayerResult(QuantMethod::kGptq),
        QuantizedLayerResult(QuantMethod::kAwq), kept, producer}) {
    const nlohmann::json j = LayerResultToJson(layer);
    v1::LayerAudit message;
    const absl::Status status = ParseStrict(j, &message);
    ASSERT_TRUE(status.ok()) << status << "\n" << j.dump(2);
    EXPECT_EQ(message.name(), layer.name);
    EXPECT_EQ(message.packed(), layer.quantized);
    if (layer.quantized) {
      EXPECT_DOUBLE_EQ(message.rel_output_error_heldout(), 0.03);
      EXPECT_DOUBLE_EQ(message.rtn_rel_output_error_heldout(), 0.04);
      EXPECT_EQ(message.hessian().tokens(), 1000);
      ASSERT_EQ(message.flags_size(), 1);
      EXPECT_EQ(message.flags(0), "overfit");
    } else {
      EXPECT_EQ(message.reason(), layer.reason);
    }
  }
  const nlohmann::json awq =
      LayerResultToJson(QuantizedLayerResult(QuantMethod::kAwq));
  v1::LayerAudit message;
  ASSERT_TRUE(ParseStrict(awq, &message).ok());
  EXPECT_DOUBLE_EQ(message.awq().alpha(), 0.25);
  EXPECT_EQ(message.awq().fold(), "input_layernorm");
}

TEST(AuditContractTest, GateJsonParsesIntoGateReport) {
  GateReport report;
  report.metrics.quantized_ppl = 6.2;
  report.metrics.reference_ppl = 5.7;
  report.metrics.tokens = 100;
  report.checks.push_back({"max_ppl_ratio", 1.05, 1.09, false});
  report.passed = false;
  v1::GateReport message;
  const absl::Status status = ParseStrict(GateReportToJson(report), &message);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_DOUBLE_EQ(message.perplexity(), 6.2);
  EXPECT_EQ(message.tokens(), 100);
  ASSERT_EQ(message.checks_size(), 1);
  EXPECT_FALSE(message.checks(0).passed());
  EXPECT_EQ(message.verdict(), "FAIL");
}

}  // namespace
}  // namespace quant
