// Chunked hidden-state sources and sinks; see hidden_state_stream.h.
#include "core/pipeline/hidden_state_stream.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

constexpr char kHiddenTensor[] = "hidden";
constexpr char kLengthsTensor[] = "lengths";
constexpr char kSeqLenKey[] = "seq_len";

absl::Status CheckRange(const HiddenStateSource& source, SequenceRange range) {
  if (range.first < 0 || range.count < 0 ||
      range.first + range.count > source.sequences()) {
    return absl::OutOfRangeError(absl::StrCat(
        "sequences [", range.first, ", ", range.first + range.count,
        ") outside the ", source.sequences(), " held"));
  }
  return absl::OkStatus();
}

absl::string_view RowBytes(const ConstRowMatrixRef& rows) {
  return absl::string_view(reinterpret_cast<const char*>(rows.data()),
                           sizeof(float) * rows.size());
}

}  // namespace

std::vector<SequenceRange> PlanChunks(int64_t sequences, int seq_len,
                                      int64_t chunk_tokens) {
  const int64_t per_chunk =
      std::max<int64_t>(1, chunk_tokens / std::max(seq_len, 1));
  std::vector<SequenceRange> chunks;
  for (const SequenceRange& shard : PlanShards(sequences)) {
    const int64_t end = shard.first + shard.count;
    for (int64_t first = shard.first; first < end; first += per_chunk) {
      chunks.push_back({first, std::min(per_chunk, end - first)});
    }
  }
  return chunks;
}

std::vector<SequenceRange> PlanShards(int64_t sequences) {
  std::vector<SequenceRange> shards;
  for (int64_t first = 0; first < sequences; first += kShardSequences) {
    shards.push_back({first, std::min(kShardSequences, sequences - first)});
  }
  return shards;
}

int64_t HiddenStateBytes(int64_t sequences, int seq_len, int64_t hidden) {
  return sequences * seq_len * hidden * static_cast<int64_t>(sizeof(float));
}

std::string DescribeSpill(int64_t bytes, int64_t bound,
                          const std::string& dir) {
  constexpr double kMiB = 1 << 20;
  return absl::StrFormat(
      "hidden states of %.1f MiB exceed the bound of %.1f MiB: kept in files "
      "under %s and read a chunk at a time",
      static_cast<double>(bytes) / kMiB, static_cast<double>(bound) / kMiB,
      dir);
}

absl::StatusOr<RowMatrixF> MemoryHiddenStateSource::Read(
    SequenceRange range) const {
  QUANT_RETURN_IF_ERROR(CheckRange(*this, range));
  return RowMatrixF(states_.rows.middleRows(range.first * states_.seq_len,
                                            range.count * states_.seq_len));
}

absl::StatusOr<std::unique_ptr<HiddenStateFile>> HiddenStateFile::Open(
    const std::string& path, FileSystem* fs) {
  std::unique_ptr<HiddenStateFile> out(new HiddenStateFile());
  QUANT_ASSIGN_OR_RETURN(out->file_, SafetensorsFile::Open(path, {}, fs));
  const SafetensorsFile& file = *out->file_;
  QUANT_ASSIGN_OR_RETURN(const int64_t seq_len, file.MetadataCount(kSeqLenKey));
  if (seq_len <= 0 || seq_len > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": metadata seq_len = ", seq_len, " is not a sequence length"));
  }
  out->seq_len_ = static_cast<int>(seq_len);
  const TensorInfo* hidden = file.Find(kHiddenTensor);
  const TensorInfo* lengths = file.Find(kLengthsTensor);
  if (hidden == nullptr || hidden->dtype != DType::kF32 ||
      hidden->shape.size() != 2 || lengths == nullptr ||
      lengths->dtype != DType::kI32 || lengths->shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": needs \"hidden\" F32 [rows, hidden] and \"lengths\" I32 [n]"));
  }
  const int64_t sequences = lengths->shape[0];
  if (hidden->shape[0] != sequences * out->seq_len_) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", hidden->shape[0], " hidden rows for ",
                     sequences, " sequences of ", out->seq_len_));
  }
  const absl::Span<const uint8_t> length_bytes = file.RawBytes(*lengths);
  out->lengths_.resize(sequences);
  for (int64_t i = 0; i < sequences; ++i) {
    int32_t length = 0;
    std::memcpy(&length, length_bytes.data() + 4 * i, 4);
    if (length < 0 || length > out->seq_len_) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": lengths[", i, "] = ", length, " outside [0, ",
                       out->seq_len_, "]"));
    }
    out->lengths_[i] = length;
  }
  out->hidden_ = hidden;
  out->hidden_size_ = hidden->shape[1];
  return out;
}

absl::StatusOr<RowMatrixF> HiddenStateFile::Read(SequenceRange range) const {
  QUANT_RETURN_IF_ERROR(CheckRange(*this, range));
  RowMatrixF rows(range.count * seq_len_, hidden_size_);
  const uint64_t row_bytes = sizeof(float) * hidden_size_;
  const uint64_t begin = range.first * seq_len_ * row_bytes;
  const uint64_t bytes = rows.rows() * row_bytes;
  if (bytes > 0) {
    std::memcpy(rows.data(), file_->RawBytes(*hidden_).data() + begin, bytes);
  }
  file_->ReleaseBytes(*hidden_, begin, begin + bytes);
  return rows;
}

MemoryHiddenStateSink::MemoryHiddenStateSink(int seq_len,
                                             std::vector<int> lengths,
                                             int64_t hidden_size) {
  states_.seq_len = seq_len;
  states_.lengths = std::move(lengths);
  states_.rows.resize(static_cast<int64_t>(states_.lengths.size()) * seq_len,
                      hidden_size);
}

absl::Status MemoryHiddenStateSink::Append(const ConstRowMatrixRef& rows) {
  if (rows.cols() != states_.rows.cols() ||
      rows_written_ + rows.rows() > states_.rows.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden states: appending [", rows.rows(), ", ",
                     rows.cols(), "] after ", rows_written_, " of [",
                     states_.rows.rows(), ", ", states_.rows.cols(), "] rows"));
  }
  states_.rows.middleRows(rows_written_, rows.rows()) = rows;
  rows_written_ += rows.rows();
  return absl::OkStatus();
}

absl::Status MemoryHiddenStateSink::Finish() {
  if (rows_written_ != states_.rows.rows()) {
    return absl::FailedPreconditionError(
        absl::StrCat("hidden states: ", rows_written_, " of ",
                     states_.rows.rows(), " rows appended"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HiddenStateFileWriter>>
HiddenStateFileWriter::Create(const std::string& path, int seq_len,
                              std::vector<int> lengths, int64_t hidden_size,
                              FileSystem* fs) {
  std::unique_ptr<HiddenStateFileWriter> out(new HiddenStateFileWriter());
  out->lengths_.assign(lengths.begin(), lengths.end());
  out->hidden_size_ = hidden_size;
  const int64_t sequences = static_cast<int64_t>(lengths.size());
  QUANT_ASSIGN_OR_RETURN(
      out->writer_,
      SafetensorsStreamWriter::Create(
          path,
          {{kHiddenTensor, DType::kF32, {sequences * seq_len, hidden_size}},
           {kLengthsTensor, DType::kI32, {sequences}}},
          {{kSeqLenKey, absl::StrCat(seq_len)}}, fs));
  return out;
}

absl::Status HiddenStateFileWriter::Append(const ConstRowMatrixRef& rows) {
  if (rows.cols() != hidden_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden states: appending rows of width ", rows.cols(),
                     " to a file of width ", hidden_size_));
  }
  return writer_->Append(RowBytes(rows));
}

absl::Status HiddenStateFileWriter::Finish() {
  QUANT_RETURN_IF_ERROR(writer_->Append(VectorBytes(lengths_)));
  return writer_->Commit();
}

absl::Status WriteHiddenStates(const std::string& path,
                               const HiddenStates& states, FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(
      std::unique_ptr<HiddenStateFileWriter> writer,
      HiddenStateFileWriter::Create(path, states.seq_len, states.lengths,
                                    states.rows.cols(), fs));
  QUANT_RETURN_IF_ERROR(writer->Append(states.rows));
  return writer->Finish();
}

absl::StatusOr<HiddenStates> ReadHiddenStates(const std::string& path,
                                              FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFile> file,
                         HiddenStateFile::Open(path, fs));
  HiddenStates states;
  states.seq_len = file->seq_len();
  states.lengths = file->lengths();
  QUANT_ASSIGN_OR_RETURN(states.rows, file->Read({0, file->sequences()}));
  return states;
}

absl::StatusOr<std::unique_ptr<HiddenStateSource>> ProduceHiddenStates(
    int seq_len, const std::vector<int>& lengths, int64_t hidden_size,
    const HiddenStateProducer& produce, const std::string& spill_path,
    int64_t chunk_tokens, FileSystem* fs) {
  const std::vector<SequenceRange> chunks =
      PlanChunks(static_cast<int64_t>(lengths.size()), seq_len, chunk_tokens);
  auto append_all = [&](HiddenStateSink* sink) -> absl::Status {
    for (const SequenceRange& chunk : chunks) {
      QUANT_ASSIGN_OR_RETURN(const RowMatrixF rows, produce(chunk));
      QUANT_RETURN_IF_ERROR(sink->Append(rows));
    }
    return sink->Finish();
  };
  if (spill_path.empty()) {
    MemoryHiddenStateSink sink(seq_len, lengths, hidden_size);
    QUANT_RETURN_IF_ERROR(append_all(&sink));
    return std::make_unique<OwnedHiddenStateSource>(std::move(sink.states()));
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFileWriter> writer,
                         HiddenStateFileWriter::Create(
                             spill_path, seq_len, lengths, hidden_size, fs));
  QUANT_RETURN_IF_ERROR(append_all(writer.get()));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFile> file,
                         HiddenStateFile::Open(spill_path, fs));
  return std::unique_ptr<HiddenStateSource>(std::move(file));
}

absl::Status CopyHiddenStates(const HiddenStateSource& source,
                              HiddenStateSink* sink, int64_t chunk_tokens) {
  for (const SequenceRange& chunk :
       PlanChunks(source.sequences(), source.seq_len(), chunk_tokens)) {
    QUANT_ASSIGN_OR_RETURN(const RowMatrixF rows, source.Read(chunk));
    QUANT_RETURN_IF_ERROR(sink->Append(rows));
  }
  return sink->Finish();
}

}  // namespace quant
