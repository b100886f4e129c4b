// Temp-file-then-rename writing, streamed.
#include "core/io/atomic_file_writer.h"

#include <unistd.h>

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace quant {

AtomicFileWriter::AtomicFileWriter(std::string path, FileSystem* fs)
    : path_(std::move(path)), fs_(fs) {
  std::random_device random;
  temp_path_ =
      absl::StrCat(path_, ".tmp-", ::getpid(), "-", random() & 0xFFFFFFu);
  absl::StatusOr<std::unique_ptr<WritableFile>> file =
      fs_->NewWritableFile(temp_path_);
  if (file.ok()) {
    file_ = std::move(*file);
  } else {
    status_ = file.status();
    temp_path_.clear();  // Nothing was created, so nothing to remove.
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  file_.reset();  // Closes it first.
  if (!committed_ && !temp_path_.empty()) {
    fs_->RemoveFile(temp_path_).IgnoreError();
  }
}

void AtomicFileWriter::Append(absl::string_view data) {
  if (!status_.ok() || data.empty()) return;
  if (file_ == nullptr) {
    status_ = absl::FailedPreconditionError(
        absl::StrCat(path_, ": written after Commit"));
    return;
  }
  status_ = file_->Append(data);
}

absl::Status AtomicFileWriter::Commit() {
  if (committed_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": Commit called twice"));
  }
  if (status_.ok()) status_ = file_->Sync();
  if (file_ != nullptr) {
    const absl::Status closed = file_->Close();
    if (status_.ok()) status_ = closed;
    file_.reset();
  }
  if (status_.ok()) status_ = fs_->RenameFile(temp_path_, path_);
  committed_ = status_.ok();
  return status_;
}

}  // namespace quant
