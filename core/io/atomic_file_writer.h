// Streams a file to disk under a temporary name in the destination folder,
// then syncs and renames it into place, so readers see the old file or the
// whole new one. Used for checkpoints too large to assemble in memory. Writes
// go through a FileSystem (default: POSIX) so tests can inject faults.
#ifndef QUANT_CORE_IO_ATOMIC_FILE_WRITER_H_
#define QUANT_CORE_IO_ATOMIC_FILE_WRITER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"

namespace quant {

class AtomicFileWriter {
 public:
  // Creates the temporary file through `fs` (not owned; must outlive this);
  // check status() before appending.
  explicit AtomicFileWriter(std::string path,
                            FileSystem* fs = FileSystem::Default());
  // Removes the temporary file unless Commit() succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // The first error so far (creation or append).
  const absl::Status& status() const { return status_; }

  // Appends bytes; a no-op once an error happened.
  void Append(absl::string_view data);

  // Syncs, closes and renames into place. Returns the first error.
  absl::Status Commit();

 private:
  std::string path_;
  FileSystem* fs_;
  std::string temp_path_;               // Empty when it could not be created.
  std::unique_ptr<WritableFile> file_;  // Null once closed.
  bool committed_ = false;
  absl::Status status_;
};

}  // namespace quant

#endif  // QUANT_CORE_IO_ATOMIC_FILE_WRITER_H_
