// Hidden states a chunk at a time: the chunk plan covers every sequence
// once, whole, within the token budget; the streamed file is byte for byte
// what WriteHiddenStates writes; chunks read from a file equal the rows in
// memory; and states produced into memory or into a spill file are equal.
#include "core/pipeline/hidden_state_stream.h"

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

HiddenStates RandomStates(int sequences, int seq_len, int hidden) {
  HiddenStates states;
  states.seq_len = seq_len;
  for (int i = 0; i < sequences; ++i) states.lengths.push_back(1 + i % seq_len);
  states.rows = RowMatrixF::Random(sequences * seq_len, hidden);
  return states;
}

TEST(HiddenStateStreamTest, ChunksCoverWholeSequencesWithinTheBudget) {
  const std::vector<SequenceRange> chunks = PlanChunks(10, 64, 200);
  ASSERT_EQ(chunks.size(), 4u);  // 3 sequences (192 rows) per chunk.
  int64_t next = 0;
  for (const SequenceRange& c : chunks) {
    EXPECT_EQ(c.first, next);
    EXPECT_LE(c.count * 64, 200);
    next += c.count;
  }
  EXPECT_EQ(next, 10);
  EXPECT_EQ(chunks.back().count, 1);
  // A sequence longer than the budget still makes a chunk of one.
  const std::vector<SequenceRange> long_ones = PlanChunks(3, 4096, 2048);
  ASSERT_EQ(long_ones.size(), 3u);
  EXPECT_EQ(long_ones[2].first, 2);
  EXPECT_EQ(long_ones[2].count, 1);
  EXPECT_TRUE(PlanChunks(0, 64, 2048).empty());
}

TEST(HiddenStateStreamTest, ChunksNeverCrossAShardEdge) {
  // 5 sequences per chunk would put sequences 15 and 16 (shards 0 and 1)
  // in one chunk; the chunk ends at the shard's edge instead.
  const std::vector<SequenceRange> chunks = PlanChunks(40, 64, 5 * 64);
  int64_t next = 0;
  for (const SequenceRange& c : chunks) {
    EXPECT_EQ(c.first, next);
    EXPECT_LE(c.count, 5);
    EXPECT_EQ(ShardOf(c), (c.first + c.count - 1) / kShardSequences)
        << "chunk [" << c.first << ", " << c.first + c.count << ")";
    next += c.count;
  }
  EXPECT_EQ(next, 40);
  ASSERT_EQ(chunks.size(), 10u);  // 5+5+5+1 twice, then 5+3.
  EXPECT_EQ(chunks[3].first, 15);
  EXPECT_EQ(chunks[3].count, 1);
  // Short sequences: one chunk holds at most a shard.
  for (const SequenceRange& c : PlanChunks(40, 8, 2048)) {
    EXPECT_LE(c.count, kShardSequences);
  }
  const std::vector<SequenceRange> shards = PlanShards(40);
  ASSERT_EQ(shards.size(), 3u);
  EXPECT_EQ(shards[2].first, 32);
  EXPECT_EQ(shards[2].count, 8);
  EXPECT_TRUE(PlanShards(0).empty());
}

TEST(HiddenStateStreamTest, StreamedFileEqualsTheWholeFileAndReadsBack) {
  const HiddenStates states = RandomStates(7, 5, 3);
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteHiddenStates(dir + "/whole.safetensors", states).ok());
  auto writer = HiddenStateFileWriter::Create(dir + "/streamed.safetensors", 5,
                                              states.lengths, 3);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const MemoryHiddenStateSource memory(&states);
  ASSERT_TRUE(CopyHiddenStates(memory, writer->get(), /*chunk_tokens=*/10)
                  .ok());  // Chunks of 2 sequences.
  EXPECT_EQ(*ReadFileToString(dir + "/streamed.safetensors"),
            *ReadFileToString(dir + "/whole.safetensors"));

  auto file = HiddenStateFile::Open(dir + "/streamed.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->seq_len(), 5);
  EXPECT_EQ((*file)->lengths(), states.lengths);
  EXPECT_EQ((*file)->hidden_size(), 3);
  for (const SequenceRange& chunk : PlanChunks(7, 5, 15)) {
    auto rows = (*file)->Read(chunk);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(*rows, states.rows.middleRows(chunk.first * 5, chunk.count * 5));
    // Reading the same chunk again after its pages were dropped.
    EXPECT_EQ(*(*file)->Read(chunk), *rows);
  }
  auto outside = (*file)->Read({6, 2});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(outside.status().message(), HasSubstr("[6, 8)"));
}

TEST(HiddenStateStreamTest, OpenRefusesABadSequenceLengthNamingTheField) {
  const std::string dir = testing::MakeTempDir();
  const std::vector<float> hidden(2 * 4 * 3, 0.5f);
  const std::vector<int32_t> lengths = {4, 2};
  const std::vector<TensorToWrite> tensors = {
      {"hidden", DType::kF32, {8, 3}, VectorBytes(hidden)},
      {"lengths", DType::kI32, {2}, VectorBytes(lengths)}};
  const std::string good = dir + "/good.safetensors";
  ASSERT_TRUE(WriteSafetensors(good, tensors, {{"seq_len", "4"}}).ok());
  auto opened = HiddenStateFile::Open(good);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->seq_len(), 4);
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>>
      cases = {{{}, "metadata seq_len is missing"},
               {{{"seq_len", "four"}}, "metadata seq_len = \"four\""},
               {{{"seq_len", "-4"}}, "metadata seq_len = \"-4\""},
               {{{"seq_len", "0"}}, "seq_len = 0 is not a sequence length"},
               {{{"seq_len", "4294967296"}},
                "seq_len = 4294967296 is not a sequence length"}};
  for (const auto& [metadata, message] : cases) {
    const std::string path = dir + "/bad.safetensors";
    ASSERT_TRUE(WriteSafetensors(path, tensors, metadata).ok());
    auto bad = HiddenStateFile::Open(path);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument)
        << message;
    EXPECT_THAT(bad.status().message(), HasSubstr("bad.safetensors"));
    EXPECT_THAT(bad.status().message(), HasSubstr(message));
  }
}

TEST(HiddenStateStreamTest, SinksRefuseWrongShapesAndShortWrites) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/h.safetensors";
  {
    auto writer = HiddenStateFileWriter::Create(path, 4, {4, 4}, 3);
    ASSERT_TRUE(writer.ok());
    EXPECT_FALSE((*writer)->Append(RowMatrixF::Zero(4, 2)).ok());
    ASSERT_TRUE((*writer)->Append(RowMatrixF::Zero(4, 3)).ok());
    const absl::Status short_write = (*writer)->Finish();
    EXPECT_FALSE(short_write.ok());
  }
  // Nothing appears from a writer that did not finish.
  EXPECT_FALSE(FileExists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));

  MemoryHiddenStateSink sink(4, {4, 4}, 3);
  EXPECT_FALSE(sink.Append(RowMatrixF::Zero(12, 3)).ok());
  ASSERT_TRUE(sink.Append(RowMatrixF::Zero(4, 3)).ok());
  EXPECT_EQ(sink.Finish().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HiddenStateStreamTest, SpilledStatesEqualTheStatesInMemory) {
  const HiddenStates states = RandomStates(9, 4, 6);
  const MemoryHiddenStateSource memory(&states);
  // Each chunk doubled, as a block would transform it.
  auto produce = [&](SequenceRange chunk) -> absl::StatusOr<RowMatrixF> {
    absl::StatusOr<RowMatrixF> rows = memory.Read(chunk);
    if (!rows.ok()) return rows.status();
    return RowMatrixF(2.0f * *rows);
  };
  auto in_memory = ProduceHiddenStates(4, states.lengths, 6, produce, "",
                                       /*chunk_tokens=*/8);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  const std::string spill = testing::MakeTempDir() + "/spill.safetensors";
  auto spilled = ProduceHiddenStates(4, states.lengths, 6, produce, spill,
                                     /*chunk_tokens=*/8);
  ASSERT_TRUE(spilled.ok()) << spilled.status();
  EXPECT_TRUE(FileExists(spill));
  EXPECT_NE(dynamic_cast<const HiddenStateFile*>(spilled->get()), nullptr);
  const RowMatrixF expected = 2.0f * states.rows;
  EXPECT_EQ(*(*in_memory)->Read({0, 9}), expected);
  EXPECT_EQ(*(*spilled)->Read({0, 9}), expected);
  EXPECT_EQ((*spilled)->lengths(), states.lengths);
  // A failing producer fails the whole and leaves no spill file.
  const std::string failed = testing::MakeTempDir() + "/failed.safetensors";
  auto broken = ProduceHiddenStates(
      4, states.lengths, 6,
      [](SequenceRange chunk) -> absl::StatusOr<RowMatrixF> {
        if (chunk.first > 0) return absl::DataLossError("disk gone");
        return RowMatrixF::Zero(chunk.count * 4, 6);
      },
      failed, /*chunk_tokens=*/8);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(FileExists(failed));
}

}  // namespace
}  // namespace quant
