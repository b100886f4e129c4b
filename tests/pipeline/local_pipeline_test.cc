// The whole local pipeline on stories260K: the packed checkpoint, its audit
// and manifest, the gates evaluated on the checkpoint read back from disk,
// the audit's numbers reproduced from the unpacked weights by the
// independent unpacker, both propagation modes, determinism, sharding, and
// errors that leave nothing behind.
#include "core/pipeline/local_pipeline.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/eval/evaluate.h"
#include "core/forward/activation_capture.h"
#include "core/io/safetensors.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/task_io.h"
#include "core/quant/output_error.h"
#include "core/report/report_html.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pack/reference_unpacker.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::json;
using testing::CountingObserver;
using testing::SmallRecipe;

json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return json::parse(text.ok() ? *text : "null", nullptr, false);
}

// The audit without wall-clock times, for determinism checks.
json WithoutTimes(json audit) {
  for (json& layer : audit["layers"]) layer.erase("seconds");
  return audit;
}

class LocalPipelineTest : public testing::SharedModelTest {
 protected:
  LocalQuantizeOptions Options(const Recipe& recipe, const std::string& name) {
    return testing::Stories260KOptions(recipe, temp_ + "/" + name);
  }
};

TEST_F(LocalPipelineTest, GptqCheckpointReproducesItsAuditAndGates) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 16, 128);
  const LocalQuantizeOptions options = Options(recipe, "gptq");
  auto result = RunLocalQuantization(options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string out = options.out_dir;

  // The directory a runtime loads, and nothing left beside it.
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json",
                           "tokenizer_config.json", "audit.json",
                           "manifest.json", "report.html"}) {
    EXPECT_TRUE(FileExists(out + "/" + name)) << name;
  }
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(temp_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1) << "a temporary directory was left in " << temp_;
  const json config = ReadJson(out + "/config.json");
  EXPECT_EQ(config["quantization_config"]["quant_method"],
            "compressed-tensors");

  const json audit = ReadJson(out + "/audit.json");
  EXPECT_EQ(audit, result->audit);
  ASSERT_EQ(audit["layers"].size(), 35u);
  int quantized = 0, better = 0;
  for (const json& layer : audit["layers"]) {
    ASSERT_TRUE(layer["packed"].get<bool>()) << layer["name"];
    ++quantized;
    better += layer["rel_output_error_heldout"].get<double>() <
              layer["rtn_rel_output_error_heldout"].get<double>();
  }
  EXPECT_GT(better, quantized / 2) << "GPTQ beat RTN on " << better << " of "
                                   << quantized << " layers (held-out)";

  // Manifest: every other file's hash, the recipe, the calibration hash.
  const json manifest = ReadJson(out + "/manifest.json");
  EXPECT_EQ(manifest, result->manifest);
  std::set<std::string> listed;
  std::vector<std::string> in_order;
  for (const json& f : manifest["output"]["files"]) {
    const std::string name = f["name"];
    listed.insert(name);
    in_order.push_back(name);
    auto sha = Sha256File(out + "/" + name);
    ASSERT_TRUE(sha.ok());
    EXPECT_EQ(f["sha256"], *sha) << name;
    EXPECT_EQ(
        f["bytes"].get<int64_t>(),
        static_cast<int64_t>(std::filesystem::file_size(out + "/" + name)))
        << name;
  }
  // In name order, report.html too (its entry joins the list last).
  EXPECT_TRUE(std::is_sorted(in_order.begin(), in_order.end()));
  EXPECT_TRUE(listed.count("model.safetensors"));
  EXPECT_TRUE(listed.count("audit.json"));
  EXPECT_TRUE(listed.count("report.html"));
  EXPECT_FALSE(listed.count("manifest.json"));
  // The page is the one `quantctl report --html` renders from the two
  // published files.
  auto rendered = report::RenderReportHtml(audit, manifest);
  ASSERT_TRUE(rendered.ok()) << rendered.status();
  EXPECT_EQ(*rendered, testing::ReadOrEmpty(out + "/report.html"));
  auto calibration_sha = Sha256File(testing::TinyStoriesPath());
  ASSERT_TRUE(calibration_sha.ok());
  EXPECT_EQ(manifest["calibration"]["sha256"], *calibration_sha);
  EXPECT_EQ(manifest["recipe"], json::parse(RecipeToJson(recipe)));
  EXPECT_EQ(manifest["source"]["fingerprint"].get<std::string>().size(), 64u);
  EXPECT_EQ(manifest["output"]["verdict"], audit["verdict"]);

  // The gates: the checkpoint read back from disk, on the held-out windows.
  auto loaded = testing::LoadStories260K(recipe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  CheckpointOptions packed_options;
  packed_options.allow_packed = true;
  auto packed = Checkpoint::Open(out, packed_options);
  ASSERT_TRUE(packed.ok()) << packed.status();
  auto packed_model = LlamaModel::Load(**packed);
  ASSERT_TRUE(packed_model.ok()) << packed_model.status();
  auto metrics = EvaluateWindows(**packed_model, loaded->model.get(),
                                 loaded->split.heldout);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_DOUBLE_EQ(metrics->quantized_ppl,
                   audit["gates"]["perplexity"].get<double>());
  EXPECT_DOUBLE_EQ(metrics->mean_kl, audit["gates"]["mean_kl"].get<double>());
  EXPECT_GT(metrics->mean_kl, 0.0);

  // The independent unpacker's weights give the audit's held-out errors:
  // block 0's q/k/v see the unquantized model's activations.
  auto file = SafetensorsFile::Open(out + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  const testing::StoredTensors stored = testing::ReadAllTensors(**file);
  const std::vector<LinearLayerSpec> specs =
      ListLinearLayers(loaded->model->config(), 0);
  for (int i = 0; i < 3; ++i) {
    const LinearLayerSpec& spec = specs[i];
    auto unpacked = testing::UnpackCompressedTensors(stored, spec.name, 4,
                                                     /*symmetric=*/true, 0);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    const RowMatrixF q = Eigen::Map<const RowMatrixF>(
        unpacked->weight.data(), unpacked->rows, unpacked->cols);
    auto x = CaptureLayerInputs(*loaded->model, spec, loaded->split.heldout);
    ASSERT_TRUE(x.ok()) << x.status();
    auto evaluator = OutputErrorEvaluator::FromActivations(*x);
    ASSERT_TRUE(evaluator.ok());
    const RowMatrixF& w = loaded->model->block(0).Linear(spec.type).weight;
    const double expected =
        audit["layers"][i]["rel_output_error_heldout"].get<double>();
    EXPECT_NEAR(evaluator->RelativeError(w, q), expected, 1e-6 * expected)
        << spec.name;
  }
}

TEST_F(LocalPipelineTest, BothPropagationsRunAndRerunsAreByteIdentical) {
  Recipe recipe = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                              Propagation::kSequential);
  recipe.act_order = true;
  auto first = RunLocalQuantization(Options(recipe, "seq1"));
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RunLocalQuantization(Options(recipe, "seq2"));
  ASSERT_TRUE(second.ok()) << second.status();
  for (const char* name : {"model.safetensors", "config.json",
                           "quantize_config.json", "tokenizer.json"}) {
    auto a = ReadFileToString(temp_ + "/seq1/" + name);
    auto b = ReadFileToString(temp_ + "/seq2/" + name);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_TRUE(*a == *b) << name << " differs between identical runs";
  }
  EXPECT_EQ(WithoutTimes(first->audit), WithoutTimes(second->audit));
  const json quantize_config = ReadJson(temp_ + "/seq1/quantize_config.json");
  EXPECT_EQ(quantize_config["bits"], 4);
  EXPECT_EQ(quantize_config["group_size"], 32);
  EXPECT_EQ(quantize_config["desc_act"], true);

  recipe.propagation = Propagation::kIndependent;
  auto independent = RunLocalQuantization(Options(recipe, "ind"));
  ASSERT_TRUE(independent.ok()) << independent.status();
  const json& seq_layers = first->audit["layers"];
  const json& ind_layers = independent->audit["layers"];
  ASSERT_EQ(seq_layers.size(), ind_layers.size());
  // Block 0's q/k/v read the embeddings either way; block 1's do not.
  EXPECT_EQ(seq_layers[0]["rel_output_error_heldout"],
            ind_layers[0]["rel_output_error_heldout"]);
  EXPECT_NE(seq_layers[7]["rel_output_error_heldout"],
            ind_layers[7]["rel_output_error_heldout"]);
  const json config = ReadJson(temp_ + "/ind/quantize_config.json");
  EXPECT_EQ(config["true_sequential"], false);
}

TEST_F(LocalPipelineTest, WorkDirectoryGivesTheSameOutputAndResumes) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  auto in_memory = RunLocalQuantization(Options(recipe, "memory"));
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();

  LocalQuantizeOptions options = Options(recipe, "files");
  options.work_dir = temp_ + "/work";
  CountingObserver first;
  auto through_files = RunLocalQuantization(options, &first);
  ASSERT_TRUE(through_files.ok()) << through_files.status();
  EXPECT_EQ(first.computed, 5);
  EXPECT_EQ(first.resumed, 0);
  auto a = ReadFileToString(temp_ + "/memory/model.safetensors");
  auto b = ReadFileToString(temp_ + "/files/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b) << "the file round trip changed the checkpoint";
  EXPECT_EQ(WithoutTimes(in_memory->audit), WithoutTimes(through_files->audit));

  // As after a crash in block 3: its files and block 4's are gone.
  for (int block : {3, 4}) {
    const std::string prefix = BlockOutputPrefix(options.work_dir, block);
    std::filesystem::remove(prefix + ".layers.json");
  }
  options.out_dir = temp_ + "/resumed";
  CountingObserver second;
  auto resumed = RunLocalQuantization(options, &second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(second.resumed, 3);
  EXPECT_EQ(second.computed, 2);
  auto c = ReadFileToString(temp_ + "/resumed/model.safetensors");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(*a == *c) << "resuming changed the checkpoint";

  // Another recipe cannot reuse the directory.
  Recipe other = recipe;
  other.bits = 8;
  LocalQuantizeOptions wrong = Options(other, "wrong");
  wrong.work_dir = options.work_dir;
  auto refused = RunLocalQuantization(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(FileExists(wrong.out_dir));
}

// Over the activation bound the states between blocks stay in files (spill
// files in a folder beside the output, removed at the end; or the work
// directory's block outputs) and the checkpoint is the same. 40 windows of
// 64 tokens make two chunks.
TEST_F(LocalPipelineTest, SpilledActivationsGiveTheSameCheckpoint) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kAwq, 32, OutputFormat::kGptq,
                  Propagation::kSequential, /*samples=*/40, /*seq_len=*/64);
  auto in_memory = RunLocalQuantization(Options(recipe, "memory"));
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  const std::string expected =
      *ReadFileToString(temp_ + "/memory/model.safetensors");

  LocalQuantizeOptions spill = Options(recipe, "spilled");
  spill.max_activation_bytes = 0;
  CountingObserver observer;
  auto spilled = RunLocalQuantization(spill, &observer);
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  int spill_stages = 0;
  for (const std::string& stage : observer.stages) {
    spill_stages += stage.find("kept in files under " + temp_ +
                               "/spilled.activations-") != std::string::npos;
  }
  EXPECT_EQ(spill_stages, 1) << ::testing::PrintToString(observer.stages);
  EXPECT_TRUE(*ReadFileToString(temp_ + "/spilled/model.safetensors") ==
              expected);
  EXPECT_EQ(WithoutTimes(in_memory->audit), WithoutTimes(spilled->audit));
  // Only the two outputs are left: the spill folder went.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(temp_)) {
    EXPECT_EQ(e.path().filename().string().find(".activations"),
              std::string::npos)
        << e.path();
    ++entries;
  }
  EXPECT_EQ(entries, 2);

  LocalQuantizeOptions work = Options(recipe, "work-spilled");
  work.max_activation_bytes = 0;
  work.work_dir = temp_ + "/work";
  auto through_work = RunLocalQuantization(work);
  ASSERT_TRUE(through_work.ok()) << through_work.status();
  EXPECT_TRUE(*ReadFileToString(temp_ + "/work-spilled/model.safetensors") ==
              expected);
  EXPECT_TRUE(
      FileExists(BlockOutputPrefix(work.work_dir, 4) + ".cal.safetensors"));
}

// Block tasks and the gates' evaluation on 3 threads: the same checkpoint,
// audit and gate metrics as on one.
TEST_F(LocalPipelineTest, ThreadsGiveTheSameCheckpoint) {
  Recipe gptq =
      SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                  Propagation::kSequential, /*samples=*/40, /*seq_len=*/64);
  gptq.damp.automatic = true;
  const Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent, /*samples=*/40, /*seq_len=*/64);
  for (const Recipe* recipe : std::vector<const Recipe*>{&gptq, &awq}) {
    const std::string name = QuantMethodName(recipe->method);
    SCOPED_TRACE(name);
    LocalQuantizeOptions one = Options(*recipe, name + "-1");
    one.threads = 1;
    auto single = RunLocalQuantization(one);
    ASSERT_TRUE(single.ok()) << single.status();
    LocalQuantizeOptions three = Options(*recipe, name + "-3");
    three.threads = 3;
    auto threaded = RunLocalQuantization(three);
    ASSERT_TRUE(threaded.ok()) << threaded.status();
    EXPECT_TRUE(
        *ReadFileToString(temp_ + "/" + name + "-1/model.safetensors") ==
        *ReadFileToString(temp_ + "/" + name + "-3/model.safetensors"));
    EXPECT_EQ(WithoutTimes(single->audit), WithoutTimes(threaded->audit));
    EXPECT_EQ(single->audit["gates"], threaded->audit["gates"]);
  }
}

TEST_F(LocalPipelineTest, EveryMethodRecordsHeldOutErrorsPerLayer) {
  for (QuantMethod method : {QuantMethod::kRtn, QuantMethod::kAwq}) {
    const Recipe recipe = SmallRecipe(
        method, 0, OutputFormat::kCompressedTensors, Propagation::kSequential);
    auto result = RunLocalQuantization(
        Options(recipe, std::string("m-") + QuantMethodName(method)));
    ASSERT_TRUE(result.ok()) << result.status();
    for (const json& layer : result->audit["layers"]) {
      ASSERT_TRUE(layer["packed"].get<bool>());
      EXPECT_EQ(layer["method"], QuantMethodName(method));
      EXPECT_GT(layer["rel_output_error_heldout"].get<double>(), 0.0);
      EXPECT_GT(layer["rtn_rel_output_error_heldout"].get<double>(), 0.0);
      if (method == QuantMethod::kAwq) {
        EXPECT_TRUE(layer.contains("awq"));
      }
    }
    const double ratio = result->audit["gates"]["ppl_ratio"];
    EXPECT_GT(ratio, 1.0);
    EXPECT_LT(ratio, 1.5);
  }
}

TEST_F(LocalPipelineTest, FailingGatesStillWriteTheCheckpointWithVerdictFail) {
  Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  recipe.bits = 2;
  recipe.gates.max_ppl_ratio = 1.01;
  recipe.gates.min_top1_agreement = 0.5;
  auto result = RunLocalQuantization(Options(recipe, "fail"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->passed);
  EXPECT_EQ(result->audit["verdict"], "FAIL");
  const json& checks = result->audit["gates"]["checks"];
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0]["gate"], "max_ppl_ratio");
  EXPECT_FALSE(checks[0]["passed"].get<bool>());
  EXPECT_TRUE(FileExists(temp_ + "/fail/audit.json"));
}

TEST_F(LocalPipelineTest, LargeCheckpointsAreShardedWithAnIndex) {
  const Recipe recipe = SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kGptq,
                                    Propagation::kIndependent);
  LocalQuantizeOptions options = Options(recipe, "sharded");
  options.max_shard_bytes = 64 << 10;
  auto result = RunLocalQuantization(options);
  ASSERT_TRUE(result.ok()) << result.status();
  const json index =
      ReadJson(options.out_dir + "/model.safetensors.index.json");
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    shards.insert(shard.get<std::string>());
  }
  EXPECT_GT(shards.size(), 1u);
  for (const std::string& shard : shards) {
    EXPECT_TRUE(FileExists(options.out_dir + "/" + shard)) << shard;
  }
  EXPECT_FALSE(FileExists(options.out_dir + "/model.safetensors"));
  // The gates ran on the sharded checkpoint.
  EXPECT_GT(result->audit["gates"]["tokens"].get<int64_t>(), 0);
}

TEST_F(LocalPipelineTest, PerLayerOverridesAreRecordedInBothFormats) {
  for (OutputFormat format :
       {OutputFormat::kGptq, OutputFormat::kCompressedTensors}) {
    Recipe recipe =
        SmallRecipe(QuantMethod::kGptq, 32, format, Propagation::kSequential);
    recipe.overrides.push_back({});
    recipe.overrides.back().match = "model\\.layers\\.0\\..*_proj";
    recipe.overrides.back().bits = 8;
    recipe.overrides.back().group_size = 0;
    recipe.overrides.push_back({});
    recipe.overrides.back().match = "model\\.layers\\.1\\.self_attn\\.o_proj";
    recipe.overrides.back().keep_unquantized = true;
    const std::string name = OutputFormatName(format);
    auto result = RunLocalQuantization(Options(recipe, name));
    ASSERT_TRUE(result.ok()) << result.status();
    const json& layers = result->audit["layers"];
    EXPECT_EQ(layers[0]["bits"], 8);
    EXPECT_EQ(layers[0]["group_size"], 0);
    EXPECT_TRUE(layers[0]["packed"].get<bool>());
    EXPECT_EQ(layers[7]["bits"], 4);
    EXPECT_FALSE(layers[10]["packed"].get<bool>());  // layers.1 o_proj
    EXPECT_NE(layers[10]["reason"].get<std::string>().find("overrides[1]"),
              std::string::npos);
    // 8-bit per-row layers are closer to the original than 4-bit ones.
    EXPECT_LT(layers[0]["rel_output_error_heldout"].get<double>(),
              layers[7]["rel_output_error_heldout"].get<double>());
    const json config = ReadJson(temp_ + "/" + name + "/config.json");
    const json& q = config["quantization_config"];
    if (format == OutputFormat::kGptq) {
      const json& dynamic = q["dynamic"];
      const json& rule = dynamic["+:^model\\.layers\\.0\\.self_attn\\.q_proj$"];
      EXPECT_EQ(rule["bits"], 8) << dynamic;
      EXPECT_EQ(rule["group_size"], -1) << dynamic;
      EXPECT_TRUE(
          dynamic.contains("-:^model\\.layers\\.1\\.self_attn\\.o_proj$"))
          << dynamic;
    } else {
      const json& group = q["config_groups"]["group_1"];
      EXPECT_EQ(group["weights"]["num_bits"], 8) << q;
      EXPECT_EQ(group["weights"]["strategy"], "channel") << q;
      const json& targets = group["targets"];
      EXPECT_NE(std::find(targets.begin(), targets.end(),
                          "model.layers.0.self_attn.q_proj"),
                targets.end())
          << targets;
      const json& ignore = q["ignore"];
      EXPECT_NE(std::find(ignore.begin(), ignore.end(),
                          "model.layers.1.self_attn.o_proj"),
                ignore.end())
          << ignore;
    }
    // The gates ran on the checkpoint as read back with the per-layer
    // schemes; a misread 8-bit layer would wreck the perplexity.
    EXPECT_LT(result->audit["gates"]["ppl_ratio"].get<double>(), 1.5);
  }
}

TEST_F(LocalPipelineTest, ErrorsNameTheProblemAndLeaveNothing) {
  Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  // An existing output is never overwritten.
  LocalQuantizeOptions exists = Options(recipe, "exists");
  ASSERT_TRUE(std::filesystem::create_directory(exists.out_dir));
  auto result = RunLocalQuantization(exists);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAlreadyExists);

  // Quantizing the output head is not supported yet: refused up front.
  recipe.ignore.clear();
  recipe.overrides.push_back({});
  recipe.overrides.back().match = "lm_head";
  recipe.overrides.back().bits = 4;
  LocalQuantizeOptions override_options = Options(recipe, "override");
  result = RunLocalQuantization(override_options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("overrides[0]"), std::string::npos)
      << result.status();
  EXPECT_NE(result.status().message().find("lm_head"), std::string::npos);
  EXPECT_FALSE(FileExists(override_options.out_dir));

  // A calibration set too small for one window.
  recipe.overrides.clear();
  recipe.calibration.seq_len = 4096;
  const std::string tiny = temp_ + "/tiny.txt";
  ASSERT_TRUE(WriteFileAtomically(tiny, "One short story.\n\nAnother.\n").ok());
  LocalQuantizeOptions tiny_options = Options(recipe, "tiny");
  tiny_options.calibration_path = tiny;
  result = RunLocalQuantization(tiny_options);
  ASSERT_FALSE(result.ok());
  EXPECT_FALSE(FileExists(tiny_options.out_dir));
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(temp_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 2);  // "exists" and tiny.txt.
}

}  // namespace
}  // namespace quant
