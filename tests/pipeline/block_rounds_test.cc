// A sequential block run as rounds (shard statistics, reduce, shard output:
// the units many workers share, docs/DATA_PARALLEL.md) gives the block
// task's bytes whatever order the shards ran in and when a shard ran twice;
// shards merged out of order, reused for another group or missing are
// refused. On stories260K's block 0 with more than one shard per split.
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/hidden_state_stream.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "core/pipeline/round_state_io.h"
#include "core/pipeline/shard_statistics_io.h"
#include "core/pipeline/task_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::Block0Input;
using ::testing::HasSubstr;
using testing::LoadStories260K;
using testing::ReadOrEmpty;
using testing::SmallRecipe;

// Sequences [range.first, range.first + range.count) of `states`.
HiddenStates Slice(const HiddenStates& states, SequenceRange range) {
  HiddenStates shard;
  shard.seq_len = states.seq_len;
  shard.lengths.assign(states.lengths.begin() + range.first,
                       states.lengths.begin() + range.first + range.count);
  shard.rows = states.rows.middleRows(range.first * states.seq_len,
                                      range.count * states.seq_len);
  return shard;
}

// Real tokens of the sequences before `range`.
int64_t TokensBefore(const HiddenStates& states, SequenceRange range) {
  int64_t tokens = 0;
  for (int64_t i = 0; i < range.first; ++i) tokens += states.lengths[i];
  return tokens;
}

class BlockRoundsTest : public ::testing::Test {
 protected:
  void SetUp() override { QUANT_REQUIRE_SHARED(testing::Stories260KDir()); }

  // Block 0's input for `recipe`, 40 calibration windows of 32 tokens
  // (three shards).
  void Load(const Recipe& recipe) {
    auto loaded = LoadStories260K(recipe);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    loaded_ = std::move(*loaded);
    auto input = Block0Input(loaded_, recipe);
    ASSERT_TRUE(input.ok()) << input.status();
    input_ = std::move(*input);
    input_.recipe = &recipe;
    // Small chunks, so a shard is several chunks.
    input_.chunk_tokens = 5 * input_.calibration.seq_len;
  }

  // One split's statistics for the next group, shard by shard, in reverse
  // order, the last shard gathered twice (a task retried after a failure):
  // the second copy is the one used.
  std::vector<std::unique_ptr<GroupActivationStatistics>> Gather(
      const BlockRoundState& state, bool calibration) {
    std::vector<std::unique_ptr<GroupActivationStatistics>> gathered =
        GatherInMemory(state, calibration);
    if (!through_files_) return gathered;
    // As between workers: each shard's file, read back into empty
    // statistics of the group (made all at once, as a reduce makes them).
    auto empties =
        EmptyShardStatistics(input_, state, static_cast<int>(gathered.size()));
    EXPECT_TRUE(empties.ok()) << empties.status();
    if (!empties.ok()) return {};
    for (size_t i = 0; i < gathered.size(); ++i) {
      if (gathered[i] == nullptr) continue;
      const std::string path =
          absl::StrCat(temp_, "/g", state.groups_done,
                       calibration ? ".cal." : ".held.", i, ".safetensors");
      const absl::Status written = WriteShardStatistics(path, *gathered[i]);
      EXPECT_TRUE(written.ok()) << written;
      EXPECT_EQ(empties->size(), gathered.size());
      if (i >= empties->size()) return {};
      const absl::Status read = ReadShardStatistics(path, (*empties)[i].get());
      EXPECT_TRUE(read.ok()) << read;
      file_bytes_ += static_cast<int64_t>(ReadOrEmpty(path).size());
      gathered[i] = std::move((*empties)[i]);
    }
    return gathered;
  }

  std::vector<std::unique_ptr<GroupActivationStatistics>> GatherInMemory(
      const BlockRoundState& state, bool calibration) {
    const HiddenStates& states =
        calibration ? input_.calibration : input_.heldout;
    const std::vector<SequenceRange> shards =
        PlanShards(static_cast<int64_t>(states.lengths.size()));
    std::vector<std::unique_ptr<GroupActivationStatistics>> out(shards.size());
    for (size_t i = shards.size(); i-- > 0;) {
      const HiddenStates shard = Slice(states, shards[i]);
      const MemoryHiddenStateSource source(&shard);
      const int runs = i + 1 == shards.size() ? 2 : 1;
      for (int run = 0; run < runs; ++run) {
        ShardRoundStash* stash = StashOf(calibration, i);
        const int before = stash != nullptr ? stash->rounds_continued : 0;
        auto statistics =
            GatherShardStatistics(input_, state, calibration, source,
                                  TokensBefore(states, shards[i]), stash);
        EXPECT_TRUE(statistics.ok()) << statistics.status();
        if (statistics.ok()) out[i] = std::move(*statistics);
        if (stash != nullptr && run == 0) {
          continued_[state.groups_done] += stash->rounds_continued - before;
        }
      }
    }
    return out;
  }

  // The block as rounds; the shards' outputs joined in order. With
  // `heldout_later` each reduce gets the calibration shards only and the
  // held-out part of the audits is measured after the last one.
  absl::StatusOr<BlockTaskOutput> RunRounds(bool heldout_later = false) {
    stashes_.clear();
    continued_.assign(kBlockRoundGroups + 1, 0);
    QUANT_ASSIGN_OR_RETURN(BlockRoundState state, StartBlockRounds(input_));
    std::vector<HessianAccumulator> heldout_sums;
    for (int g = 0; g < kBlockRoundGroups; ++g) {
      std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
          Gather(state, true);
      std::vector<std::unique_ptr<GroupActivationStatistics>> heldout =
          Gather(state, false);
      std::vector<const GroupActivationStatistics*> shards;
      for (const auto& s : calibration) {
        if (s != nullptr) shards.push_back(s.get());
      }
      HessianAccumulator& sum = heldout_sums.emplace_back(
          heldout.empty() || heldout[0] == nullptr ? 0 : heldout[0]->k());
      for (const auto& s : heldout) {
        if (s == nullptr) continue;
        if (heldout_later) {
          if (s->heldout_tokens() > 0) {
            QUANT_RETURN_IF_ERROR(sum.Merge(s->heldout()));
          }
        } else {
          shards.push_back(s.get());
        }
      }
      RoundReduceOptions options;
      options.heldout_later = heldout_later;
      QUANT_RETURN_IF_ERROR(ReduceBlockRound(input_, shards, &state, options));
    }
    if (heldout_later) {
      for (const LayerResult& layer : state.layers) {
        EXPECT_EQ(layer.audit.heldout_pending, layer.quantized) << layer.name;
      }
      // The sizes the job's last reduce reads the held-out sums at: the
      // group's, or 0 where the format held none of its layers.
      const std::vector<int64_t> columns = BlockRoundsHeldoutColumns(state);
      EXPECT_EQ(columns.size(), heldout_sums.size());
      for (size_t g = 0; g < columns.size() && g < heldout_sums.size(); ++g) {
        if (columns[g] != 0) {
          EXPECT_EQ(columns[g], heldout_sums[g].k()) << g;
        }
      }
      EXPECT_NE(columns[0], 0);
      QUANT_RETURN_IF_ERROR(
          AuditBlockRoundsHeldout(input_, heldout_sums, &state));
    }
    RowMatrixF leaving(input_.calibration.rows.rows(),
                       input_.calibration.rows.cols());
    const std::vector<SequenceRange> shards =
        PlanShards(static_cast<int64_t>(input_.calibration.lengths.size()));
    for (size_t i = 0; i < shards.size(); ++i) {
      const SequenceRange& range = shards[i];
      const HiddenStates shard = Slice(input_.calibration, range);
      const MemoryHiddenStateSource source(&shard);
      MemoryHiddenStateSink sink(shard.seq_len, shard.lengths,
                                 shard.rows.cols());
      ShardRoundStash* stash = StashOf(true, i);
      const int before = stash != nullptr ? stash->rounds_continued : 0;
      QUANT_RETURN_IF_ERROR(
          WriteShardOutput(input_, state, source, &sink, stash));
      if (stash != nullptr) {
        continued_[kBlockRoundGroups] += stash->rounds_continued - before;
        EXPECT_EQ(stash->bytes(), 0) << "a finished block keeps nothing";
      }
      leaving.middleRows(range.first * shard.seq_len, shard.rows.rows()) =
          sink.states().rows;
    }
    QUANT_ASSIGN_OR_RETURN(BlockTaskOutput output,
                           FinishBlockRounds(input_, std::move(state)));
    output.calibration_out.rows = std::move(leaving);
    return output;
  }

  // With use_stash_ each shard keeps a ShardRoundStash between its rounds,
  // as a worker does; continued_[g] counts the shards whose round g (g ==
  // kBlockRoundGroups: the output) continued from it.
  ShardRoundStash* StashOf(bool calibration, size_t shard) {
    return use_stash_ ? &stashes_[{calibration, shard}] : nullptr;
  }

  testing::LoadedModel loaded_;
  BlockTaskInput input_;
  bool through_files_ = false;
  bool use_stash_ = false;
  std::map<std::pair<bool, size_t>, ShardRoundStash> stashes_;
  std::vector<int> continued_;
  std::string temp_ = testing::MakeTempDir();
  int64_t file_bytes_ = 0;
};

Recipe GptqAutoDamp() {
  Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, /*samples=*/40, /*seq_len=*/32);
  recipe.act_order = true;
  recipe.damp.automatic = true;
  return recipe;
}

TEST_F(BlockRoundsTest, RoundsGiveTheBlockTasksBytes) {
  const Recipe gptq = GptqAutoDamp();
  const Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 40, 32);
  const Recipe rtn = SmallRecipe(QuantMethod::kRtn, 32, OutputFormat::kGptq,
                                 Propagation::kSequential, 40, 32);
  for (const Recipe* recipe : {&gptq, &awq, &rtn}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    // GPTQ's shards travel through files, as between workers.
    through_files_ = recipe == &gptq;
    Load(*recipe);
    if (HasFatalFailure()) return;
    ASSERT_GT(
        PlanShards(static_cast<int64_t>(input_.calibration.lengths.size()))
            .size(),
        2u);
    for (int threads : {1, 2}) {
      input_.threads = threads;
      absl::StatusOr<BlockTaskOutput> whole = RunBlockTask(input_);
      ASSERT_TRUE(whole.ok()) << whole.status();
      absl::StatusOr<BlockTaskOutput> rounds = RunRounds();
      ASSERT_TRUE(rounds.ok()) << rounds.status();
      ASSERT_EQ(rounds->tensors.size(), whole->tensors.size());
      for (size_t i = 0; i < whole->tensors.size(); ++i) {
        EXPECT_EQ(rounds->tensors[i].name, whole->tensors[i].name);
        EXPECT_EQ(rounds->tensors[i].bytes, whole->tensors[i].bytes)
            << whole->tensors[i].name << " on " << threads << " threads";
      }
      ASSERT_EQ(rounds->layers.size(), whole->layers.size());
      // RTN at group size 32 in the GPTQ format keeps the MLP (172 wide)
      // float; the others quantize every layer.
      int quantized = 0;
      for (size_t i = 0; i < whole->layers.size(); ++i) {
        quantized += whole->layers[i].quantized ? 1 : 0;
        EXPECT_EQ(rounds->layers[i].quantized, whole->layers[i].quantized);
        EXPECT_EQ(rounds->layers[i].audit.gain_heldout,
                  whole->layers[i].audit.gain_heldout)
            << whole->layers[i].name;
        EXPECT_EQ(rounds->layers[i].choices.damp_used,
                  whole->layers[i].choices.damp_used)
            << whole->layers[i].name;
      }
      EXPECT_EQ(quantized, recipe == &rtn ? 4 : 7);
      EXPECT_EQ(rounds->calibration_out.rows, whole->calibration_out.rows);
    }
    if (through_files_) {
      EXPECT_GT(file_bytes_, 0);
      std::cout << "shard statistics files: " << file_bytes_ << " bytes\n";
    }
  }
}

// A layer's audit without its held-out part, as a reduce that does not
// wait for the held-out shards leaves it, and that part measured after the
// block's last reduce: the block's bytes and every layer's result are
// those of reduces given both splits (RTN at group size 32 in the GPTQ
// format also has layers the format cannot hold, with nothing to audit).
TEST_F(BlockRoundsTest, HeldoutAuditsAfterTheLastReduceGiveTheSameLayers) {
  const Recipe gptq = GptqAutoDamp();
  const Recipe rtn = SmallRecipe(QuantMethod::kRtn, 32, OutputFormat::kGptq,
                                 Propagation::kSequential, 40, 32);
  for (const Recipe* recipe : {&gptq, &rtn}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    through_files_ = recipe == &gptq;
    Load(*recipe);
    if (HasFatalFailure()) return;
    input_.threads = 2;
    absl::StatusOr<BlockTaskOutput> both = RunRounds();
    ASSERT_TRUE(both.ok()) << both.status();
    absl::StatusOr<BlockTaskOutput> later = RunRounds(/*heldout_later=*/true);
    ASSERT_TRUE(later.ok()) << later.status();
    ASSERT_EQ(later->tensors.size(), both->tensors.size());
    for (size_t i = 0; i < both->tensors.size(); ++i) {
      EXPECT_EQ(later->tensors[i].bytes, both->tensors[i].bytes)
          << both->tensors[i].name;
    }
    ASSERT_EQ(later->layers.size(), both->layers.size());
    int audited = 0;
    for (size_t i = 0; i < both->layers.size(); ++i) {
      LayerResult a = both->layers[i];
      LayerResult b = later->layers[i];
      EXPECT_FALSE(b.audit.heldout_pending) << b.name;
      audited += b.quantized && b.audit.gain_heldout > 0 ? 1 : 0;
      a.audit.seconds = b.audit.seconds = 0;  // Timings.
      EXPECT_EQ(LayerResultToTaskJson(b).dump(),
                LayerResultToTaskJson(a).dump())
          << a.name;
      EXPECT_EQ(b.choices.hessian_flops, a.choices.hessian_flops) << a.name;
    }
    EXPECT_EQ(audited, recipe == &rtn ? 4 : 7);
  }
}

// What the held-out audit after the last reduce refuses: an AWQ group
// (its audit needs the group's input scale, so its reduce waits for the
// held-out shards), a block not fully reduced, audits already complete.
TEST_F(BlockRoundsTest, HeldoutAuditsLaterRefuseWhatTheyCannotMeasure) {
  const Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 40, 32);
  Load(awq);
  if (HasFatalFailure()) return;
  absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
  ASSERT_TRUE(state.ok()) << state.status();
  std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
      Gather(*state, true);
  std::vector<const GroupActivationStatistics*> shards;
  for (const auto& s : calibration) shards.push_back(s.get());
  RoundReduceOptions later;
  later.heldout_later = true;
  absl::Status awq_reduce = ReduceBlockRound(input_, shards, &*state, later);
  EXPECT_EQ(awq_reduce.code(), absl::StatusCode::kFailedPrecondition)
      << awq_reduce;
  EXPECT_NE(awq_reduce.message().find("AWQ"), std::string::npos) << awq_reduce;
  EXPECT_EQ(state->groups_done, 0) << "a refused reduce changes nothing";

  const Recipe gptq = GptqAutoDamp();
  Load(gptq);
  if (HasFatalFailure()) return;
  state = StartBlockRounds(input_);
  ASSERT_TRUE(state.ok()) << state.status();
  std::vector<HessianAccumulator> sums;
  for (int g = 0; g < kBlockRoundGroups; ++g) sums.emplace_back(0);
  absl::Status early = AuditBlockRoundsHeldout(input_, sums, &*state);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;

  absl::StatusOr<BlockTaskOutput> whole = RunRounds();
  ASSERT_TRUE(whole.ok()) << whole.status();
  // Reduces given both splits leave nothing pending.
  BlockRoundState done;
  done.groups_done = kBlockRoundGroups;
  done.working = whole->effective;
  done.layers = whole->layers;
  const int first_of_group[kBlockRoundGroups] = {0, 3, 4, 6};  // q o gate down
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    sums[g] = HessianAccumulator(
        whole->layers[first_of_group[g]].layer.dequantized.cols());
  }
  absl::Status again = AuditBlockRoundsHeldout(input_, sums, &done);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_NE(again.message().find("no held-out part left"), std::string::npos)
      << again;
}

// A shard's rounds continue from what its previous round kept (a worker's
// ShardStashCache) with the same bytes as computing the block from the
// shard's entering states; what a reduce's weights made stale is computed
// again: AWQ's o_proj scales fold into v_proj, so the context kept after
// the q/k/v round is not used for the gate/up round's residual.
TEST_F(BlockRoundsTest, StashedShardsGiveTheSameBytes) {
  const Recipe gptq = GptqAutoDamp();
  const Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 40, 32);
  for (const Recipe* recipe : {&gptq, &awq}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    Load(*recipe);
    if (HasFatalFailure()) return;
    // Without grouped-query attention, so that AWQ folds o_proj's scales.
    ModelConfig config = loaded_.model->config();
    testing::ToMultiHead(&config, &input_.weights);
    input_.config = &config;
    use_stash_ = false;
    absl::StatusOr<BlockTaskOutput> recomputed = RunRounds();
    ASSERT_TRUE(recomputed.ok()) << recomputed.status();
    use_stash_ = true;
    absl::StatusOr<BlockTaskOutput> stashed = RunRounds();
    ASSERT_TRUE(stashed.ok()) << stashed.status();
    ASSERT_EQ(stashed->tensors.size(), recomputed->tensors.size());
    for (size_t i = 0; i < recomputed->tensors.size(); ++i) {
      EXPECT_TRUE(stashed->tensors[i].bytes == recomputed->tensors[i].bytes)
          << recomputed->tensors[i].name;
    }
    EXPECT_TRUE(stashed->calibration_out.rows ==
                recomputed->calibration_out.rows);
    const int calibration_shards = static_cast<int>(
        PlanShards(static_cast<int64_t>(input_.calibration.lengths.size()))
            .size());
    const int shards =
        calibration_shards +
        static_cast<int>(
            PlanShards(static_cast<int64_t>(input_.heldout.lengths.size()))
                .size());
    // Nothing kept before the context; the residual continues the down
    // round and the output in both.
    EXPECT_EQ(continued_[0], 0);
    EXPECT_EQ(continued_[1], 0);
    EXPECT_EQ(continued_[2], recipe == &awq ? 0 : shards);
    EXPECT_EQ(continued_[3], shards);
    EXPECT_EQ(continued_[kBlockRoundGroups], calibration_shards);
    if (recipe == &awq) {
      EXPECT_EQ(stashed->layers[3].awq_fold, "v_proj");
      EXPECT_EQ(stashed->layers[6].awq_fold, "up_proj");
    }
  }
  use_stash_ = false;
}

TEST_F(BlockRoundsTest, ShardFilesHoldHalfOfEachSumAndRefuseWhatDoesNotFit) {
  const Recipe recipe = GptqAutoDamp();
  Load(recipe);
  if (HasFatalFailure()) return;
  absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
  ASSERT_TRUE(state.ok()) << state.status();
  std::vector<std::unique_ptr<GroupActivationStatistics>> shards =
      GatherInMemory(*state, true);
  ASSERT_GE(shards.size(), 2u);
  const GroupActivationStatistics& shard = *shards[1];
  const std::string path = temp_ + "/shard.safetensors";
  ASSERT_TRUE(WriteShardStatistics(path, shard).ok());
  // damp: auto: the calibration sum and its two parts; no held-out sum.
  const int64_t k = shard.k();
  const int64_t size = static_cast<int64_t>(ReadOrEmpty(path).size());
  EXPECT_GE(size, 3 * ShardTriangleBytes(k));
  EXPECT_LT(size, 3 * ShardTriangleBytes(k) + 4096);
  auto read = EmptyShardStatistics(input_, *state);
  ASSERT_TRUE(read.ok() && *read != nullptr) << read.status();
  ASSERT_TRUE(ReadShardStatistics(path, read->get()).ok());
  EXPECT_EQ((*read)->calibration().Finish(), shard.calibration().Finish());
  EXPECT_EQ((*read)->split()->train().Finish(),
            shard.split()->train().Finish());
  EXPECT_EQ((*read)->split()->first_token(), shard.split()->first_token());
  EXPECT_EQ((*read)->calibration_tokens(), shard.calibration_tokens());

  // Read into statistics that already hold sums.
  EXPECT_EQ(ReadShardStatistics(path, read->get()).code(),
            absl::StatusCode::kFailedPrecondition);
  // Another group's statistics: o_proj's group has another K.
  BlockRoundState later = *state;
  later.groups_done = 3;  // down_proj: K = 172, not 64.
  auto other = EmptyShardStatistics(input_, later);
  ASSERT_TRUE(other.ok() && *other != nullptr) << other.status();
  const absl::Status wrong_k = ReadShardStatistics(path, other->get());
  EXPECT_EQ(wrong_k.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_k.message(), HasSubstr("metadata k = 64"));
  // A group without damp: auto does not take the split.
  const Recipe plain = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                                   Propagation::kSequential, 40, 32);
  BlockTaskInput plain_input = input_;
  plain_input.recipe = &plain;
  for (auto& [type, settings] : plain_input.settings) {
    settings.damp.automatic = false;
  }
  auto plain_state = StartBlockRounds(plain_input);
  ASSERT_TRUE(plain_state.ok());
  auto no_split = EmptyShardStatistics(plain_input, *plain_state);
  ASSERT_TRUE(no_split.ok() && *no_split != nullptr);
  const absl::Status extra = ReadShardStatistics(path, no_split->get());
  EXPECT_EQ(extra.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(extra.message(), HasSubstr("damp: auto"));

  // A non-finite sum, and a file cut short.
  std::string bytes = ReadOrEmpty(path);
  ASSERT_FALSE(bytes.empty());
  const float nan = std::nanf("");
  std::memcpy(&bytes[bytes.size() - sizeof(float)], &nan, sizeof(float));
  ASSERT_TRUE(WriteFileAtomically(temp_ + "/nan.safetensors", bytes).ok());
  auto fresh = EmptyShardStatistics(input_, *state);
  ASSERT_TRUE(fresh.ok() && *fresh != nullptr);
  const absl::Status not_finite =
      ReadShardStatistics(temp_ + "/nan.safetensors", fresh->get());
  EXPECT_EQ(not_finite.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_finite.message(), HasSubstr("not finite"));
  ASSERT_TRUE(
      WriteFileAtomically(temp_ + "/short.safetensors", bytes.substr(0, 200))
          .ok());
  EXPECT_FALSE(
      ReadShardStatistics(temp_ + "/short.safetensors", fresh->get()).ok());
  EXPECT_EQ((*fresh)->calibration_tokens(), 0);
}

TEST_F(BlockRoundsTest, RoundDeltasThroughFilesRebuildTheState) {
  const Recipe gptq = GptqAutoDamp();
  const Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 40, 32);
  const Recipe rtn = SmallRecipe(QuantMethod::kRtn, 32, OutputFormat::kGptq,
                                 Propagation::kSequential, 40, 32);
  for (const Recipe* recipe : {&gptq, &awq, &rtn}) {
    SCOPED_TRACE(QuantMethodName(recipe->method));
    Load(*recipe);
    if (HasFatalFailure()) return;
    absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
    ASSERT_TRUE(state.ok()) << state.status();
    BlockRoundState rebuilt = *state;
    int64_t delta_bytes = 0;
    for (int g = 0; g < kBlockRoundGroups; ++g) {
      const BlockRoundState before = *state;
      std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
          GatherInMemory(*state, true);
      std::vector<std::unique_ptr<GroupActivationStatistics>> heldout =
          GatherInMemory(*state, false);
      std::vector<const GroupActivationStatistics*> shards;
      for (const auto& s : calibration) {
        if (s != nullptr) shards.push_back(s.get());
      }
      for (const auto& s : heldout) {
        if (s != nullptr) shards.push_back(s.get());
      }
      ASSERT_TRUE(ReduceBlockRound(input_, shards, &*state).ok());
      absl::StatusOr<BlockRoundDelta> delta = DiffRoundState(before, *state);
      ASSERT_TRUE(delta.ok()) << delta.status();
      const std::string path = absl::StrCat(temp_, "/delta", g, ".safetensors");
      ASSERT_TRUE(WriteRoundDelta(path, *delta).ok());
      delta_bytes += static_cast<int64_t>(ReadOrEmpty(path).size());
      absl::StatusOr<BlockRoundDelta> read = ReadRoundDelta(path);
      ASSERT_TRUE(read.ok()) << read.status();
      // A delta applies only to the state it was taken from.
      BlockRoundState stale = rebuilt;
      if (g > 0) {
        stale.groups_done = 0;
        EXPECT_EQ(ApplyRoundDelta(*read, &stale).code(),
                  absl::StatusCode::kFailedPrecondition);
      }
      ASSERT_TRUE(ApplyRoundDelta(*read, &rebuilt).ok());
      ASSERT_EQ(rebuilt.groups_done, state->groups_done);
      EXPECT_EQ(rebuilt.working.input_norm, state->working.input_norm);
      EXPECT_EQ(rebuilt.working.post_attention_norm,
                state->working.post_attention_norm);
      for (const auto& [type, linear] : state->working.linear) {
        EXPECT_EQ(rebuilt.working.Linear(type).weight, linear.weight)
            << LayerTypeName(type) << " after group " << g;
        EXPECT_EQ(rebuilt.working.Linear(type).bias, linear.bias);
      }
      for (size_t i = 0; i < state->layers.size(); ++i) {
        EXPECT_EQ(LayerResultToTaskJson(rebuilt.layers[i]),
                  LayerResultToTaskJson(state->layers[i]));
        EXPECT_EQ(rebuilt.layers[i].layer.dequantized,
                  state->layers[i].layer.dequantized)
            << state->layers[i].name;
      }
    }
    absl::StatusOr<BlockTaskOutput> held = FinishBlockRounds(input_, *state);
    absl::StatusOr<BlockTaskOutput> from_files =
        FinishBlockRounds(input_, rebuilt);
    ASSERT_TRUE(held.ok() && from_files.ok());
    ASSERT_EQ(held->tensors.size(), from_files->tensors.size());
    for (size_t i = 0; i < held->tensors.size(); ++i) {
      EXPECT_EQ(from_files->tensors[i].bytes, held->tensors[i].bytes)
          << held->tensors[i].name;
    }
    int64_t weight_bytes = 0;
    for (const auto& [type, linear] : state->working.linear) {
      weight_bytes += linear.weight.size() * 4;
    }
    std::cout << QuantMethodName(recipe->method) << ": deltas " << delta_bytes
              << " bytes over 4 rounds; the block's float32 weights "
              << weight_bytes << " bytes per round\n";
  }
}

// A group reduced a layer at a time (each layer its own task) publishes,
// merged, the whole group's delta byte for byte: GPTQ quantizes a group's
// layers on one factor in the block task and each alone here. AWQ's groups
// and layers outside the group are refused.
TEST_F(BlockRoundsTest, LayerReducesMergeToTheGroupsDelta) {
  Recipe gptq =
      SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 40, 32);
  gptq.act_order = true;
  Load(gptq);
  if (HasFatalFailure()) return;
  absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
  ASSERT_TRUE(state.ok()) << state.status();
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    SCOPED_TRACE(absl::StrCat("group ", g));
    std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
        GatherInMemory(*state, true);
    std::vector<std::unique_ptr<GroupActivationStatistics>> heldout =
        GatherInMemory(*state, false);
    std::vector<const GroupActivationStatistics*> shards;
    for (const auto& s : calibration) shards.push_back(s.get());
    for (const auto& s : heldout) shards.push_back(s.get());
    const BlockRoundState before = *state;
    ASSERT_TRUE(ReduceBlockRound(input_, shards, &*state).ok());
    absl::StatusOr<BlockRoundDelta> whole = DiffRoundState(before, *state);
    ASSERT_TRUE(whole.ok()) << whole.status();
    const std::vector<std::optional<LayerType>> reduces =
        RoundGroupReduces(g, /*by_layer=*/true);
    EXPECT_EQ(reduces.size(), BlockRoundGroupTypes(g).size() > 1
                                  ? BlockRoundGroupTypes(g).size()
                                  : 1u);
    std::vector<BlockRoundDelta> parts;
    for (const std::optional<LayerType>& layer : reduces) {
      BlockRoundState alone = before;
      const absl::Status reduced =
          ReduceBlockRound(input_, shards, &alone, layer);
      ASSERT_TRUE(reduced.ok()) << reduced;
      absl::StatusOr<BlockRoundDelta> part = DiffRoundState(before, alone);
      ASSERT_TRUE(part.ok()) << part.status();
      if (layer.has_value()) {
        ASSERT_EQ(part->layers.size(), 1u);
        EXPECT_EQ(part->layers[0].type, *layer);
      }
      parts.push_back(*std::move(part));
    }
    absl::StatusOr<BlockRoundDelta> merged = MergeLayerDeltas(parts);
    ASSERT_TRUE(merged.ok()) << merged.status();
    // The audits' timings are the only thing that may differ.
    for (BlockRoundDelta* delta : {&*whole, &*merged}) {
      for (LayerResult& layer : delta->layers) layer.audit.seconds = 0.0;
    }
    const std::string whole_path = absl::StrCat(temp_, "/whole", g);
    const std::string merged_path = absl::StrCat(temp_, "/merged", g);
    ASSERT_TRUE(WriteRoundDelta(whole_path, *whole).ok());
    ASSERT_TRUE(WriteRoundDelta(merged_path, *merged).ok());
    const std::string whole_bytes = ReadOrEmpty(whole_path);
    EXPECT_FALSE(whole_bytes.empty());
    EXPECT_TRUE(ReadOrEmpty(merged_path) == whole_bytes);
    if (parts.size() > 1) {
      // A layer's delta twice is not one group's.
      std::vector<BlockRoundDelta> twice = {parts[0], parts[0]};
      EXPECT_EQ(MergeLayerDeltas(twice).status().code(),
                absl::StatusCode::kInvalidArgument);
    }
    // A layer of another group.
    BlockRoundState other = before;
    const LayerType outside = BlockRoundGroupTypes((g + 1) % 4).front();
    const absl::Status refused =
        ReduceBlockRound(input_, shards, &other, outside);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  }

  const Recipe awq =
      SmallRecipe(QuantMethod::kAwq, 32, OutputFormat::kCompressedTensors,
                  Propagation::kSequential, 40, 32);
  EXPECT_FALSE(RoundReducesByLayer(awq));
  EXPECT_TRUE(RoundReducesByLayer(gptq));
  Recipe awq_override = gptq;
  awq_override.overrides.emplace_back();
  awq_override.overrides.back().method = QuantMethod::kAwq;
  EXPECT_FALSE(RoundReducesByLayer(awq_override));
  Load(awq);
  if (HasFatalFailure()) return;
  absl::StatusOr<BlockRoundState> awq_state = StartBlockRounds(input_);
  ASSERT_TRUE(awq_state.ok()) << awq_state.status();
  std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
      GatherInMemory(*awq_state, true);
  std::vector<std::unique_ptr<GroupActivationStatistics>> heldout =
      GatherInMemory(*awq_state, false);
  std::vector<const GroupActivationStatistics*> shards;
  for (const auto& s : calibration) shards.push_back(s.get());
  for (const auto& s : heldout) shards.push_back(s.get());
  const absl::Status refused =
      ReduceBlockRound(input_, shards, &*awq_state, LayerType::kQProj);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("AWQ"));
}

TEST_F(BlockRoundsTest, RoundDeltaFilesThatDoNotFitAreRefused) {
  const Recipe recipe = GptqAutoDamp();
  Load(recipe);
  if (HasFatalFailure()) return;
  absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
  ASSERT_TRUE(state.ok()) << state.status();
  const BlockRoundState before = *state;
  std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
      GatherInMemory(*state, true);
  std::vector<std::unique_ptr<GroupActivationStatistics>> heldout =
      GatherInMemory(*state, false);
  std::vector<const GroupActivationStatistics*> shards;
  for (const auto& s : calibration) shards.push_back(s.get());
  for (const auto& s : heldout) shards.push_back(s.get());
  ASSERT_TRUE(ReduceBlockRound(input_, shards, &*state).ok());
  absl::StatusOr<BlockRoundDelta> delta = DiffRoundState(before, *state);
  ASSERT_TRUE(delta.ok()) << delta.status();
  ASSERT_EQ(delta->layers.size(), 3u);  // q, k and v.

  // A g_idx naming a group the scales do not have.
  BlockRoundDelta bad_group = *delta;
  bad_group.layers[0].layer.g_idx[0] = 1000;
  ASSERT_TRUE(WriteRoundDelta(temp_ + "/g.safetensors", bad_group).ok());
  const absl::StatusOr<BlockRoundDelta> group =
      ReadRoundDelta(temp_ + "/g.safetensors");
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(group.status().message(), HasSubstr("g_idx names group 1000"));
  // Scales of another shape than the layer's rows.
  BlockRoundDelta bad_shape = *delta;
  QuantizedLayer& k_proj = bad_shape.layers[1].layer;
  k_proj.rows += 1;
  k_proj.codes.conservativeResize(k_proj.rows, k_proj.cols);
  k_proj.codes.bottomRows(1).setZero();
  ASSERT_TRUE(WriteRoundDelta(temp_ + "/s.safetensors", bad_shape).ok());
  const absl::StatusOr<BlockRoundDelta> shape =
      ReadRoundDelta(temp_ + "/s.safetensors");
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("k_proj.scales/.zeros"));
  // A count of groups done that the block does not have.
  BlockRoundDelta too_far = *delta;
  too_far.groups_done = kBlockRoundGroups + 1;
  ASSERT_TRUE(WriteRoundDelta(temp_ + "/n.safetensors", too_far).ok());
  const absl::StatusOr<BlockRoundDelta> far =
      ReadRoundDelta(temp_ + "/n.safetensors");
  EXPECT_EQ(far.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(far.status().message(),
              HasSubstr("groups_done = 5 is not a count of layer groups"));
  // A shard statistics file is not a round delta.
  std::vector<std::unique_ptr<GroupActivationStatistics>> fresh =
      GatherInMemory(before, true);
  ASSERT_TRUE(WriteShardStatistics(temp_ + "/x.safetensors", *fresh[0]).ok());
  EXPECT_THAT(ReadRoundDelta(temp_ + "/x.safetensors").status().message(),
              HasSubstr("metadata round is missing"));
}

TEST_F(BlockRoundsTest, ShardsOutOfOrderMissingOrLateAreRefused) {
  const Recipe recipe = GptqAutoDamp();
  Load(recipe);
  if (HasFatalFailure()) return;
  absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
  ASSERT_TRUE(state.ok()) << state.status();
  std::vector<std::unique_ptr<GroupActivationStatistics>> calibration =
      Gather(*state, true);
  ASSERT_GE(calibration.size(), 2u);
  // damp: auto's split continues across shards: a shard merged before the
  // one it follows does not fit.
  BlockRoundState swapped = *state;
  const absl::Status out_of_order = ReduceBlockRound(
      input_, {calibration[1].get(), calibration[0].get()}, &swapped);
  EXPECT_EQ(out_of_order.code(), absl::StatusCode::kInvalidArgument)
      << out_of_order;
  EXPECT_THAT(out_of_order.message(), HasSubstr("shard starts at token"));
  EXPECT_EQ(swapped.groups_done, 0);
  // A missing shard leaves a gap the next one does not fit either.
  BlockRoundState gap = *state;
  EXPECT_EQ(ReduceBlockRound(input_,
                             {calibration[0].get(), calibration[2].get()}, &gap)
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A refused shard adds nothing to the totals.
  auto totals = EmptyShardStatistics(input_, *state);
  ASSERT_TRUE(totals.ok() && *totals != nullptr);
  ASSERT_TRUE((*totals)->MergeShard(*calibration[0]).ok());
  const int64_t tokens = (*totals)->calibration_tokens();
  EXPECT_FALSE((*totals)->MergeShard(*calibration[2]).ok());
  EXPECT_EQ((*totals)->calibration_tokens(), tokens);
  // The output before every group is reduced.
  const MemoryHiddenStateSource source(&input_.calibration);
  MemoryHiddenStateSink sink(input_.calibration.seq_len,
                             input_.calibration.lengths,
                             input_.calibration.rows.cols());
  const absl::Status early = WriteShardOutput(input_, *state, source, &sink);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition) << early;
  EXPECT_EQ(FinishBlockRounds(input_, *state).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(BlockRoundsTest, IndependentPropagationRunsAsOneTask) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  Load(recipe);
  if (HasFatalFailure()) return;
  const absl::StatusOr<BlockRoundState> state = StartBlockRounds(input_);
  EXPECT_EQ(state.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(state.status().message(), HasSubstr("one block task"));
}

TEST(GroupActivationStatisticsTest, AShardThatComesBackIsRefused) {
  const int64_t k = 8;
  const RowMatrixF weight = RowMatrixF::Random(4, k);
  const GroupLayerInput layer{"l", LayerSettings(), ConstRowMatrixRef(weight),
                              nullptr};
  GroupQuantizeOptions options;
  GroupActivationStatistics statistics(k, {layer}, options);
  const RowMatrixF rows = RowMatrixF::Random(5, k);
  ASSERT_TRUE(statistics.AddCalibration(rows, 0).ok());
  ASSERT_TRUE(statistics.AddCalibration(rows, 1).ok());
  EXPECT_TRUE(statistics.has_open_shard());
  const absl::Status back = statistics.AddCalibration(rows, 0);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(back.message(), HasSubstr("comes after shard 1"));
  ASSERT_TRUE(statistics.CloseShards().ok());
  EXPECT_EQ(statistics.calibration_tokens(), 10);
  // Held-out shards are their own sequence.
  ASSERT_TRUE(statistics.AddHeldout(rows, 0).ok());
  ASSERT_TRUE(statistics.CloseShards().ok());
  EXPECT_EQ(statistics.heldout_tokens(), 5);
}

}  // namespace
}  // namespace quant
