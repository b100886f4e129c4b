// A sequential job's blocks run as round tasks from files
// (round_job_tasks.h), in an order workers may run them (shards in reverse,
// one of each round run twice), publish the block tasks' bytes: every
// block's tensors and layer results, and the finalize's packed checkpoint.
// A round task waits for the files it needs (FailedPrecondition), checks
// the ones the coordinator recorded (a changed or lost one names itself so
// its producer can run again), and a shard past the split publishes
// nothing.
#include "core/pipeline/round_job_tasks.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_digests.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/job_inputs_cache.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/round_block_cache.h"
#include "core/pipeline/task_io.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::SmallRecipe;

class RoundJobTasksTest : public testing::SharedModelTest {
 protected:
  void SetUp() override {
    testing::SharedModelTest::SetUp();
    auto checkpoint = Checkpoint::Open(testing::Stories260KDir());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    blocks_ = (*checkpoint)->config().num_hidden_layers;
  }

  JobTaskContext Context(const Recipe& recipe, const std::string& name) {
    JobTaskContext context;
    context.checkpoint_dir = testing::Stories260KDir();
    context.calibration_path = testing::TinyStoriesPath();
    context.recipe = recipe;
    context.work_dir = temp_ + "/" + name + "-work";
    EXPECT_TRUE(MakeDirectory(context.work_dir).ok());
    return context;
  }

  // Shards in reverse order, the first calibration shard and each reduce
  // run twice (retried tasks), a group's layer reduces last layer first;
  // every task in its own attempt area. With round_heldout_later a group's
  // held-out shards run after its reduces, which must not need them.
  void RunBlockAsRounds(const JobTaskContext& context, int block) {
    const RoundShardCounts counts = PlanRoundShardCounts(context.recipe);
    auto attempt = [&] {
      return absl::StrCat(context.work_dir, "-attempt-", ++attempts_);
    };
    auto each_shard = [&](const std::function<void(bool, int)>& run,
                          std::vector<bool> splits = {false, true}) {
      for (const bool calibration : splits) {
        const int shards = calibration ? counts.calibration : counts.heldout;
        for (int s = shards; s-- > 0;) {
          run(calibration, s);
          if (calibration && s == 0) run(calibration, s);
        }
      }
    };
    const std::vector<bool> before_reduce =
        context.round_heldout_later ? std::vector<bool>{true}
                                    : std::vector<bool>{false, true};
    for (int g = 0; g < kBlockRoundGroups; ++g) {
      auto statistics = [&](bool calibration, int s) {
        auto name = RunShardStatisticsJobTask(context, block, g, calibration, s,
                                              attempt(), TaskControl());
        ASSERT_TRUE(name.ok()) << name.status();
      };
      each_shard(statistics, before_reduce);
      // The block's last reduce audits every group's held-out split.
      if (context.round_heldout_later && g + 1 == kBlockRoundGroups) {
        each_shard(statistics, {false});
      }
      std::vector<std::optional<LayerType>> reduces =
          RoundGroupReduces(g, context.round_layer_reduces);
      std::reverse(reduces.begin(), reduces.end());
      for (const std::optional<LayerType>& layer : reduces) {
        for (int run = 0; run < 2; ++run) {
          auto name = RunRoundReduceJobTask(context, block, g, layer, attempt(),
                                            TaskControl());
          ASSERT_TRUE(name.ok()) << name.status();
        }
      }
      if (context.round_heldout_later && g + 1 < kBlockRoundGroups) {
        each_shard(statistics, {false});
      }
    }
    each_shard([&](bool calibration, int s) {
      auto name = RunShardOutputJobTask(context, block, calibration, s,
                                        attempt(), TaskControl());
      ASSERT_TRUE(name.ok()) << name.status();
    });
  }

  std::string Read(const std::string& path) {
    auto bytes = ReadFileToString(path);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? *bytes : "";
  }

  // Block tasks, then the finalize: the packed tensors.
  std::string BlockTaskRun(const JobTaskContext& context) {
    for (int b = 0; b < blocks_; ++b) {
      const absl::Status s = RunBlockJobTask(
          context, b, absl::StrCat(context.work_dir, "-block-", b),
          TaskControl());
      EXPECT_TRUE(s.ok()) << s;
    }
    return Finalize(context);
  }

  std::string Finalize(const JobTaskContext& context) {
    const std::string artifact = context.work_dir + "-artifact";
    auto result = RunFinalizeJobTask(context, artifact, kDefaultMaxShardBytes,
                                     TaskControl());
    EXPECT_TRUE(result.ok()) << result.status();
    return Read(artifact + "/model.safetensors");
  }

  int blocks_ = 0;
  int attempts_ = 0;
};

Recipe RoundsRecipe(QuantMethod method) {
  // 24 calibration and 8 held-out windows: shards of 16, 8 and 8.
  Recipe recipe = SmallRecipe(method, 32, OutputFormat::kCompressedTensors,
                              Propagation::kSequential, /*samples=*/24,
                              /*seq_len=*/32);
  recipe.calibration.heldout_samples = 8;
  return recipe;
}

TEST_F(RoundJobTasksTest, RoundsPublishTheBlockTasksBytes) {
  // damp: auto quantizes each layer on its own; fixed damping quantizes
  // q, k, v (and gate, up) on one factor in the block task, and one reduce
  // per layer in the rounds; AWQ reduces each group whole.
  Recipe auto_damp = RoundsRecipe(QuantMethod::kGptq);
  auto_damp.act_order = true;
  auto_damp.damp.automatic = true;
  Recipe fixed_damp = RoundsRecipe(QuantMethod::kGptq);
  fixed_damp.act_order = true;
  // As a worker runs them: the job's inputs opened once for all its tasks;
  // the first and last recipe also keep the block between its tasks and
  // remember the files' digests, as a worker does. The first one's reduces
  // wait for the calibration shards only, the block's last reduce auditing
  // every layer on the held-out shards (the same layers.json).
  JobInputsCache cache;
  RoundBlockCache round_blocks;
  FileDigests file_digests;
  int jobs = 0;
  for (const Recipe& recipe :
       {auto_damp, fixed_damp, RoundsRecipe(QuantMethod::kAwq)}) {
    const bool keeps_blocks = jobs != 1;
    const std::string method =
        absl::StrCat(QuantMethodName(recipe.method),
                     recipe.damp.automatic ? "-auto-damp" : "");
    SCOPED_TRACE(method);
    const RoundShardCounts counts = PlanRoundShardCounts(recipe);
    EXPECT_EQ(counts.calibration, 2);
    EXPECT_EQ(counts.heldout, 1);
    EXPECT_EQ(counts.layer_reduces, recipe.method != QuantMethod::kAwq);
    const JobTaskContext blocks = Context(recipe, method + "-blocks");
    JobTaskContext rounds = Context(recipe, method + "-rounds");
    rounds.inputs_cache = &cache;
    if (keeps_blocks) {
      rounds.round_blocks = &round_blocks;
      rounds.file_digests = &file_digests;
    }
    const int hits_before = round_blocks.hits();
    rounds.round_layer_reduces = counts.layer_reduces;
    rounds.round_heldout_later = jobs == 0;
    const std::string expected = BlockTaskRun(blocks);
    ASSERT_FALSE(expected.empty());
    for (int b = 0; b < blocks_; ++b) {
      RunBlockAsRounds(rounds, b);
      if (HasFatalFailure()) return;
      SCOPED_TRACE(absl::StrCat("block ", b));
      const std::string tensors = BlockOutputPrefix("", b) + ".safetensors";
      EXPECT_EQ(Read(JoinPath(rounds.work_dir, tensors)),
                Read(JoinPath(blocks.work_dir, tensors)));
      EXPECT_EQ(testing::LayersWithoutTimes(rounds.work_dir, b)["layers"],
                testing::LayersWithoutTimes(blocks.work_dir, b)["layers"]);
      // What a rounds block publishes: no whole-split leaving states, and
      // layers.json records its deltas.
      EXPECT_FALSE(FileExists(JoinPath(
          rounds.work_dir, BlockOutputPrefix("", b) + ".cal.safetensors")));
      auto published = VerifyPublishedBlock(rounds.work_dir, b);
      ASSERT_TRUE(published.ok()) << published.status();
      // The held-out audit needs every group's held-out shards: one gone,
      // the last reduce waits for it.
      if (rounds.round_heldout_later && b == 0) {
        const std::string shard = JoinPath(
            rounds.work_dir, ShardStatisticsFile(b, 1, /*calibration=*/false,
                                                 /*shard=*/0));
        const std::string kept = Read(shard);
        ASSERT_EQ(std::remove(shard.c_str()), 0);
        auto waits = RunRoundReduceJobTask(
            rounds, b, kBlockRoundGroups - 1, std::nullopt,
            absl::StrCat(rounds.work_dir, "-attempt-audit"), TaskControl());
        EXPECT_EQ(waits.status().code(), absl::StatusCode::kFailedPrecondition)
            << waits.status();
        EXPECT_NE(waits.status().message().find("held-out audit"),
                  std::string::npos)
            << waits.status();
        ASSERT_TRUE(WriteFileAtomically(shard, kept).ok());
      }
      // A layer's delta is checked too: changed, the block is refused.
      if (counts.layer_reduces && b == 0) {
        const std::string delta =
            JoinPath(rounds.work_dir, RoundDeltaFile(b, 0, LayerType::kKProj));
        const std::string original = Read(delta);
        std::string flipped = original;
        flipped[flipped.size() - 1] ^= 1;
        ASSERT_TRUE(WriteFileAtomically(delta, flipped).ok());
        EXPECT_EQ(VerifyPublishedBlock(rounds.work_dir, b).status().code(),
                  absl::StatusCode::kDataLoss);
        ASSERT_TRUE(WriteFileAtomically(delta, original).ok());
      }
    }
    EXPECT_EQ(Finalize(rounds), expected);
    // One open per job (another recipe is another key).
    EXPECT_EQ(cache.opens(), ++jobs);
    // Every task of a block but its first found the block kept.
    if (keeps_blocks) {
      EXPECT_GT(round_blocks.hits(), hits_before + blocks_);
    }
  }
}

// A kept state is used only while every delta it applied is the file the
// task finds: a delta replaced since (here by another job's, with nothing
// recorded to refuse it) makes the task rebuild from the files, so it
// publishes what a task without the cache publishes.
TEST_F(RoundJobTasksTest, AKeptBlockIsNotUsedPastAChangedDelta) {
  Recipe four_bits = RoundsRecipe(QuantMethod::kGptq);
  Recipe three_bits = four_bits;
  three_bits.bits = 3;
  RoundBlockCache round_blocks;
  FileDigests file_digests;
  JobTaskContext kept = Context(four_bits, "kept");
  kept.round_blocks = &round_blocks;
  kept.file_digests = &file_digests;
  const JobTaskContext other = Context(three_bits, "other");
  const std::string attempt = temp_ + "/kept-attempt";
  const RoundShardCounts counts = PlanRoundShardCounts(four_bits);
  for (const JobTaskContext* context :
       std::vector<const JobTaskContext*>{&kept, &other}) {
    for (int g = 0; g < 2; ++g) {
      for (const bool calibration : {true, false}) {
        const int shards = calibration ? counts.calibration : counts.heldout;
        for (int s = 0; s < shards; ++s) {
          auto name = RunShardStatisticsJobTask(*context, 0, g, calibration, s,
                                                attempt, TaskControl());
          ASSERT_TRUE(name.ok()) << name.status();
        }
      }
      auto name = RunRoundReduceJobTask(*context, 0, g, std::nullopt, attempt,
                                        TaskControl());
      ASSERT_TRUE(name.ok()) << name.status();
    }
  }
  // The cache keeps block 0 as group 1's reduce found it: group 0's delta
  // applied. That delta is replaced.
  const std::string group0 = RoundDeltaFile(0, 0);
  ASSERT_TRUE(WriteFileAtomically(JoinPath(kept.work_dir, group0),
                                  Read(JoinPath(other.work_dir, group0)))
                  .ok());
  const int hits = round_blocks.hits();
  auto cached =
      RunShardStatisticsJobTask(kept, 0, 2, true, 0, attempt, TaskControl());
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(round_blocks.hits(), hits + 1);
  const std::string with_cache = Read(JoinPath(kept.work_dir, *cached));
  JobTaskContext plain = kept;
  plain.round_blocks = nullptr;
  plain.file_digests = nullptr;
  auto uncached =
      RunShardStatisticsJobTask(plain, 0, 2, true, 0, attempt, TaskControl());
  ASSERT_TRUE(uncached.ok()) << uncached.status();
  EXPECT_TRUE(with_cache == Read(JoinPath(kept.work_dir, *uncached)));
  // And the replaced delta did count: with the job's own, another file.
  auto own =
      RunRoundReduceJobTask(plain, 0, 0, std::nullopt, attempt, TaskControl());
  ASSERT_TRUE(own.ok()) << own.status();
  auto again =
      RunShardStatisticsJobTask(kept, 0, 2, true, 0, attempt, TaskControl());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(with_cache == Read(JoinPath(kept.work_dir, *again)));
}

TEST_F(RoundJobTasksTest, RoundTasksWaitForTheirInputsAndCheckThem) {
  const Recipe recipe = RoundsRecipe(QuantMethod::kGptq);
  JobTaskContext context = Context(recipe, "waits");
  const std::string attempt = temp_ + "/waits-attempt";
  // Nothing published yet.
  auto early =
      RunShardStatisticsJobTask(context, 0, 1, true, 0, attempt, TaskControl());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition)
      << early.status();
  early = RunRoundReduceJobTask(context, 0, 0, std::nullopt, attempt,
                                TaskControl());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition)
      << early.status();
  early = RunShardOutputJobTask(context, 0, true, 0, attempt, TaskControl());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition)
      << early.status();
  early =
      RunShardStatisticsJobTask(context, 1, 0, true, 0, attempt, TaskControl());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition)
      << early.status();
  EXPECT_NE(early.status().message().find(ShardOutputFile(0, true, 0)),
            std::string::npos)
      << early.status();

  // Groups and blocks outside the block's rounds are refused by name.
  for (const int group : {-1, kBlockRoundGroups, kBlockRoundGroups + 1}) {
    auto outside = RunShardStatisticsJobTask(context, 0, group, true, 0,
                                             attempt, TaskControl());
    EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument)
        << group << ": " << outside.status();
    outside = RunRoundReduceJobTask(context, 0, group, std::nullopt, attempt,
                                    TaskControl());
    EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument)
        << group << ": " << outside.status();
    EXPECT_NE(outside.status().message().find(absl::StrCat("group ", group)),
              std::string::npos)
        << outside.status();
  }
  auto no_block =
      RunShardOutputJobTask(context, 99, true, 0, attempt, TaskControl());
  EXPECT_EQ(no_block.status().code(), absl::StatusCode::kInvalidArgument)
      << no_block.status();

  // A shard past the split (the plan's count is an upper bound) publishes
  // nothing.
  auto past = RunShardStatisticsJobTask(context, 0, 0, true, 99, attempt,
                                        TaskControl());
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(*past, "");

  // The coordinator's record of a shard's file is checked by the reduce.
  const RoundShardCounts counts = PlanRoundShardCounts(recipe);
  for (const bool calibration : {true, false}) {
    const int shards = calibration ? counts.calibration : counts.heldout;
    for (int s = 0; s < shards; ++s) {
      auto name = RunShardStatisticsJobTask(context, 0, 0, calibration, s,
                                            attempt, TaskControl());
      ASSERT_TRUE(name.ok()) << name.status();
      ASSERT_EQ(*name, ShardStatisticsFile(0, 0, calibration, s));
      auto digest = Sha256File(JoinPath(context.work_dir, *name));
      ASSERT_TRUE(digest.ok());
      context.round_file_sha256[*name] = *digest;
    }
  }
  const std::string changed = ShardStatisticsFile(0, 0, true, 1);
  const std::string path = JoinPath(context.work_dir, changed);
  const std::string original = Read(path);
  std::string flipped = original;
  flipped[flipped.size() / 2] ^= 1;
  ASSERT_TRUE(WriteFileAtomically(path, flipped).ok());
  auto reduced = RunRoundReduceJobTask(context, 0, 0, std::nullopt, attempt,
                                       TaskControl());
  EXPECT_EQ(reduced.status().code(), absl::StatusCode::kDataLoss)
      << reduced.status();
  EXPECT_EQ(ChangedRoundFile(reduced.status()), changed);
  ASSERT_TRUE(FileSystem::Default()->RemoveFile(path).ok());
  reduced = RunRoundReduceJobTask(context, 0, 0, std::nullopt, attempt,
                                  TaskControl());
  EXPECT_EQ(reduced.status().code(), absl::StatusCode::kDataLoss)
      << reduced.status();
  EXPECT_EQ(ChangedRoundFile(reduced.status()), changed);
  EXPECT_FALSE(FileExists(JoinPath(context.work_dir, RoundDeltaFile(0, 0))));
  ASSERT_TRUE(WriteFileAtomically(path, original).ok());
  reduced = RunRoundReduceJobTask(context, 0, 0, std::nullopt, attempt,
                                  TaskControl());
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  EXPECT_EQ(*reduced, RoundDeltaFile(0, 0));
  EXPECT_EQ(ChangedRoundFile(absl::DataLossError("other")), std::nullopt);

  // A reduce of one layer in a job that reduces its groups whole, and the
  // other way round, is not one of the job's tasks.
  auto layer_reduce = RunRoundReduceJobTask(context, 0, 0, LayerType::kQProj,
                                            attempt, TaskControl());
  EXPECT_EQ(layer_reduce.status().code(), absl::StatusCode::kInvalidArgument)
      << layer_reduce.status();
  EXPECT_NE(layer_reduce.status().message().find("of q_proj"),
            std::string::npos)
      << layer_reduce.status();
  JobTaskContext by_layer = context;
  by_layer.round_layer_reduces = true;
  for (const auto& [group, layer] :
       std::vector<std::pair<int, std::optional<LayerType>>>{
           {0, std::nullopt},
           {1, LayerType::kOProj},
           {0, LayerType::kUpProj}}) {
    auto refused_reduce = RunRoundReduceJobTask(by_layer, 0, group, layer,
                                                attempt, TaskControl());
    EXPECT_EQ(refused_reduce.status().code(),
              absl::StatusCode::kInvalidArgument)
        << refused_reduce.status();
  }

  // Independent propagation runs block tasks.
  Recipe independent = recipe;
  independent.propagation = Propagation::kIndependent;
  const JobTaskContext other = Context(independent, "independent");
  auto refused =
      RunShardStatisticsJobTask(other, 0, 0, true, 0, attempt, TaskControl());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  auto config = Checkpoint::Open(testing::Stories260KDir());
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(JobRunsAsRounds((*config)->config(), independent));
  EXPECT_TRUE(JobRunsAsRounds((*config)->config(), recipe));
}

}  // namespace
}  // namespace quant
