// Read-only memory mapping of a whole file.
#include "core/base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/read_roots.h"

namespace quant {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(
    const std::string& path) {
  // A regular file under the thread's read roots (read_roots.h).
  absl::StatusOr<int> opened = OpenRegularFileForRead(path);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(
        absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // The mapping keeps the file alive.
  if (data == MAP_FAILED) {
    return absl::InternalError(
        absl::StrCat("cannot mmap ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<MappedFile>(
      new MappedFile(path, static_cast<const uint8_t*>(data), size));
}

void MappedFile::ReleasePages(size_t offset, size_t length) const {
  if (data_ == nullptr || offset >= size_) return;
  length = std::min(length, size_ - offset);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_) + offset;
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + length) / page * page;
  if (last <= first) return;
  // Advice only: a failure leaves the pages resident, which is harmless.
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

std::unique_ptr<MappedFile> MappedFile::Prefix(std::unique_ptr<MappedFile> file,
                                               size_t bytes) {
  file->size_ = std::min(file->size_, bytes);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) {
    ::munmap(const_cast<uint8_t*>(data_), mapped_size_);
  }
}

}  // namespace quant
