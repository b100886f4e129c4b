// Hidden states read and written a chunk of whole sequences at a time, from
// memory or from files, so a task's activations need not fit in memory.
//
// A block task reads the states entering its block once per layer group and
// writes the leaving states once, always in the same chunks (PlanChunks), so
// its results do not depend on where the states are kept: a task whose
// states exceed its memory bound reads them from the file the previous task
// wrote (or a spill file) and gets the same bytes as one holding them all.
//
// File layout (task_io.h): safetensors with "hidden" F32
// [sequences * seq_len, hidden] and "lengths" I32 [sequences]; metadata
// seq_len.
#ifndef QUANT_CORE_PIPELINE_HIDDEN_STATE_STREAM_H_
#define QUANT_CORE_PIPELINE_HIDDEN_STATE_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/io/safetensors.h"
#include "core/quant/matrix_types.h"

namespace quant {

// Hidden states of equal-length sequences, [sequences * seq_len, hidden];
// rows at or past lengths[i] in sequence i are padding, left out of every
// statistic.
struct HiddenStates {
  int seq_len = 0;
  std::vector<int> lengths;
  RowMatrixF rows;
};

// Sequences [first, first + count).
struct SequenceRange {
  int64_t first = 0;
  int64_t count = 0;
};

// Rows per chunk a block task works on: a 7B model's chunk working set
// (a few [2048, 11008] float matrices) stays in the hundreds of MiB.
inline constexpr int64_t kDefaultChunkTokens = 2048;

// Sequences per shard: a split's statistics are summed per shard and the
// shards added in order (GroupActivationStatistics), so a shard can be
// gathered by another worker and give the same bytes. Fixed, never derived
// from the worker count, so a job's bytes do not depend on its pool.
inline constexpr int64_t kShardSequences = 16;

// Consecutive chunks of whole sequences covering all `sequences`, each at
// most `chunk_tokens` rows (padding counted) but at least one sequence, and
// none crossing a shard's edge.
std::vector<SequenceRange> PlanChunks(int64_t sequences, int seq_len,
                                      int64_t chunk_tokens);

// The shards of `sequences`: kShardSequences each, the last one shorter.
std::vector<SequenceRange> PlanShards(int64_t sequences);

// The shard a chunk of PlanChunks lies in.
inline int64_t ShardOf(SequenceRange chunk) {
  return chunk.first / kShardSequences;
}

// Bytes of a [sequences * seq_len, hidden] float matrix.
int64_t HiddenStateBytes(int64_t sequences, int seq_len, int64_t hidden);

// The progress line of a task whose `bytes` of hidden states exceed its
// `bound` and are kept in files under `dir`.
std::string DescribeSpill(int64_t bytes, int64_t bound, const std::string& dir);

class HiddenStateSource {
 public:
  virtual ~HiddenStateSource() = default;
  virtual int seq_len() const = 0;
  virtual const std::vector<int>& lengths() const = 0;
  virtual int64_t hidden_size() const = 0;
  // Rows of `range`'s sequences, [range.count * seq_len, hidden].
  virtual absl::StatusOr<RowMatrixF> Read(SequenceRange range) const = 0;

  int64_t sequences() const { return static_cast<int64_t>(lengths().size()); }
};

// Reads from a HiddenStates held in memory (not owned).
class MemoryHiddenStateSource : public HiddenStateSource {
 public:
  explicit MemoryHiddenStateSource(const HiddenStates* states)
      : states_(*states) {}
  int seq_len() const override { return states_.seq_len; }
  const std::vector<int>& lengths() const override { return states_.lengths; }
  int64_t hidden_size() const override { return states_.rows.cols(); }
  absl::StatusOr<RowMatrixF> Read(SequenceRange range) const override;

 private:
  const HiddenStates& states_;
};

// Owns the HiddenStates it reads from.
class OwnedHiddenStateSource : public HiddenStateSource {
 public:
  explicit OwnedHiddenStateSource(HiddenStates states)
      : states_(std::move(states)), view_(&states_) {}
  int seq_len() const override { return states_.seq_len; }
  const std::vector<int>& lengths() const override { return states_.lengths; }
  int64_t hidden_size() const override { return states_.rows.cols(); }
  absl::StatusOr<RowMatrixF> Read(SequenceRange range) const override {
    return view_.Read(range);
  }

 private:
  HiddenStates states_;
  MemoryHiddenStateSource view_;
};

// Reads a hidden-states file a chunk at a time: memory-mapped, each chunk's
// pages dropped once copied, so only the chunk is resident.
class HiddenStateFile : public HiddenStateSource {
 public:
  // Errors name the file and what is wrong (missing tensor, wrong dtype or
  // shape, lengths outside [0, seq_len]).
  static absl::StatusOr<std::unique_ptr<HiddenStateFile>> Open(
      const std::string& path, FileSystem* fs = FileSystem::Default());
  int seq_len() const override { return seq_len_; }
  const std::vector<int>& lengths() const override { return lengths_; }
  int64_t hidden_size() const override { return hidden_size_; }
  absl::StatusOr<RowMatrixF> Read(SequenceRange range) const override;

 private:
  HiddenStateFile() = default;
  std::unique_ptr<SafetensorsFile> file_;
  const TensorInfo* hidden_ = nullptr;
  int seq_len_ = 0;
  std::vector<int> lengths_;
  int64_t hidden_size_ = 0;
};

// Takes the rows of consecutive sequences, in order, then Finish().
class HiddenStateSink {
 public:
  virtual ~HiddenStateSink() = default;
  virtual absl::Status Append(const ConstRowMatrixRef& rows) = 0;
  // FailedPrecondition unless every sequence's rows were appended.
  virtual absl::Status Finish() = 0;
};

// Collects into a HiddenStates in memory.
class MemoryHiddenStateSink : public HiddenStateSink {
 public:
  MemoryHiddenStateSink(int seq_len, std::vector<int> lengths,
                        int64_t hidden_size);
  absl::Status Append(const ConstRowMatrixRef& rows) override;
  absl::Status Finish() override;
  // Valid after Finish().
  HiddenStates& states() { return states_; }

 private:
  HiddenStates states_;
  int64_t rows_written_ = 0;
};

// Streams into a hidden-states file, which appears atomically at Finish.
class HiddenStateFileWriter : public HiddenStateSink {
 public:
  static absl::StatusOr<std::unique_ptr<HiddenStateFileWriter>> Create(
      const std::string& path, int seq_len, std::vector<int> lengths,
      int64_t hidden_size, FileSystem* fs = FileSystem::Default());
  absl::Status Append(const ConstRowMatrixRef& rows) override;
  absl::Status Finish() override;

 private:
  HiddenStateFileWriter() = default;
  std::unique_ptr<SafetensorsStreamWriter> writer_;
  std::vector<int32_t> lengths_;
  int64_t hidden_size_ = 0;
};

// The whole file / states at once (small states, tests, tools).
absl::Status WriteHiddenStates(const std::string& path,
                               const HiddenStates& states,
                               FileSystem* fs = FileSystem::Default());
absl::StatusOr<HiddenStates> ReadHiddenStates(
    const std::string& path, FileSystem* fs = FileSystem::Default());

// Produces the rows of a chunk of sequences.
using HiddenStateProducer =
    std::function<absl::StatusOr<RowMatrixF>(SequenceRange)>;

// Hidden states of the given layout produced chunk by chunk (PlanChunks)
// and kept in memory or, when `spill_path` is not empty, written to that
// file and read back from it a chunk at a time.
absl::StatusOr<std::unique_ptr<HiddenStateSource>> ProduceHiddenStates(
    int seq_len, const std::vector<int>& lengths, int64_t hidden_size,
    const HiddenStateProducer& produce, const std::string& spill_path,
    int64_t chunk_tokens = kDefaultChunkTokens,
    FileSystem* fs = FileSystem::Default());

// Copies every chunk of `source` into `sink` and finishes it.
absl::Status CopyHiddenStates(const HiddenStateSource& source,
                              HiddenStateSink* sink,
                              int64_t chunk_tokens = kDefaultChunkTokens);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_HIDDEN_STATE_STREAM_H_
