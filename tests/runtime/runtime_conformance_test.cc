// The runtime conformance check against published checkpoints' configs
// (tests/fixtures/runtime) with tensor headers laid out as each format
// stores them, and against the ways a checkpoint fails to load in vLLM:
// fused layers whose parts disagree, dynamic rules vLLM never applies,
// kernels that cannot take a shape, missing and left-over tensors.
#include "core/runtime/runtime_conformance.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Fixture {
  json config;
  ModelConfig model;
};

Fixture Load(const std::string& name) {
  auto text = ReadFileToString(
      absl::StrCat(testing::FixturesDir(), "/runtime/", name), size_t{1} << 20);
  EXPECT_TRUE(text.ok()) << text.status();
  Fixture f;
  f.config = json::parse(text.value_or("{}"));
  auto model = ParseModelConfig(text.value_or("{}"));
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) f.model = *model;
  return f;
}

// A layer's setting as a writer stored it; bits 0: plain float weight.
struct Stored {
  int bits = 4;
  int64_t group_size = 128;  // -1: per row.
  bool symmetric = true;
  bool act_order = false;
};

int64_t GroupsOf(const Stored& s, int64_t k) {
  return s.group_size > 0 ? k / s.group_size : 1;
}

// GPTQ v1: qweight [K*b/32, N], qzeros [G, N*b/32], scales [G, N], g_idx.
void StoreGptq(const LinearLayerSpec& l, const Stored& s, TensorHeaders* t) {
  const int64_t n = l.out_features, k = l.in_features, g = GroupsOf(s, k);
  if (s.bits == 0) {
    (*t)[l.name + ".weight"] = {DType::kF16, {n, k}};
    return;
  }
  (*t)[l.name + ".qweight"] = {DType::kI32, {k * s.bits / 32, n}};
  (*t)[l.name + ".qzeros"] = {DType::kI32, {g, n * s.bits / 32}};
  (*t)[l.name + ".scales"] = {DType::kF16, {g, n}};
  (*t)[l.name + ".g_idx"] = {DType::kI32, {k}};
}

// compressed-tensors pack-quantized.
void StoreCompressed(const LinearLayerSpec& l, const Stored& s,
                     TensorHeaders* t) {
  const int64_t n = l.out_features, k = l.in_features, g = GroupsOf(s, k);
  if (s.bits == 0) {
    (*t)[l.name + ".weight"] = {DType::kBF16, {n, k}};
    return;
  }
  (*t)[l.name + ".weight_packed"] = {DType::kI32, {n, k * s.bits / 32}};
  (*t)[l.name + ".weight_scale"] = {DType::kBF16, {n, g}};
  (*t)[l.name + ".weight_shape"] = {DType::kI64, {2}};
  if (!s.symmetric) {
    (*t)[l.name + ".weight_zero_point"] = {DType::kI32, {n * s.bits / 32, g}};
  }
  if (s.act_order) (*t)[l.name + ".weight_g_idx"] = {DType::kI32, {k}};
}

TensorHeaders AllGptq(const ModelConfig& model, const Stored& s) {
  TensorHeaders t;
  for (const LinearLayerSpec& l : ListAllLinearLayers(model)) {
    StoreGptq(l, s, &t);
  }
  return t;
}

TensorHeaders AllCompressed(const ModelConfig& model, const Stored& s) {
  TensorHeaders t;
  for (const LinearLayerSpec& l : ListAllLinearLayers(model)) {
    StoreCompressed(l, s, &t);
  }
  return t;
}

RuntimeCheckOptions Vllm(int capability) {
  RuntimeCheckOptions o;
  o.compute_capability = capability;
  return o;
}

TEST(RuntimeConformanceTest, PublishedLlama2GptqRunsOnMarlinOrMachete) {
  const Fixture f = Load("llama2_7b_gptq.json");
  const TensorHeaders tensors = AllGptq(f.model, {4, 128, true, false});
  RuntimeCheck a100 =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_TRUE(a100.loads()) << FormatRuntimeCheck(a100);
  EXPECT_EQ(a100.method, "gptq_marlin");
  EXPECT_EQ(a100.activation_dtype, "float16");
  // q/k/v and gate/up fused: 4 layers a block.
  ASSERT_EQ(a100.layers.size(), 32u * 4);
  EXPECT_EQ(a100.layers[0].name, "model.layers.0.self_attn.qkv_proj");
  EXPECT_EQ(a100.layers[0].out_features, 3 * 4096);
  EXPECT_EQ(a100.layers[2].name, "model.layers.0.mlp.gate_up_proj");
  EXPECT_TRUE(a100.layers[0].act_order);  // desc_act: true, g_idx used.
  for (const RuntimeLayerCheck& l : a100.layers) {
    EXPECT_EQ(l.kernel, "marlin") << l.name;
  }
  RuntimeCheck h100 =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(90));
  EXPECT_TRUE(h100.loads()) << FormatRuntimeCheck(h100);
  for (const RuntimeLayerCheck& l : h100.layers) {
    EXPECT_EQ(l.kernel, "machete") << l.name;
  }
  RuntimeCheck hf = CheckRuntimeConformance(f.config, f.model, tensors,
                                            {TargetRuntime::kTransformers, 0});
  EXPECT_TRUE(hf.loads()) << FormatRuntimeCheck(hf);
  EXPECT_EQ(hf.layers.size(), 32u * 7);
}

TEST(RuntimeConformanceTest, PublishedLlama31CompressedTensorsW4A16Loads) {
  const Fixture f = Load("llama31_8b_w4a16.json");
  const TensorHeaders tensors = AllCompressed(f.model, {4, 128, true, false});
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_TRUE(check.loads()) << FormatRuntimeCheck(check);
  EXPECT_EQ(check.method, "compressed-tensors");
  EXPECT_EQ(check.activation_dtype, "bfloat16");
  EXPECT_EQ(check.layers[0].out_features, 4096 + 2 * 1024);
  EXPECT_EQ(check.layers[0].kernel, "marlin");
  const json j = RuntimeCheckToJson(check);
  EXPECT_EQ(j["kernels"]["marlin"], 32 * 4);
  EXPECT_EQ(j["loads"], true);
}

TEST(RuntimeConformanceTest, GptqModelReadmeDynamicRulesSplitFusedLayers) {
  // GPTQModel applies the rules per module: block 18's gate_proj at group
  // 32, 19's at 8 bits, 20's skipped, every down_proj skipped; up_proj
  // keeps the base setting.
  const Fixture f = Load("gptqmodel_dynamic.json");
  TensorHeaders tensors;
  for (const LinearLayerSpec& l : ListAllLinearLayers(f.model)) {
    Stored s{4, 128, true, false};
    if (l.type == LayerType::kDownProj) s.bits = 0;
    if (l.type == LayerType::kGateProj && l.block == 18) s.group_size = 32;
    if (l.type == LayerType::kGateProj && l.block == 19) s = {8, 64};
    if (l.type == LayerType::kGateProj && l.block == 20) s.bits = 0;
    StoreGptq(l, s, &tensors);
  }
  RuntimeCheck hf = CheckRuntimeConformance(f.config, f.model, tensors,
                                            {TargetRuntime::kTransformers, 0});
  EXPECT_TRUE(hf.loads()) << FormatRuntimeCheck(hf);

  // vLLM matches "gate" against the fused gate_up_proj: blocks 18 and 19
  // read up_proj with gate's setting, block 20 is half quantized.
  RuntimeCheck vllm =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_FALSE(vllm.loads());
  std::vector<std::string> failing;
  for (const RuntimeLayerCheck& l : vllm.layers) {
    if (!l.problems.empty()) failing.push_back(l.name);
  }
  EXPECT_THAT(failing, ElementsAre("model.layers.18.mlp.gate_up_proj",
                                   "model.layers.19.mlp.gate_up_proj",
                                   "model.layers.20.mlp.gate_up_proj"));
  const RuntimeLayerCheck& l18 = vllm.layers[18 * 4 + 2];
  EXPECT_EQ(l18.group_size, 32);
  EXPECT_THAT(l18.problems,
              Contains(HasSubstr("model.layers.18.mlp.up_proj.scales has "
                                 "shape [4, 1024]; the loader wants "
                                 "[16, 1024]")));
  EXPECT_THAT(vllm.layers[20 * 4 + 2].problems,
              ElementsAre(HasSubstr("Detected some but not all shards of "
                                    "model.layers.20.mlp.gate_up_proj")));
  // Skipped down_proj layers load unquantized.
  EXPECT_EQ(vllm.layers[3].kernel, "unquantized");
}

TEST(RuntimeConformanceTest, DynamicRuleForOnePartIsNeverAppliedByVllm) {
  // What a writer of literal per-module rules produces for q_proj at 8
  // bits: vLLM matches the rule against qkv_proj, so it never applies.
  Fixture f = Load("llama2_7b_gptq.json");
  f.config["quantization_config"]["dynamic"] = {
      {"+:^model\\.layers\\.0\\.self_attn\\.q_proj$",
       {{"bits", 8}, {"group_size", 128}}}};
  TensorHeaders tensors = AllGptq(f.model, {4, 128, true, false});
  StoreGptq(ListLinearLayers(f.model, 0)[0], {8, 128}, &tensors);
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  ASSERT_FALSE(check.loads());
  EXPECT_THAT(check.layers[0].problems,
              Contains(HasSubstr("matches model.layers.0.self_attn.q_proj "
                                 "but not model.layers.0.self_attn."
                                 "qkv_proj")));
  EXPECT_THAT(check.layers[0].problems,
              Contains(HasSubstr("q_proj.qweight has shape [1024, 4096]; "
                                 "the loader wants [512, 4096]")));
  EXPECT_TRUE(check.layers[0].kernel.empty());
  for (size_t i = 1; i < check.layers.size(); ++i) {
    EXPECT_THAT(check.layers[i].problems, IsEmpty()) << check.layers[i].name;
  }
  // transformers reads q_proj on its own: the rule applies there.
  RuntimeCheck hf = CheckRuntimeConformance(f.config, f.model, tensors,
                                            {TargetRuntime::kTransformers, 0});
  EXPECT_TRUE(hf.loads()) << FormatRuntimeCheck(hf);
}

TEST(RuntimeConformanceTest, IgnoringOnePartOfAFusedLayerFails) {
  Fixture f = Load("llama31_8b_w4a16.json");
  f.config["quantization_config"]["ignore"].push_back(
      "model.layers.3.self_attn.k_proj");
  TensorHeaders tensors = AllCompressed(f.model, {4, 128, true, false});
  StoreCompressed(ListLinearLayers(f.model, 3)[1], {0}, &tensors);
  // Drop the packed tensors the plain weight replaces.
  for (const char* s : {".weight_packed", ".weight_scale", ".weight_shape"}) {
    tensors.erase(absl::StrCat("model.layers.3.self_attn.k_proj", s));
  }
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  ASSERT_FALSE(check.loads());
  EXPECT_THAT(check.AllProblems(),
              ElementsAre(HasSubstr(
                  "model.layers.3.self_attn.qkv_proj: Found a different "
                  "quantization schemes for [model.layers.3.self_attn.q_proj, "
                  "model.layers.3.self_attn.k_proj, "
                  "model.layers.3.self_attn.v_proj]")));
}

TEST(RuntimeConformanceTest, ConfigGroupForFusedPartsIsShadowedByLinear) {
  // A group of exact part names at 8 bits next to the catch-all "Linear":
  // vLLM matches qkv_proj's class name to "Linear" first.
  Fixture f = Load("llama31_8b_w4a16.json");
  json& groups = f.config["quantization_config"]["config_groups"];
  groups["group_1"] = groups["group_0"];
  groups["group_1"]["weights"]["num_bits"] = 8;
  groups["group_1"]["targets"] = {
      "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
      "model.layers.0.self_attn.v_proj", "model.layers.0.self_attn.o_proj"};
  TensorHeaders tensors = AllCompressed(f.model, {4, 128, true, false});
  for (int i : {0, 1, 2, 3}) {
    StoreCompressed(ListLinearLayers(f.model, 0)[i], {8, 128}, &tensors);
  }
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  ASSERT_FALSE(check.loads());
  EXPECT_THAT(check.layers[0].problems,
              Contains(HasSubstr("is in config group group_1 (8 bits, group "
                                 "128, sym) but vLLM reads all of "
                                 "model.layers.0.self_attn.qkv_proj with "
                                 "group group_0")));
  // o_proj is matched by its own name: 8 bits, loads.
  EXPECT_EQ(check.layers[1].bits, 8);
  EXPECT_THAT(check.layers[1].problems, IsEmpty());
}

TEST(RuntimeConformanceTest, KernelsRefuseSmallOrOddShapes) {
  // stories260K-like: hidden 64, so K = 64 for q/k/v/gate/up.
  auto model = ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 1,
    "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,
    "max_position_embeddings": 512, "torch_dtype": "float32"})");
  ASSERT_TRUE(model.ok()) << model.status();
  json config = {{"quantization_config",
                  {{"quant_method", "gptq"},
                   {"bits", 4},
                   {"group_size", 32},
                   {"desc_act", false},
                   {"sym", true}}}};
  const TensorHeaders tensors = AllGptq(*model, {4, 32, true, false});
  RuntimeCheck check = CheckRuntimeConformance(config, *model, tensors);
  // float32 runs as float16; K = 64 is too narrow for Marlin, Exllama
  // takes it. down_proj (K = 256, N = 64) fits Marlin.
  EXPECT_TRUE(check.loads()) << FormatRuntimeCheck(check);
  EXPECT_EQ(check.layers[0].kernel, "exllama");
  EXPECT_EQ(check.layers[3].kernel, "marlin");

  // bfloat16 takes Exllama away: nothing can run K = 64.
  model->torch_dtype = "bfloat16";
  check = CheckRuntimeConformance(config, *model, tensors);
  ASSERT_FALSE(check.loads());
  EXPECT_THAT(check.layers[0].problems,
              ElementsAre(HasSubstr(
                  "Failed to find a kernel that can implement the WNA16 "
                  "linear layer")));
  EXPECT_THAT(check.layers[0].problems[0],
              HasSubstr("marlin: input_size_per_partition = 64 is not "
                        "divisible by min_thread_k = 128"));
  EXPECT_EQ(check.layers[3].kernel, "marlin");

  // Asymmetric 4-bit GPTQ is not gptq_marlin: the legacy method, float16
  // only.
  config["quantization_config"]["sym"] = false;
  check = CheckRuntimeConformance(config, *model,
                                  AllGptq(*model, {4, 32, false, false}));
  EXPECT_EQ(check.method, "gptq");
  EXPECT_THAT(check.problems,
              ElementsAre(HasSubstr("torch.bfloat16 is not supported for "
                                    "quantization method gptq")));
}

TEST(RuntimeConformanceTest, MissingAndLeftOverTensorsAreNamed) {
  Fixture f = Load("llama31_8b_w4a16.json");
  TensorHeaders tensors = AllCompressed(f.model, {4, 128, true, false});
  tensors.erase("model.layers.5.mlp.down_proj.weight_scale");
  // A zero point the symmetric scheme has no parameter for.
  tensors["model.layers.6.self_attn.o_proj.weight_zero_point"] = {DType::kI32,
                                                                  {512, 32}};
  tensors["model.layers.7.mlp.up_proj.weight_packed"].dtype = DType::kI64;
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_THAT(
      check.AllProblems(),
      ElementsAre(
          "model.layers.5.mlp.down_proj: model.layers.5.mlp.down_proj."
          "weight_scale is missing",
          HasSubstr("model.layers.6.self_attn.o_proj.weight_zero_point is "
                    "stored but the loader has no parameter for it"),
          "model.layers.7.mlp.gate_up_proj: model.layers.7.mlp.up_proj."
          "weight_packed is I64; the loader wants I32"));
}

TEST(RuntimeConformanceTest, ConfigsRuntimesRefuse) {
  Fixture f = Load("llama2_7b_gptq.json");
  const TensorHeaders tensors = AllGptq(f.model, {4, 128, true, false});
  json config = f.config;
  config["quantization_config"].erase("desc_act");
  EXPECT_THAT(CheckRuntimeConformance(config, f.model, tensors).problems,
              ElementsAre("Cannot find any of ['desc_act'] in the model's "
                          "quantization config."));
  config = f.config;
  config["quantization_config"]["damp_percent"] = 0;
  EXPECT_THAT(CheckRuntimeConformance(config, f.model, tensors,
                                      {TargetRuntime::kTransformers, 0})
                  .problems,
              ElementsAre(HasSubstr("damp_percent must between 0 and 1")));
  config = f.config;
  config["quantization_config"]["quant_method"] = "awq";
  EXPECT_FALSE(CheckRuntimeConformance(config, f.model, tensors).loads());
  // No quantization_config: every layer a plain weight.
  config = f.config;
  config.erase("quantization_config");
  TensorHeaders plain;
  for (const LinearLayerSpec& l : ListAllLinearLayers(f.model)) {
    StoreGptq(l, {0}, &plain);
  }
  RuntimeCheck none = CheckRuntimeConformance(config, f.model, plain);
  EXPECT_TRUE(none.loads()) << FormatRuntimeCheck(none);
  EXPECT_EQ(none.method, "none");
  EXPECT_FALSE(CheckRuntimeConformance(config, f.model, tensors).loads());
}

// Every expert's layers and the router of every mixture-of-experts block,
// stored as `experts` and `router` say.
void StoreMoe(const ModelConfig& model, const Stored& experts,
              const Stored& router, bool compressed, TensorHeaders* t) {
  for (int b = 0; b < model.num_hidden_layers; ++b) {
    if (!model.IsMoeBlock(b)) continue;
    LinearLayerSpec r;
    r.name = RouterName(model, b);
    r.out_features = model.moe->num_experts;
    r.in_features = model.hidden_size;
    compressed ? StoreCompressed(r, router, t) : StoreGptq(r, router, t);
    for (const LinearLayerSpec& l : ListExpertLayers(model, b)) {
      compressed ? StoreCompressed(l, experts, t) : StoreGptq(l, experts, t);
    }
  }
}

// A small qwen3_moe config (2 blocks, 4 experts) with `quantization`.
Fixture SmallMoe(int64_t hidden, int64_t moe_intermediate,
                 const json& quantization) {
  json config = {{"architectures", {"Qwen3MoeForCausalLM"}},
                 {"model_type", "qwen3_moe"},
                 {"hidden_size", hidden},
                 {"intermediate_size", 4 * hidden},
                 {"moe_intermediate_size", moe_intermediate},
                 {"num_attention_heads", 4},
                 {"num_key_value_heads", 4},
                 {"head_dim", hidden / 4},
                 {"num_hidden_layers", 2},
                 {"num_experts", 4},
                 {"num_experts_per_tok", 2},
                 {"norm_topk_prob", true},
                 {"vocab_size", 512},
                 {"max_position_embeddings", 256},
                 {"rms_norm_eps", 1e-6},
                 {"torch_dtype", "float16"},
                 {"quantization_config", quantization}};
  Fixture f;
  f.config = config;
  auto model = ParseModelConfig(config.dump());
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) f.model = *model;
  return f;
}

json GptqConfig(int bits, int64_t group, bool sym, bool desc_act) {
  return {{"quant_method", "gptq"}, {"bits", bits},
          {"group_size", group},    {"sym", sym},
          {"desc_act", desc_act},   {"checkpoint_format", "gptq"}};
}

// vLLM's check of SmallMoe(hidden, moe_intermediate) under a GPTQ config of
// `stored`'s setting, every layer but the routers stored so.
RuntimeCheck CheckSmallGptqMoe(int64_t hidden, int64_t moe_intermediate,
                               const Stored& stored) {
  const Fixture f = SmallMoe(hidden, moe_intermediate,
                             GptqConfig(stored.bits, stored.group_size,
                                        stored.symmetric, stored.act_order));
  TensorHeaders tensors = AllGptq(f.model, stored);
  StoreMoe(f.model, stored, {0}, false, &tensors);
  return CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
}

TEST(RuntimeConformanceTest, Qwen3MoeExpertsRunOnTheFusedMoeMarlinKernel) {
  const Fixture f = Load("qwen3_30b_a3b_gptq.json");
  TensorHeaders tensors = AllGptq(f.model, {4, 128, true, false});
  StoreMoe(f.model, {4, 128, true, false}, {0}, false, &tensors);
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_TRUE(check.loads()) << FormatRuntimeCheck(check);
  EXPECT_EQ(check.method, "gptq_marlin");
  // Per block: qkv_proj, o_proj, the router, the experts as one layer.
  ASSERT_EQ(check.layers.size(), 48u * 4);
  const json j = RuntimeCheckToJson(check);
  EXPECT_EQ(j["kernels"]["marlin_moe"], 48);
  EXPECT_EQ(j["kernels"]["unquantized"], 48);
  const RuntimeLayerCheck* experts = nullptr;
  for (const RuntimeLayerCheck& l : check.layers) {
    if (l.name == "model.layers.7.mlp.experts") experts = &l;
  }
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->parts.size(), 128u * 3);
  EXPECT_EQ(experts->parts[0], "model.layers.7.mlp.experts.0.gate_proj");
  EXPECT_EQ(experts->out_features, 2 * 768);
  EXPECT_EQ(experts->in_features, 2048);
  EXPECT_EQ(experts->bits, 4);
  EXPECT_EQ(experts->group_size, 128);

  // transformers loads every expert as a module of its own.
  RuntimeCheck hf = CheckRuntimeConformance(f.config, f.model, tensors,
                                            {TargetRuntime::kTransformers, 0});
  EXPECT_TRUE(hf.loads()) << FormatRuntimeCheck(hf);
  EXPECT_EQ(hf.layers.size(), 48u * (4 + 1 + 128 * 3));

  // One expert's scales missing: named, on the fused layer.
  tensors.erase("model.layers.3.mlp.experts.77.down_proj.scales");
  EXPECT_THAT(CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80))
                  .AllProblems(),
              ElementsAre("model.layers.3.mlp.experts: model.layers.3.mlp."
                          "experts.77.down_proj.scales is missing"));
}

TEST(RuntimeConformanceTest, QuantizedRouterHasNoParameterInVllm) {
  // vLLM builds the router with quant_config=None, whatever the rules say.
  Fixture f = Load("qwen3_30b_a3b_gptq.json");
  f.config["quantization_config"].erase("dynamic");
  TensorHeaders tensors = AllGptq(f.model, {4, 128, true, false});
  StoreMoe(f.model, {4, 128, true, false}, {4, 128, true, false}, false,
           &tensors);
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_FALSE(check.loads());
  const RuntimeLayerCheck& router = check.layers[2];
  ASSERT_EQ(router.name, "model.layers.0.mlp.gate");
  EXPECT_FALSE(router.quantized);
  EXPECT_THAT(router.problems,
              Contains("model.layers.0.mlp.gate.weight is missing"));
  EXPECT_THAT(router.problems,
              Contains(HasSubstr("model.layers.0.mlp.gate.qweight is stored "
                                 "but the loader has no parameter")));
}

TEST(RuntimeConformanceTest, ExpertsTheMoeMarlinKernelCannotTakeUseMoeWna16) {
  // moe_intermediate 96 is no multiple of 128: MoeWNA16, whose group halves
  // from 128 to 32 to divide it. o_proj and qkv_proj fit Marlin.
  RuntimeCheck check = CheckSmallGptqMoe(256, 96, {4, 128, true, false});
  EXPECT_TRUE(check.loads()) << FormatRuntimeCheck(check);
  EXPECT_EQ(check.layers[3].name, "model.layers.0.mlp.experts");
  EXPECT_EQ(check.layers[3].kernel, "moe_wna16");

  // Act-order: MoeWNA16 skips g_idx.
  check = CheckSmallGptqMoe(256, 96, {4, 128, true, true});
  EXPECT_THAT(check.layers[3].problems,
              ElementsAre(HasSubstr("MoeWNA16 skips g_idx")));
  EXPECT_EQ(check.layers[3].kernel, "");

  // A group no halving >= 32 fits: hidden 256, moe intermediate 48.
  check = CheckSmallGptqMoe(256, 48, {4, 128, true, false});
  EXPECT_THAT(check.layers[3].problems,
              Contains(HasSubstr("asserts it stays >= 32")));

  // Per-row scales with experts Marlin cannot take.
  check = CheckSmallGptqMoe(256, 96, {4, -1, true, false});
  EXPECT_THAT(check.layers[3].problems,
              Contains(HasSubstr("MoeWNA16 needs a group size")));
}

TEST(RuntimeConformanceTest, KeptExpertsNeedARuleTheMethodApplies) {
  // gptq_marlin applies a "-:" rule on the experts module: plain experts.
  json q = GptqConfig(4, 128, true, false);
  q["dynamic"] = {{"-:.*\\.mlp\\.gate$", json::object()},
                  {"-:model\\.layers\\.1\\.mlp\\.experts", json::object()}};
  Fixture f = SmallMoe(256, 128, q);
  TensorHeaders tensors = AllGptq(f.model, {4, 128, true, false});
  StoreMoe(f.model, {4, 128, true, false}, {0}, false, &tensors);
  for (const LinearLayerSpec& l : ListExpertLayers(f.model, 1)) {
    for (const char* suffix : {".qweight", ".qzeros", ".scales", ".g_idx"}) {
      tensors.erase(l.name + suffix);
    }
    StoreGptq(l, {0}, &tensors);
  }
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_TRUE(check.loads()) << FormatRuntimeCheck(check);
  EXPECT_EQ(check.layers[3].kernel, "marlin_moe");
  EXPECT_EQ(check.layers[7].name, "model.layers.1.mlp.experts");
  EXPECT_EQ(check.layers[7].kernel, "unquantized");

  // The legacy gptq method (asymmetric config) builds MoeWNA16 with no
  // rules and sym forced true.
  q["sym"] = false;
  f = SmallMoe(256, 128, q);
  check = CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_EQ(check.method, "gptq");
  EXPECT_THAT(check.layers[7].problems,
              Contains(HasSubstr("never applies dynamic rules")));
  EXPECT_THAT(check.layers[3].problems,
              Contains(HasSubstr("zero points would be ignored")));
}

TEST(RuntimeConformanceTest, CompressedTensorsExpertsTakeTheLinearScheme) {
  json q = {{"quant_method", "compressed-tensors"},
            {"format", "pack-quantized"},
            {"ignore", {"re:.*mlp\\.gate$", "lm_head"}},
            {"config_groups",
             {{"group_0",
               {{"targets", {"Linear"}},
                {"weights",
                 {{"num_bits", 4},
                  {"group_size", 128},
                  {"strategy", "group"},
                  {"symmetric", true},
                  {"type", "int"}}}}}}}};
  Fixture f = SmallMoe(256, 128, q);
  TensorHeaders tensors = AllCompressed(f.model, {4, 128, true, false});
  StoreMoe(f.model, {4, 128, true, false}, {0}, true, &tensors);
  RuntimeCheck check =
      CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_TRUE(check.loads()) << FormatRuntimeCheck(check);
  EXPECT_EQ(check.layers[3].kernel, "marlin_moe");

  // Experts Marlin cannot take go to the Triton WNA16 method, which
  // refuses group act-order.
  q["config_groups"]["group_0"]["weights"]["actorder"] = "group";
  f = SmallMoe(256, 96, q);
  tensors = AllCompressed(f.model, {4, 128, true, true});
  StoreMoe(f.model, {4, 128, true, true}, {0}, true, &tensors);
  check = CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_THAT(check.layers[3].problems,
              ElementsAre("WNA16MoE is not supported with "
                          "actorder=group/dynamic."));

  // Targets naming the experts' layers but no "Linear": vLLM finds no
  // scheme for the FusedMoE layer.
  q["config_groups"]["group_0"]["weights"].erase("actorder");
  q["config_groups"]["group_0"]["targets"] = {"re:.*_proj$",
                                              "re:.*experts\\.\\d+\\..*"};
  f = SmallMoe(256, 128, q);
  tensors = AllCompressed(f.model, {4, 128, true, false});
  StoreMoe(f.model, {4, 128, true, false}, {0}, true, &tensors);
  check = CheckRuntimeConformance(f.config, f.model, tensors, Vllm(80));
  EXPECT_THAT(check.layers[3].problems,
              ElementsAre(HasSubstr("targeting \"Linear\", and no group")));
}

TEST(RuntimeConformanceTest, RuntimeNames) {
  EXPECT_EQ(TargetRuntimeFromName("vllm"), TargetRuntime::kVllm);
  EXPECT_EQ(TargetRuntimeFromName("transformers"),
            TargetRuntime::kTransformers);
  EXPECT_EQ(TargetRuntimeFromName("sglang"), std::nullopt);
  EXPECT_STREQ(TargetRuntimeName(TargetRuntime::kVllm), "vllm");
}

}  // namespace
}  // namespace quant
