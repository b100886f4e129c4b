// Kernel levels from the command line: `quantctl quantize --local` at every
// level this CPU runs passes its gates, records the level in the manifest
// and its --json, and gives the same bytes on 1 and 3 threads; a level the
// CPU lacks or an unknown one is a usage error that writes nothing; a work
// directory is not resumed at another level; `quantctl kernels` lists them.
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/isa.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;
using ::testing::HasSubstr;

constexpr char kRecipe[] = R"(method: gptq
bits: 4
group_size: 32
act_order: true
calibration:
  samples: 8
  seq_len: 64
  heldout_fraction: 0.25
format: compressed-tensors
gates:
  max_ppl_ratio: 1.5
)";

class KernelsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SharedPath("models/stories260K/hf-f32");
    text_ = testing::SharedPath("data/tinystories_val.txt");
    QUANT_REQUIRE_SHARED(model_);
    QUANT_REQUIRE_SHARED(text_);
    temp_ = testing::MakeTempDir();
    recipe_ = temp_ + "/r.yaml";
    ASSERT_TRUE(WriteFileAtomically(recipe_, kRecipe).ok());
  }

  RunResult Quantize(const std::string& out, const std::string& extra) {
    return RunQuantctl("quantize --local --checkpoint " + Quote(model_) +
                       " --calibration " + Quote(text_) + " --recipe " +
                       Quote(recipe_) + " --out " + Quote(out) + " " + extra);
  }

  std::string model_, text_, temp_, recipe_;
};

TEST_F(KernelsCommandTest, EveryLevelPassesRecordsItselfAndIsThreadStable) {
  for (kernels::IsaLevel level : kernels::SupportedLevels()) {
    const std::string name(kernels::IsaName(level));
    std::string tensors[2];
    int i = 0;
    for (const char* threads : {"1", "3"}) {
      const std::string out = absl::StrCat(temp_, "/", name, "-t", threads);
      const RunResult run = Quantize(
          out, absl::StrCat("--isa=", name, " --threads=", threads, " --json"));
      ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
      const auto result = nlohmann::json::parse(run.out, nullptr, false);
      ASSERT_TRUE(result.is_object()) << run.out;
      EXPECT_EQ(result["verdict"], "PASS") << name;
      EXPECT_EQ(result["kernels"]["isa"], name);
      const auto manifest = nlohmann::json::parse(
          *ReadFileToString(out + "/manifest.json"), nullptr, false);
      EXPECT_EQ(manifest["kernels"]["isa"], name);
      tensors[i++] = *ReadFileToString(out + "/model.safetensors");
    }
    EXPECT_TRUE(tensors[0] == tensors[1])
        << name << ": 1 and 3 threads gave different bytes";
  }
}

TEST_F(KernelsCommandTest, UnknownOrMissingLevelsAreUsageErrors) {
  const RunResult unknown = Quantize(temp_ + "/u", "--isa=v9");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("--isa=v9"));
  EXPECT_FALSE(FileExists(temp_ + "/u"));

  const RunResult env =
      RunQuantctl("eval --checkpoint " + Quote(model_) + " --text " +
                  Quote(text_) + " --max_windows 1 --isa=sse9");
  EXPECT_EQ(env.exit_code, 2);
  EXPECT_THAT(env.err, HasSubstr("unknown instruction-set level 'sse9'"));

  // A level this build has that the CPU lacks, where there is one.
  for (kernels::IsaLevel level : kernels::CompiledLevels()) {
    if (kernels::CanRun(level)) continue;
    const RunResult lacking =
        Quantize(temp_ + "/l", absl::StrCat("--isa=", kernels::IsaName(level)));
    EXPECT_EQ(lacking.exit_code, 2);
    EXPECT_THAT(lacking.err, HasSubstr("this CPU cannot run"));
    EXPECT_THAT(lacking.err, HasSubstr("it lacks"));
  }
}

TEST_F(KernelsCommandTest, AWorkDirectoryIsOnlyResumedAtItsLevel) {
  const auto levels = kernels::SupportedLevels();
  if (levels.size() < 2) GTEST_SKIP() << "this CPU runs only one level";
  const std::string first(kernels::IsaName(levels.back()));
  const std::string second(kernels::IsaName(levels.front()));
  const std::string work = temp_ + "/work";
  ASSERT_EQ(
      Quantize(temp_ + "/a", "--isa=" + first + " --work_dir " + Quote(work))
          .exit_code,
      0);
  const RunResult other =
      Quantize(temp_ + "/b", "--isa=" + second + " --work_dir " + Quote(work));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.err, HasSubstr("computed with \"" + first + "\" kernels"));
  EXPECT_FALSE(FileExists(temp_ + "/b"));
  // At its own level it resumes every block.
  const RunResult again =
      Quantize(temp_ + "/c", "--isa=" + first + " --work_dir " + Quote(work));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, HasSubstr("block 5/5: output found"));
}

TEST_F(KernelsCommandTest, KernelsListsTheLevels) {
  const RunResult names = RunQuantctl("kernels --supported_names");
  ASSERT_EQ(names.exit_code, 0) << names.err;
  std::string expected;
  for (kernels::IsaLevel level : kernels::SupportedLevels()) {
    absl::StrAppend(&expected, expected.empty() ? "" : " ",
                    kernels::IsaName(level));
  }
  EXPECT_EQ(names.out, expected + "\n");
  const RunResult text = RunQuantctl("kernels");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("this CPU runs:  " + expected));
  const std::string lowest(kernels::IsaName(kernels::SupportedLevels()[0]));
  const RunResult json = RunQuantctl("kernels --json --isa=" + lowest);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["selected"]["isa"], lowest);
}

}  // namespace
}  // namespace quant
