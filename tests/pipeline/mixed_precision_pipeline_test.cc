// Mixed precision end to end on stories260K: the selection pass runs in the
// first block task, every layer is packed at its group's chosen setting,
// what the checkpoint stores is exactly the cost the budget was met with,
// the audit says why each group got its setting, and the selection shared
// through the work directory is checked before it is trusted.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/synth/synth_checkpoint.h"
#include "core/base/file_util.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/audit_report.h"
#include "core/pipeline/local_pipeline.h"
#include "core/pipeline/mixed_precision_selection.h"
#include "core/pipeline/quantization_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pipeline/pipeline_fixture.h"

namespace quant {
namespace {

using nlohmann::json;
using testing::CountingObserver;
using ::testing::HasSubstr;
using testing::SmallRecipe;

class MixedPrecisionPipelineTest : public testing::SharedModelTest {
 protected:
  LocalQuantizeOptions Options(const Recipe& recipe, const std::string& name) {
    return testing::Stories260KOptions(recipe, temp_ + "/" + name);
  }

  // `recipe` with mixed_precision over 3, 4 and 8 bits at the average
  // uniform 4-bit stores (the comparison point).
  Recipe AtUniformFourBits(Recipe recipe) {
    MixedPrecision m;
    m.bits = {3, 4, 8};
    m.average_bits = 16;
    recipe.mixed_precision = m;
    auto checkpoint = Checkpoint::Open(testing::Stories260KDir());
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    if (!checkpoint.ok()) return recipe;
    const ModelConfig& config = (*checkpoint)->config();
    auto plan = PlanQuantization(config, recipe);
    EXPECT_TRUE(plan.ok()) << plan.status();
    auto selection = PlanMixedPrecision(config, recipe, *plan);
    EXPECT_TRUE(selection.ok()) << selection.status();
    // Where the format cannot store 4 bits, the group's cheapest setting.
    int64_t four = 0;
    for (const auto& g : selection->groups) {
      int64_t cost = g.candidates[0].cost_bits;
      for (const auto& c : g.candidates) {
        if (c.setting.bits == 4) cost = c.cost_bits;
      }
      four += cost;
    }
    recipe.mixed_precision->average_bits =
        static_cast<double>(four) /
        static_cast<double>(selection->quantized_weights);
    return recipe;
  }
};

// Bits the packed checkpoint stores for each quantized layer (every tensor
// under the layer's name but its bias).
std::map<std::string, int64_t> StoredBits(const std::string& dir,
                                          const std::set<std::string>& layers) {
  std::map<std::string, int64_t> bits;
  auto file = SafetensorsFile::Open(JoinPath(dir, "model.safetensors"));
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return bits;
  for (const TensorInfo& t : (*file)->tensors()) {
    const size_t dot = t.name.rfind('.');
    const std::string layer = t.name.substr(0, dot);
    if (layers.count(layer) == 0 || t.name.substr(dot) == ".bias") continue;
    bits[layer] += 8 * static_cast<int64_t>(t.ByteSize());
  }
  return bits;
}

TEST_F(MixedPrecisionPipelineTest, ChosenSettingsArePackedAuditedAndLoad) {
  // Per-row compressed-tensors stores every layer at every width. GPTQ v1
  // with groups of 32 cannot store stories260K's down_proj (K = 172) at
  // all, nor gate/up (N = 172) below 8 bits: those groups get only what
  // the format holds.
  struct Case {
    OutputFormat format;
    int group_size;
    Propagation propagation;
    size_t groups;
  };
  for (const Case& c :
       {Case{OutputFormat::kCompressedTensors, 0, Propagation::kSequential, 20},
        Case{OutputFormat::kGptq, 32, Propagation::kIndependent, 15}}) {
    const std::string name = OutputFormatName(c.format);
    SCOPED_TRACE(name);
    const Recipe recipe = AtUniformFourBits(
        SmallRecipe(QuantMethod::kGptq, c.group_size, c.format, c.propagation));
    auto result = RunLocalQuantization(Options(recipe, name));
    ASSERT_TRUE(result.ok()) << result.status();
    const json& audit = result->audit;
    ASSERT_TRUE(audit.contains("mixed_precision")) << audit.dump(1);
    auto selection = MixedPrecisionFromJson(audit["mixed_precision"]);
    ASSERT_TRUE(selection.ok()) << selection.status();
    ASSERT_EQ(selection->groups.size(), c.groups);
    EXPECT_LE(selection->chosen_bits, selection->budget_bits);
    EXPECT_GT(selection->probe_tokens, 0);

    // Every layer packed at its group's choice; the group's errors rise as
    // bits fall, and its sensitivity was measured.
    std::map<std::string, PrecisionCandidate> chosen;
    for (const SettingGroupSelection& g : selection->groups) {
      ASSERT_GE(g.chosen, 0);
      EXPECT_GT(g.sensitivity, 0.0) << g.layers[0];
      for (size_t i = 1; i < g.candidates.size(); ++i) {
        EXPECT_GT(g.candidates[i - 1].error, g.candidates[i].error)
            << g.layers[0];
      }
      if (c.format == OutputFormat::kGptq && g.group == InputGroup::kMlpIn) {
        ASSERT_EQ(g.candidates.size(), 1u);
        EXPECT_EQ(g.candidates[0].setting.bits, 8);
      } else {
        EXPECT_EQ(g.candidates.size(), 3u) << g.layers[0];
      }
      if (c.format == OutputFormat::kGptq) {
        EXPECT_NE(g.group, InputGroup::kMlpOut) << g.layers[0];
      }
      for (const std::string& layer : g.layers) {
        chosen[layer] = g.candidates[g.chosen].setting;
      }
    }
    std::set<std::string> packed;
    for (const json& layer : audit["layers"]) {
      const std::string layer_name = layer["name"];
      if (chosen.count(layer_name) == 0) {
        // Not chosen for: a layer the format cannot store, kept.
        EXPECT_FALSE(layer["packed"].get<bool>()) << layer_name;
        EXPECT_THAT(layer.value("reason", ""), HasSubstr("cannot hold it"));
        continue;
      }
      EXPECT_TRUE(layer["packed"].get<bool>())
          << layer_name << ": " << layer.value("reason", "");
      EXPECT_EQ(layer["bits"], chosen[layer_name].bits) << layer_name;
      EXPECT_EQ(layer["group_size"], chosen[layer_name].group_size);
      packed.insert(layer_name);
    }
    // What the checkpoint stores is the cost the budget was met with.
    int64_t stored = 0;
    for (const auto& [layer, bits] : StoredBits(temp_ + "/" + name, packed)) {
      stored += bits;
    }
    EXPECT_EQ(stored, selection->chosen_bits);

    // The audit table says what was chosen and why.
    ASSERT_TRUE(CheckAuditTableFields(audit).ok());
    const std::string table = FormatAuditTable(audit);
    EXPECT_THAT(table, HasSubstr("mixed precision: "));
    EXPECT_THAT(table, HasSubstr("block 4   mlp_in "));
    // The runtime check read the per-layer schemes back (a fused group with
    // mixed settings, or a scheme naming the wrong layer, would fail it).
    const json& runtime = audit["gates"]["runtime"];
    ASSERT_TRUE(runtime.is_array());
    for (const json& check : runtime) {
      if (check["runtime"] == "transformers" &&
          c.format == OutputFormat::kCompressedTensors) {
        EXPECT_TRUE(check["problems"].empty()) << check.dump(1);
      }
    }
  }
}

// keep_float: keeping a group unquantized is a candidate, costed at the
// source's dtype (stories260K is float32: 32 bits a weight), and the
// layers the solve keeps are written as they were.
TEST_F(MixedPrecisionPipelineTest, KeptGroupsAreCostedAsTheyAreStored) {
  Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  MixedPrecision m;
  m.bits = {3};
  m.keep_float = true;
  m.average_bits = 10;
  recipe.mixed_precision = m;
  auto result = RunLocalQuantization(Options(recipe, "kept"));
  ASSERT_TRUE(result.ok()) << result.status();
  auto selection = MixedPrecisionFromJson(result->audit["mixed_precision"]);
  ASSERT_TRUE(selection.ok()) << selection.status();
  std::set<std::string> kept, layers;
  for (const SettingGroupSelection& g : selection->groups) {
    ASSERT_EQ(g.candidates.size(), 2u);
    EXPECT_EQ(g.candidates[1].cost_bits, 32 * g.weights);
    EXPECT_EQ(g.candidates[1].error, 0.0);
    for (const std::string& layer : g.layers) {
      layers.insert(layer);
      if (g.candidates[g.chosen].setting.keep_float) kept.insert(layer);
    }
  }
  EXPECT_FALSE(kept.empty());
  EXPECT_LT(kept.size(), layers.size());
  for (const json& layer : result->audit["layers"]) {
    const std::string name = layer["name"];
    EXPECT_EQ(layer["packed"].get<bool>(), kept.count(name) == 0) << name;
    if (kept.count(name) > 0) {
      EXPECT_THAT(layer.value("reason", ""),
                  HasSubstr("mixed_precision chose to keep it"));
    }
  }
  int64_t stored = 0;
  for (const auto& [layer, bits] : StoredBits(temp_ + "/kept", layers)) {
    stored += bits;
  }
  EXPECT_EQ(stored, selection->chosen_bits);
  EXPECT_LE(selection->chosen_bits, selection->budget_bits);
}

TEST_F(MixedPrecisionPipelineTest, TheSharedSelectionIsReusedAndChecked) {
  const Recipe recipe = AtUniformFourBits(
      SmallRecipe(QuantMethod::kRtn, 32, OutputFormat::kCompressedTensors,
                  Propagation::kSequential));
  LocalQuantizeOptions options = Options(recipe, "first");
  options.work_dir = temp_ + "/work";
  CountingObserver first_observer;
  auto first = RunLocalQuantization(options, &first_observer);
  ASSERT_TRUE(first.ok()) << first.status();
  auto measured = [](const CountingObserver& o) {
    int n = 0;
    for (const std::string& s : o.stages) {
      n += s.find("mixed precision: block") != std::string::npos;
    }
    return n;
  };
  EXPECT_GT(measured(first_observer), 0);
  const std::string path = options.work_dir + "/mixed_precision.json";
  ASSERT_TRUE(FileExists(path));

  // A rerun on the same work directory reads the selection back.
  options.out_dir = temp_ + "/second";
  CountingObserver second_observer;
  auto second = RunLocalQuantization(options, &second_observer);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(measured(second_observer), 0);
  EXPECT_EQ(second->audit["mixed_precision"], first->audit["mixed_precision"]);

  // One that does not match the job's plan is refused, naming the file.
  auto text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  json tampered = json::parse(*text);
  tampered["groups"][3]["candidates"][0]["cost_bits"] = 1;
  ASSERT_TRUE(WriteFileAtomically(path, tampered.dump()).ok());
  options.out_dir = temp_ + "/third";
  auto third = RunLocalQuantization(options);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(third.status().message(), HasSubstr("mixed_precision.json"));
  EXPECT_FALSE(FileExists(options.out_dir));
}

// On a model every vLLM kernel takes (hidden 256, MLP 512: K % 128 and
// N % 64), a recipe gated on vLLM with a budget between 4 and 8 bits: the
// checkpoint mixes both, records them as each format's per-layer schemes
// under the names vLLM matches (the fused qkv_proj / gate_up_proj), and the
// conformance check finds it loads, in both formats.
TEST_F(MixedPrecisionPipelineTest, MixedCheckpointsLoadInVllm) {
  synth::SynthOptions synth;
  synth.out_dir = temp_ + "/synth";
  synth.vocab_from = testing::Stories260KDir();
  synth.hidden = 256;
  synth.intermediate = 512;
  synth.layers = 2;
  synth.heads = 4;
  synth.kv_heads = 2;
  synth.seed = 3;
  ASSERT_TRUE(synth::WriteSynthCheckpoint(synth).ok());
  for (OutputFormat format :
       {OutputFormat::kGptq, OutputFormat::kCompressedTensors}) {
    const std::string name = OutputFormatName(format);
    SCOPED_TRACE(name);
    Recipe recipe =
        SmallRecipe(QuantMethod::kGptq, 128, format, Propagation::kSequential);
    recipe.gates.runtime = "vllm";
    MixedPrecision m;
    m.bits = {4, 8};
    m.average_bits = 6.0;
    recipe.mixed_precision = m;
    LocalQuantizeOptions options = Options(recipe, name);
    options.checkpoint_dir = synth.out_dir;
    auto result = RunLocalQuantization(options);
    ASSERT_TRUE(result.ok()) << result.status();
    const json& audit = result->audit;
    auto selection = MixedPrecisionFromJson(audit["mixed_precision"]);
    ASSERT_TRUE(selection.ok()) << selection.status();
    std::set<int> bits;
    std::string eight_bit_layer;
    for (const auto& g : selection->groups) {
      const PrecisionCandidate& c = g.candidates[g.chosen].setting;
      bits.insert(c.bits);
      if (c.bits == 8 && eight_bit_layer.empty()) {
        eight_bit_layer = g.layers[0];
      }
    }
    EXPECT_EQ(bits, (std::set<int>{4, 8})) << audit["mixed_precision"];
    bool vllm_checked = false;
    for (const json& check : audit["gates"]["runtime"]) {
      if (check["runtime"] != "vllm") continue;
      vllm_checked = true;
      EXPECT_TRUE(check["loads"].get<bool>()) << check.dump(1);
      EXPECT_TRUE(check["problems"].empty()) << check.dump(1);
    }
    EXPECT_TRUE(vllm_checked);
    EXPECT_EQ(audit["verdict"], "PASS") << audit["gates"].dump(1);
    auto config_text = ReadFileToString(temp_ + "/" + name + "/config.json");
    ASSERT_TRUE(config_text.ok());
    const json q = json::parse(*config_text)["quantization_config"];
    if (format == OutputFormat::kGptq) {
      // An 8-bit group has a dynamic rule under the name vLLM matches (the
      // fused one for q/k/v and gate/up).
      ASSERT_FALSE(eight_bit_layer.empty());
      const size_t dot = eight_bit_layer.rfind('.');
      const auto type = LayerTypeFromName(eight_bit_layer.substr(dot + 1));
      ASSERT_TRUE(type.has_value()) << eight_bit_layer;
      std::string fused = "+:^" + eight_bit_layer.substr(0, dot + 1) +
                          std::string(FusedLayerName(*type)) + "$";
      for (size_t at = 0; (at = fused.find('.', at)) != std::string::npos;
           at += 2) {
        fused.replace(at, 1, "\\.");
      }
      ASSERT_TRUE(q["dynamic"].contains(fused))
          << fused << " " << q["dynamic"].dump(1);
      EXPECT_EQ(q["dynamic"][fused]["bits"], 8);
    } else {
      EXPECT_GE(q["config_groups"].size(), 2u) << q.dump(1);
    }
  }
}

}  // namespace
}  // namespace quant
