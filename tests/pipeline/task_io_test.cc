// Task files: hidden states and layer results survive the trip through
// disk exactly, and damaged files are refused by name.
#include "core/pipeline/task_io.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/thread_pool.h"
#include "core/pipeline/finalize_task.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

TEST(TaskIoTest, HiddenStatesRoundTripExactly) {
  HiddenStates states;
  states.seq_len = 3;
  states.lengths = {3, 1};
  states.rows = RowMatrixF::Random(6, 5);
  const std::string path = testing::MakeTempDir() + "/h.safetensors";
  ASSERT_TRUE(WriteHiddenStates(path, states).ok());
  auto read = ReadHiddenStates(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->seq_len, 3);
  EXPECT_EQ(read->lengths, states.lengths);
  EXPECT_EQ(read->rows, states.rows);

  // A length beyond the window is refused, naming the index.
  states.lengths = {3, 4};
  ASSERT_TRUE(WriteHiddenStates(path, states).ok());
  auto bad = ReadHiddenStates(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("lengths[1] = 4"));
  ASSERT_TRUE(WriteFileAtomically(path, "not safetensors").ok());
  EXPECT_FALSE(ReadHiddenStates(path).ok());
}

// The manifest's file entries: the same whether hashed on a pool or not,
// in name order; a missing file is an error naming it.
TEST(FingerprintFilesTest, PoolGivesTheSameEntries) {
  const std::string dir = testing::MakeTempDir();
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    names.push_back(absl::StrCat("f", 4 - i, ".bin"));
    ASSERT_TRUE(WriteFileAtomically(JoinPath(dir, names.back()),
                                    std::string(1000 * (i + 1), 'a' + i))
                    .ok());
  }
  auto alone = FingerprintFiles(dir, names);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ThreadPool pool(3);
  auto spread = FingerprintFiles(dir, names, FileSystem::Default(), &pool);
  ASSERT_TRUE(spread.ok()) << spread.status();
  EXPECT_EQ(*alone, *spread);
  ASSERT_EQ(spread->at("files").size(), 5u);
  EXPECT_EQ(spread->at("files")[0].at("name"), "f0.bin");
  EXPECT_EQ(spread->at("files")[0].at("bytes"), 5000);
  names.push_back("missing.bin");
  auto missing = FingerprintFiles(dir, names, FileSystem::Default(), &pool);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.bin"));
}

class BlockOutputTest : public ::testing::Test {
 protected:
  void SetUp() override { QUANT_REQUIRE_SHARED(testing::Stories260KDir()); }
};

TEST_F(BlockOutputTest, BlockOutputsRoundTripExactly) {
  Recipe recipe = testing::SmallRecipe(
      QuantMethod::kAwq, 0, OutputFormat::kGptq, Propagation::kSequential);
  auto loaded = testing::LoadStories260K(recipe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto input = testing::Block0Input(*loaded, recipe);
  ASSERT_TRUE(input.ok()) << input.status();
  input->recipe = &recipe;
  auto output = RunBlockTask(*input);
  ASSERT_TRUE(output.ok()) << output.status();

  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteBlockOutput(dir, *output).ok());
  {
    // Hashed on three threads: the same layers.json, each recorded sha256
    // the file's own.
    const std::string dir3 = testing::MakeTempDir();
    ASSERT_TRUE(
        WriteBlockOutput(dir3, *output, FileSystem::Default(), {}, 3).ok());
    auto one = ReadFileToString(BlockOutputPrefix(dir, 0) + ".layers.json");
    auto three = ReadFileToString(BlockOutputPrefix(dir3, 0) + ".layers.json");
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(*one, *three);
    const nlohmann::json doc = nlohmann::json::parse(*three);
    int hashed = 0;
    for (const char* suffix :
         {".safetensors", ".cal.safetensors", ".heldout.safetensors"}) {
      const std::string path = BlockOutputPrefix(dir3, 0) + suffix;
      if (!FileExists(path)) continue;
      auto sha = Sha256File(path);
      ASSERT_TRUE(sha.ok());
      EXPECT_EQ(doc.at("sha256").at(suffix).get<std::string>(), *sha) << suffix;
      ++hashed;
    }
    EXPECT_GE(hashed, 2);
  }
  auto stored = ReadBlockOutput(dir, 0);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->tensors.size(), output->tensors.size());
  for (size_t i = 0; i < stored->tensors.size(); ++i) {
    EXPECT_EQ(stored->tensors[i].name, output->tensors[i].name);
    EXPECT_EQ(stored->tensors[i].dtype, output->tensors[i].dtype);
    EXPECT_EQ(stored->tensors[i].shape, output->tensors[i].shape);
    EXPECT_TRUE(stored->tensors[i].bytes == output->tensors[i].bytes)
        << stored->tensors[i].name;
  }
  ASSERT_EQ(stored->layers.size(), output->layers.size());
  bool saw_alpha = false;
  bool saw_kept = false;
  for (size_t i = 0; i < stored->layers.size(); ++i) {
    // Every field survives: the JSON of the read result is identical.
    EXPECT_EQ(LayerResultToTaskJson(stored->layers[i]),
              LayerResultToTaskJson(output->layers[i]));
    EXPECT_EQ(stored->layers[i].audit.gain_heldout,
              output->layers[i].audit.gain_heldout);
    saw_alpha |= stored->layers[i].choices.awq_alpha.has_value();
    saw_kept |= !stored->layers[i].quantized;
  }
  EXPECT_TRUE(saw_alpha);
  EXPECT_TRUE(saw_kept);  // The 172-wide MLP layers in GPTQ v1.
  auto cal = ReadHiddenStates(BlockOutputPrefix(dir, 0) + ".cal.safetensors");
  ASSERT_TRUE(cal.ok());
  EXPECT_EQ(cal->rows, output->calibration_out.rows);

  EXPECT_FALSE(ReadBlockOutput(dir, 1).ok());

  // Published as a whole it verifies, and the hash the coordinator records
  // is layers.json's; readers given that hash accept the output.
  auto layers_sha256 = VerifyPublishedBlock(dir, 0);
  ASSERT_TRUE(layers_sha256.ok()) << layers_sha256.status();
  auto layers_text =
      ReadFileToString(BlockOutputPrefix(dir, 0) + ".layers.json");
  ASSERT_TRUE(layers_text.ok());
  EXPECT_EQ(*layers_sha256, Sha256Hex(*layers_text));
  EXPECT_TRUE(ReadBlockOutput(dir, 0, *layers_sha256).ok());
  EXPECT_TRUE(VerifyBlockFile(dir, 0, ".cal.safetensors", *layers_sha256).ok());
  // A layers.json other than the one recorded at completion: block 0 must
  // be computed again, whichever reader finds it.
  const std::string recorded_elsewhere(64, '0');
  EXPECT_EQ(
      ChangedBlockOutput(ReadBlockOutput(dir, 0, recorded_elsewhere).status()),
      0);
  EXPECT_EQ(ChangedBlockOutput(VerifyBlockFile(dir, 0, ".cal.safetensors",
                                               recorded_elsewhere)),
            0);
  // A damaged layer file names the field.
  nlohmann::json broken = LayerResultToTaskJson(output->layers[0]);
  broken["audit"]["hessian"].erase("rho_rms");
  auto result = LayerResultFromTaskJson(broken);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("hessian.rho_rms"));
  broken = LayerResultToTaskJson(output->layers[0]);
  broken["settings"]["method"] = "magic";
  result = LayerResultFromTaskJson(broken);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("magic"));
  // Layer types and input groups are read back as the enums they were.
  for (const char* field : {"type", "input_group"}) {
    broken = LayerResultToTaskJson(output->layers[0]);
    broken[field] = "qkv_proj";
    result = LayerResultFromTaskJson(broken);
    ASSERT_FALSE(result.ok()) << field;
    EXPECT_THAT(result.status().message(),
                HasSubstr(absl::StrCat(field, " \"qkv_proj\" is unknown")));
  }

  // One byte more in the tensors: the block no longer verifies, by name.
  {
    std::ofstream tensors(BlockOutputPrefix(dir, 0) + ".safetensors",
                          std::ios::binary | std::ios::app);
    tensors << ' ';
  }
  auto changed = VerifyPublishedBlock(dir, 0);
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(ChangedBlockOutput(changed.status()), 0);
  EXPECT_THAT(changed.status().message(), HasSubstr(".safetensors: sha256 is"));
}

}  // namespace
}  // namespace quant
