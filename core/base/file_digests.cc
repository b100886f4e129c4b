// FileDigests: sha256 of files remembered by identity.
#include "core/base/file_digests.h"

#include "absl/time/clock.h"
#include "core/base/sha256.h"

namespace quant {

absl::StatusOr<std::string> FileDigests::Sha256File(const std::string& path,
                                                    FileSystem* fs) {
  absl::StatusOr<FileIdentity> before = fs->Identify(path);
  if (before.ok()) {
    MutexLock lock(&mu_);
    auto it = digests_.find(path);
    if (it != digests_.end() && it->second.first == *before) {
      return it->second.second;
    }
  }
  absl::StatusOr<std::string> digest = quant::Sha256File(path, fs);
  {
    MutexLock lock(&mu_);
    ++files_read_;
  }
  if (!digest.ok() || !before.ok()) return digest;
  absl::StatusOr<FileIdentity> after = fs->Identify(path);
  if (!after.ok() || *after != *before) return digest;
  // A file changed this recently may change again within the same tick of
  // its file system's clock (1 s on some) keeping its identity (git's
  // "racily clean" files).
  if (after->changed_ns > absl::GetCurrentTimeNanos() - options_.racy_ns) {
    return digest;
  }
  MutexLock lock(&mu_);
  if (static_cast<int>(digests_.size()) >= options_.max_files) digests_.clear();
  digests_[path] = {*after, *digest};
  return digest;
}

int FileDigests::files_read() const {
  MutexLock lock(&mu_);
  return files_read_;
}

absl::StatusOr<std::string> Sha256FileWith(FileDigests* digests,
                                           const std::string& path,
                                           FileSystem* fs) {
  if (digests != nullptr) return digests->Sha256File(path, fs);
  return Sha256File(path, fs);
}

}  // namespace quant
