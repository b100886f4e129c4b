// Temp-file-then-rename writing, streamed.
#include "core/io/atomic_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"

namespace quant {
namespace {}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  std::random_device random;
  temp_path_ =
      absl::StrCat(path_, ".tmp-", ::getpid(), "-", random() & 0xFFFFFFu);
  fd_ =
      ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) status_ = ErrnoToStatus("cannot create", temp_path_, errno);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::Append(absl::string_view data) {
  while (status_.ok() && !data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      status_ = ErrnoToStatus("cannot write", temp_path_, errno);
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

absl::Status AtomicFileWriter::Commit() {
  if (status_.ok() && ::fsync(fd_) != 0) {
    status_ = ErrnoToStatus("cannot sync", temp_path_, errno);
  }
  if (fd_ >= 0) {
    if (::close(fd_) != 0 && status_.ok()) {
      status_ = ErrnoToStatus("cannot close", temp_path_, errno);
    }
    fd_ = -1;
  }
  if (status_.ok() && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    status_ = ErrnoToStatus("cannot rename into", path_, errno);
  }
  committed_ = status_.ok();
  return status_;
}

}  // namespace quant
