// gates.compare_to: a local run evaluates the previous release on its own
// held-out windows. Checked with a release compared against itself (the
// same numbers to the bit, a ratio of exactly 1), against another method,
// and with previous releases that are missing, tampered with, of another
// model, or named by a job id that only quantd resolves.
#include "core/pipeline/previous_release.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/model/model_config.h"
#include "core/pipeline/local_pipeline.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pipeline/pipeline_fixture.h"

namespace quant {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
namespace fs = std::filesystem;

class PreviousReleaseTest : public testing::SharedModelTest {
 protected:
  Recipe RtnRecipe() const {
    return testing::SmallRecipe(QuantMethod::kRtn, 32,
                                OutputFormat::kCompressedTensors,
                                Propagation::kSequential);
  }

  absl::StatusOr<LocalQuantizeResult> Run(const Recipe& recipe,
                                          const std::string& name) {
    LocalQuantizeOptions options;
    options.checkpoint_dir = testing::Stories260KDir();
    options.calibration_path = testing::TinyStoriesPath();
    options.out_dir = JoinPath(temp_, name);
    options.recipe = recipe;
    return RunLocalQuantization(options);
  }

  // The RTN release every test compares with, made once per test.
  std::string MakeRelease() {
    auto release = Run(RtnRecipe(), "release");
    EXPECT_TRUE(release.ok()) << release.status();
    return JoinPath(temp_, "release");
  }
};

TEST_F(PreviousReleaseTest, ItselfOnTheSameWindowsGivesTheSameNumbers) {
  const std::string release = MakeRelease();
  auto first = ReadFileToString(JoinPath(release, "audit.json"));
  ASSERT_TRUE(first.ok());
  const json release_gates = json::parse(*first).at("gates");

  Recipe again = RtnRecipe();
  again.gates.compare_to = release;
  again.gates.max_ppl_ratio_vs_previous = 1.0;
  auto same = Run(again, "same");
  ASSERT_TRUE(same.ok()) << same.status();
  const json& gates = same->audit.at("gates");
  ASSERT_TRUE(gates.contains("previous")) << gates.dump(2);
  const json& previous = gates.at("previous");
  // The same windows, the same arithmetic: the previous release's
  // perplexity as this run measured it is the one it published.
  EXPECT_EQ(previous.at("perplexity").get<double>(),
            release_gates.at("perplexity").get<double>());
  EXPECT_EQ(previous.at("mean_kl").get<double>(),
            release_gates.at("mean_kl").get<double>());
  EXPECT_EQ(gates.at("ppl_ratio_vs_previous").get<double>(), 1.0);
  EXPECT_EQ(previous.at("method"), "rtn");
  EXPECT_EQ(previous.at("compare_to"), release);
  auto manifest = ReadFileToString(JoinPath(release, "manifest.json"));
  ASSERT_TRUE(manifest.ok());
  EXPECT_EQ(previous.at("manifest_sha256"), Sha256Hex(*manifest));
  EXPECT_EQ(same->manifest.at("compared_with").at("manifest_sha256"),
            Sha256Hex(*manifest));
  EXPECT_TRUE(same->passed);
  bool checked = false;
  for (const json& check : gates.at("checks")) {
    if (check.at("gate") == "max_ppl_ratio_vs_previous") {
      checked = true;
      EXPECT_TRUE(check.at("passed").get<bool>());
    }
  }
  EXPECT_TRUE(checked) << gates.dump(2);
  // Layer by layer too: on the same inputs, the previous release's packed
  // layer has the error this run's layer has.
  int compared = 0;
  for (const json& layer : same->audit.at("layers")) {
    if (!layer.at("packed").get<bool>()) continue;
    SCOPED_TRACE(layer.at("name").get<std::string>());
    ASSERT_TRUE(layer.contains("previous_rel_output_error_heldout"));
    EXPECT_NEAR(layer.at("previous_rel_output_error_heldout").get<double>(),
                layer.at("rel_output_error_heldout").get<double>(),
                1e-6 * layer.at("rel_output_error_heldout").get<double>());
    ++compared;
  }
  EXPECT_EQ(compared, 30);  // down_proj (K = 172) is kept at g32

  // Any improvement demanded of an identical checkpoint fails the gate.
  again.gates.max_ppl_ratio_vs_previous = 0.999;
  auto stricter = Run(again, "stricter");
  ASSERT_TRUE(stricter.ok()) << stricter.status();
  EXPECT_FALSE(stricter->passed);
  EXPECT_EQ(stricter->audit.at("verdict"), "FAIL");
}

TEST_F(PreviousReleaseTest, AnotherMethodIsComparedOnTheSameWindows) {
  const std::string release = MakeRelease();
  Recipe gptq = testing::SmallRecipe(QuantMethod::kGptq, 32,
                                     OutputFormat::kCompressedTensors,
                                     Propagation::kSequential);
  gptq.gates.compare_to = absl::StrCat("file://", release);
  auto result = Run(gptq, "gptq");
  ASSERT_TRUE(result.ok()) << result.status();
  const json& gates = result->audit.at("gates");
  const double ratio = gates.at("ppl_ratio_vs_previous").get<double>();
  EXPECT_DOUBLE_EQ(ratio,
                   gates.at("perplexity").get<double>() /
                       gates.at("previous").at("perplexity").get<double>());
  // Layer by layer: the previous release is RTN on the grid this job's
  // audit uses for its RTN baseline, and its layers are measured on this
  // job's inputs, so each layer's previous error is that baseline exactly.
  int compared = 0;
  for (const json& layer : result->audit.at("layers")) {
    if (!layer.at("packed").get<bool>()) continue;
    SCOPED_TRACE(layer.at("name").get<std::string>());
    EXPECT_EQ(layer.at("previous_rel_output_error_heldout").get<double>(),
              layer.at("rtn_rel_output_error_heldout").get<double>());
    ++compared;
  }
  EXPECT_EQ(compared, 30);
  // Only the gates the recipe sets are checked.
  for (const json& check : gates.at("checks")) {
    EXPECT_NE(check.at("gate"), "max_ppl_ratio_vs_previous");
  }
}

// An AWQ release folded its scales into the norms and into v_proj/up_proj:
// the layers reading a norm are compared in the source's units (the same
// errors as its own audit's), those reading another layer's output are
// left out, and the rest of the rows say nothing of them.
TEST_F(PreviousReleaseTest, AnAwqReleaseIsComparedWhereItsScalesCanBeUndone) {
  Recipe awq = testing::SmallRecipe(QuantMethod::kAwq, 32,
                                    OutputFormat::kCompressedTensors,
                                    Propagation::kSequential);
  auto release = Run(awq, "awq");
  ASSERT_TRUE(release.ok()) << release.status();
  awq.gates.compare_to = JoinPath(temp_, "awq");
  auto again = Run(awq, "again");
  ASSERT_TRUE(again.ok()) << again.status();
  int norm_fed = 0;
  for (const json& layer : again->audit.at("layers")) {
    if (!layer.at("packed").get<bool>()) continue;
    const std::string type = layer.at("type");
    SCOPED_TRACE(layer.at("name").get<std::string>());
    if (type == "o_proj" || type == "down_proj") {
      EXPECT_FALSE(layer.contains("previous_rel_output_error_heldout"));
      continue;
    }
    ASSERT_TRUE(layer.contains("previous_rel_output_error_heldout"));
    EXPECT_NEAR(layer.at("previous_rel_output_error_heldout").get<double>(),
                layer.at("rel_output_error_heldout").get<double>(),
                1e-3 * layer.at("rel_output_error_heldout").get<double>());
    ++norm_fed;
  }
  EXPECT_EQ(norm_fed, 25);  // q, k, v, gate, up of 5 blocks
}

TEST_F(PreviousReleaseTest, ABadPreviousReleaseFailsBeforeAnythingIsWritten) {
  const std::string release = MakeRelease();
  // An unlisted file: not the release that shipped.
  const std::string tampered = JoinPath(temp_, "tampered");
  fs::copy(release, tampered, fs::copy_options::recursive);
  std::ofstream(JoinPath(tampered, "extra.txt")) << "x";
  // Another model: a config with another hidden size (its manifest
  // rewritten so that only the architecture is wrong is not possible
  // without re-hashing, so it has none, like a checkpoint from another tool).
  const std::string other = JoinPath(temp_, "other");
  fs::copy(release, other, fs::copy_options::recursive);
  fs::remove(JoinPath(other, "manifest.json"));
  auto config = ReadFileToString(JoinPath(other, "config.json"));
  ASSERT_TRUE(config.ok());
  json parsed = json::parse(*config);
  parsed["num_hidden_layers"] = parsed.at("num_hidden_layers").get<int>() - 1;
  ASSERT_TRUE(
      WriteFileAtomically(JoinPath(other, "config.json"), parsed.dump()).ok());

  struct Case {
    std::string compare_to;
    absl::StatusCode code;
    std::string says;
  };
  const Case cases[] = {
      {JoinPath(temp_, "missing"), absl::StatusCode::kNotFound, "no directory"},
      {tampered, absl::StatusCode::kFailedPrecondition,
       "does not match its manifest.json"},
      {other, absl::StatusCode::kFailedPrecondition, "num_hidden_layers"},
      {"job-000042", absl::StatusCode::kInvalidArgument, "only quantd"},
      {"s3://bucket/release", absl::StatusCode::kInvalidArgument,
       "file:/// URIs"},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.compare_to);
    Recipe recipe = RtnRecipe();
    recipe.gates.compare_to = c.compare_to;
    const std::string name = absl::StrCat("out", i++);
    auto result = Run(recipe, name);
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), c.code) << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr("gates.compare_to"));
    EXPECT_THAT(result.status().message(), HasSubstr(c.says));
    EXPECT_FALSE(fs::exists(JoinPath(temp_, name)));
  }
}

// Without the hash check (quantd's submit, the block tasks), a manifest of
// any shape is read as far as it goes and never stops the checkpoint from
// being opened or crashes the reader.
TEST_F(PreviousReleaseTest, ManifestsOfAnyShapeAreReadWithoutTheHashCheck) {
  const std::string release = MakeRelease();
  auto config = LoadModelConfig(testing::Stories260KDir());
  ASSERT_TRUE(config.ok()) << config.status();
  PreviousReleaseCheck check;
  check.verify_manifest = false;
  for (const char* manifest :
       {"not json", "[1, 2]", "{\"job\": 3, \"recipe\": []}",
        "{\"recipe\": {\"method\": \"awq\", \"overrides\": 5}}",
        "{\"recipe\": {\"overrides\": [1, {\"method\": \"awq\"}]}}"}) {
    SCOPED_TRACE(manifest);
    ASSERT_TRUE(
        WriteFileAtomically(JoinPath(release, "manifest.json"), manifest).ok());
    auto previous = OpenPreviousRelease(release, release, *config, check);
    ASSERT_TRUE(previous.ok()) << previous.status();
    EXPECT_EQ(previous->manifest_sha256, Sha256Hex(manifest));
    EXPECT_TRUE(previous->job_id.empty());
  }
  // The last one names AWQ in an override.
  auto awq = OpenPreviousRelease(release, release, *config, check);
  ASSERT_TRUE(awq.ok());
  EXPECT_TRUE(awq->used_awq);
  // With the check, the changed manifest is refused by field.
  auto verified = OpenPreviousRelease(release, release, *config);
  ASSERT_FALSE(verified.ok());
  EXPECT_THAT(verified.status().message(), HasSubstr("gates.compare_to"));
}

TEST(IsJobIdTest, OnlyJobDashDigits) {
  EXPECT_TRUE(IsJobId("job-000042"));
  EXPECT_TRUE(IsJobId("job-1"));
  EXPECT_FALSE(IsJobId("job-"));
  EXPECT_FALSE(IsJobId("job-12a"));
  EXPECT_FALSE(IsJobId("./job-12"));
  EXPECT_FALSE(IsJobId("/srv/releases/job-12"));
}

}  // namespace
}  // namespace quant
