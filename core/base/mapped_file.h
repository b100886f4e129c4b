// Read-only memory mapping of a whole file, so checkpoints are never copied
// into memory wholesale.
#ifndef QUANT_CORE_BASE_MAPPED_FILE_H_
#define QUANT_CORE_BASE_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to size 0 with a null data().
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path);

  // The first `bytes` bytes of `file` (all of it when it is shorter), owning
  // its mapping: what a reader racing a writer would have seen. For
  // injected faults (tests/support/fault_injecting_file_system.h).
  static std::unique_ptr<MappedFile> Prefix(std::unique_ptr<MappedFile> file,
                                            size_t bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  absl::string_view view() const {
    return absl::string_view(reinterpret_cast<const char*>(data_), size_);
  }

  // Lets the kernel drop the pages wholly inside [offset, offset + length)
  // from this process's memory (they are read again from the file if
  // touched): a reader streaming a large file keeps only what it uses.
  void ReleasePages(size_t offset, size_t length) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size), mapped_size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;         // What the reader sees.
  size_t mapped_size_;  // What munmap releases.
};

}  // namespace quant

#endif  // QUANT_CORE_BASE_MAPPED_FILE_H_
