// Reading and writing safetensors files.
//
// Format: 8-byte little-endian header length N, N bytes of JSON mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the byte after the header) plus an optional "__metadata__"
// object of string values, then the data. Files are memory-mapped; the header
// is validated strictly before any tensor byte is touched.
#ifndef QUANT_CORE_IO_SAFETENSORS_H_
#define QUANT_CORE_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/base/dtype.h"
#include "core/base/file_system.h"
#include "core/base/mapped_file.h"
#include "core/base/tensor.h"
#include "core/io/atomic_file_writer.h"

namespace quant {

struct SafetensorsLimits {
  uint64_t max_header_bytes = 100 << 20;  // The reference library's bound.
  int max_rank = 8;
  // Tensors in one file. The largest released checkpoints hold well under
  // 100,000 in all their shards; a header listing 1.5 million once took 8 s
  // and 1.3 GB before it was refused. Counted while the header is parsed
  // (about 12 JSON values a tensor), so the bound holds before memory is
  // spent.
  int64_t max_tensors = 1 << 18;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // Offsets relative to the start of the data section (after the header).
  uint64_t data_begin = 0;
  uint64_t data_end = 0;

  int64_t NumElements() const;
  uint64_t ByteSize() const { return data_end - data_begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // In data-offset order.
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // Absolute file offset of the data section.
};

// Validates a whole file's bytes: header length bounded and inside the file,
// JSON well formed, every entry with a known dtype, a shape of non-negative
// dims, offsets inside the data section, byte size == product(shape) * dtype
// size, no overlaps and no gaps, data section fully covered. Every error
// names the tensor (where there is one) and the problem.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::string_view file_bytes, const SafetensorsLimits& limits = {});

// One memory-mapped safetensors file.
class SafetensorsFile {
 public:
  // Maps `path` through `fs` (not owned) and validates its header.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(
      const std::string& path, const SafetensorsLimits& limits = {},
      FileSystem* fs = FileSystem::Default());

  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const { return file_->size(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const {
    return header_.metadata;
  }
  // nullptr when absent.
  const TensorInfo* Find(absl::string_view name) const;

  // Metadata field `name` read as a non-negative integer. InvalidArgument
  // names the file and the field when it is missing or not such a count.
  absl::StatusOr<int64_t> MetadataCount(absl::string_view name) const;

  // The stored bytes of a tensor (valid while this object lives).
  absl::Span<const uint8_t> RawBytes(const TensorInfo& info) const;

  // Drops the mapped pages of a tensor's bytes [begin, end) from this
  // process's memory (MappedFile::ReleasePages): for readers that stream
  // a large tensor a slice at a time.
  void ReleaseBytes(const TensorInfo& info, uint64_t begin, uint64_t end) const;

  // A tensor converted to float32. NotFound names the missing tensor.
  absl::StatusOr<FloatTensor> ReadFloat(absl::string_view name) const;

 private:
  SafetensorsFile(std::unique_ptr<MappedFile> file, SafetensorsHeader header);

  std::unique_ptr<MappedFile> file_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> tensors_ slot
};

// The bytes of `values` as stored (for TensorToWrite::data); valid while
// `values` lives unchanged.
template <typename T>
absl::string_view VectorBytes(const std::vector<T>& values) {
  static_assert(std::is_trivially_copyable<T>::value,
                "tensor elements are stored as raw bytes");
  return absl::string_view(reinterpret_cast<const char*>(values.data()),
                           values.size() * sizeof(T));
}

// A tensor to write: raw little-endian bytes in `dtype`, C order.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  absl::string_view data;  // Must be product(shape) * DTypeSize(dtype) bytes.
};

// A tensor whose bytes are streamed after the header is written.
struct TensorDeclaration {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

// Writes a safetensors file atomically (temporary name, then rename). Tensors
// are laid out in the order given; the header is padded to 8 bytes. Written
// through `fs`.
absl::Status WriteSafetensors(
    const std::string& path, const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata = {},
    FileSystem* fs = FileSystem::Default());

// Writes a safetensors file too large to hold in memory: the tensors are
// declared up front, their bytes appended in declared order, and the file
// appears (atomically, as with WriteSafetensors) only at Commit. Destroying
// an uncommitted writer removes the temporary file.
class SafetensorsStreamWriter {
 public:
  // Validates the declarations (as WriteSafetensors does) and writes the
  // header through `fs` (not owned; must outlive the writer).
  static absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> Create(
      const std::string& path, const std::vector<TensorDeclaration>& tensors,
      const std::map<std::string, std::string>& metadata = {},
      FileSystem* fs = FileSystem::Default());

  // The next bytes of the data section. InvalidArgument past the declared
  // size; the first write error otherwise.
  absl::Status Append(absl::string_view bytes);
  // FailedPrecondition unless every declared byte was appended; then syncs
  // and renames into place.
  absl::Status Commit();

 private:
  SafetensorsStreamWriter(const std::string& path, uint64_t data_bytes,
                          FileSystem* fs);

  std::string path_;
  AtomicFileWriter writer_;
  uint64_t data_bytes_;
  uint64_t written_ = 0;
};

}  // namespace quant

#endif  // QUANT_CORE_IO_SAFETENSORS_H_
